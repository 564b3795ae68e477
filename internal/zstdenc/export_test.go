package zstdenc

// HasSmall reports whether inputs that fit the small window still go to
// the small encoder.
func (e *Encoder) HasSmall() bool { return e.small.Load() != nil }
