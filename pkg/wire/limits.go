package wire

import "fmt"

// Limits bound what the decoder accepts. The zero value of a field means
// its default.
type Limits struct {
	// MaxMessageSize bounds the bytes of one message. Default 64 MiB.
	MaxMessageSize int64
	// MaxElementSize bounds one element's data. Default: MaxMessageSize.
	MaxElementSize int64
	// MaxElements bounds the element count, signatures included.
	// Default and maximum: MaxElements (32767).
	MaxElements int
	// MaxNamespaces bounds the declared namespaces. Default and maximum:
	// MaxNamespaces (253).
	MaxNamespaces int
	// MaxNameLen bounds names and namespaces, in bytes. Default and
	// maximum: MaxStringLen (32767).
	MaxNameLen int
	// MaxMIMELen bounds MIME types, in bytes. Default 1024, maximum
	// MaxStringLen.
	MaxMIMELen int
	// MaxSignatureDepth bounds how deeply signature elements nest
	// (a signature of a signature ...). Default 4, maximum 64.
	MaxSignatureDepth int
}

// Defaults.
const (
	DefaultMaxMessageSize    = 64 << 20
	DefaultMaxMIMELen        = 1024
	DefaultMaxSignatureDepth = 4
)

// Option changes the decoder's limits. Options validate their argument:
// a bad one makes the constructor or call that received it fail.
type Option func(*Limits) error

// WithLimits replaces all limits at once; zero fields take their defaults.
func WithLimits(l Limits) Option {
	return func(dst *Limits) error { *dst = l; return nil }
}

// WithMaxMessageSize bounds one message's size in bytes (1 to 2^40).
func WithMaxMessageSize(n int64) Option {
	return func(l *Limits) error {
		if n < 1 || n > 1<<40 {
			return fmt.Errorf("%w: max message size %d out of range [1, 2^40]", ErrLimit, n)
		}
		l.MaxMessageSize = n
		return nil
	}
}

// WithMaxElementSize bounds one element's data (1 to MaxElementSize).
func WithMaxElementSize(n int64) Option {
	return func(l *Limits) error {
		if n < 1 || n > MaxElementSize {
			return fmt.Errorf("%w: max element size %d out of range [1, %d]", ErrLimit, n, MaxElementSize)
		}
		l.MaxElementSize = n
		return nil
	}
}

// WithMaxElements bounds the element count (1 to MaxElements).
func WithMaxElements(n int) Option {
	return func(l *Limits) error {
		if n < 1 || n > MaxElements {
			return fmt.Errorf("%w: max elements %d out of range [1, %d]", ErrLimit, n, MaxElements)
		}
		l.MaxElements = n
		return nil
	}
}

// WithMaxNamespaces bounds the declared namespaces (0 to MaxNamespaces).
func WithMaxNamespaces(n int) Option {
	return func(l *Limits) error {
		if n < 0 || n > MaxNamespaces {
			return fmt.Errorf("%w: max namespaces %d out of range [0, %d]", ErrLimit, n, MaxNamespaces)
		}
		if n == 0 {
			n = -1 // explicit zero: only the implicit namespaces
		}
		l.MaxNamespaces = n
		return nil
	}
}

// WithMaxNameLen bounds names and namespaces in bytes (1 to MaxStringLen).
func WithMaxNameLen(n int) Option {
	return func(l *Limits) error {
		if n < 1 || n > MaxStringLen {
			return fmt.Errorf("%w: max name length %d out of range [1, %d]", ErrLimit, n, MaxStringLen)
		}
		l.MaxNameLen = n
		return nil
	}
}

// WithMaxMIMELen bounds MIME types in bytes (1 to MaxStringLen).
func WithMaxMIMELen(n int) Option {
	return func(l *Limits) error {
		if n < 1 || n > MaxStringLen {
			return fmt.Errorf("%w: max MIME length %d out of range [1, %d]", ErrLimit, n, MaxStringLen)
		}
		l.MaxMIMELen = n
		return nil
	}
}

// WithMaxSignatureDepth bounds signature nesting (0 to 64; 0 refuses
// signed elements).
func WithMaxSignatureDepth(n int) Option {
	return func(l *Limits) error {
		if n < 0 || n > 64 {
			return fmt.Errorf("%w: max signature depth %d out of range [0, 64]", ErrLimit, n)
		}
		if n == 0 {
			n = -1
		}
		l.MaxSignatureDepth = n
		return nil
	}
}

// resolve applies opts to the defaults and checks the result.
func resolve(opts []Option) (Limits, error) {
	var l Limits
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&l); err != nil {
			return Limits{}, err
		}
	}
	return l.normalized()
}

func (l Limits) normalized() (Limits, error) {
	if l.MaxMessageSize == 0 {
		l.MaxMessageSize = DefaultMaxMessageSize
	}
	if l.MaxElementSize == 0 {
		l.MaxElementSize = min(l.MaxMessageSize, MaxElementSize)
	}
	if l.MaxElements == 0 {
		l.MaxElements = MaxElements
	}
	switch l.MaxNamespaces {
	case 0:
		l.MaxNamespaces = MaxNamespaces
	case -1:
		l.MaxNamespaces = 0
	}
	if l.MaxNameLen == 0 {
		l.MaxNameLen = MaxStringLen
	}
	if l.MaxMIMELen == 0 {
		l.MaxMIMELen = DefaultMaxMIMELen
	}
	switch l.MaxSignatureDepth {
	case 0:
		l.MaxSignatureDepth = DefaultMaxSignatureDepth
	case -1:
		l.MaxSignatureDepth = 0
	}
	switch {
	case l.MaxMessageSize < 0, l.MaxElementSize < 0 || l.MaxElementSize > MaxElementSize,
		l.MaxElements < 0 || l.MaxElements > MaxElements,
		l.MaxNamespaces < 0 || l.MaxNamespaces > MaxNamespaces,
		l.MaxNameLen < 0 || l.MaxNameLen > MaxStringLen,
		l.MaxMIMELen < 0 || l.MaxMIMELen > MaxStringLen,
		l.MaxSignatureDepth < 0 || l.MaxSignatureDepth > 64:
		return Limits{}, fmt.Errorf("%w: limits out of range: %+v", ErrLimit, l)
	}
	return l, nil
}

var defaultLimits, _ = Limits{}.normalized()

// DefaultLimits returns the limits used when no option is given.
func DefaultLimits() Limits { return defaultLimits }
