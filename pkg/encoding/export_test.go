package encoding

// AppendHeader and KindOf let the external tests craft headers (hostile
// ones included) and check kinds.
var (
	AppendHeader = appendHeader
	KindOf       = kindOf
)

// WithoutCodecs runs f with an empty default registry, as in a program
// that imports no codec package. Tests in this package run one at a
// time, so none sees the swap.
func WithoutCodecs(f func()) {
	saved := defaultRegistry
	defaultRegistry = &Registry{codecs: make(map[string]Codec), factories: make(map[string]Factory)}
	defer func() { defaultRegistry = saved }()
	f()
}
