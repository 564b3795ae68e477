package zstdenc

// HasSmall reports whether inputs that fit the small window still go to
// the small encoder.
func (e *Encoder) HasSmall() bool { return e.small.Load() != nil }

// Built returns how many encoders of each kind e holds, counting the one
// each kind builds at New to check its options (which allocates nothing
// until it encodes); small is 0 once the small encoders are let go.
func (e *Encoder) Built() (small, full int) {
	if s := e.small.Load(); s != nil {
		small = s.count()
	}
	return small, e.full.count()
}

func (p *pool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.built
}

// OnHeld makes every encode call f while it holds an encoder. Set it
// before the first encode.
func (e *Encoder) OnHeld(f func()) {
	if s := e.small.Load(); s != nil {
		s.held = f
	}
	e.full.held = f
}
