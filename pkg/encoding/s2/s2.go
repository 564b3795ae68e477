// Package s2 is the S2 codec (a faster Snappy extension, block format) of
// p2pmsg's encoding layer, built on pkg/encoding and
// github.com/klauspost/compress/s2.
package s2

import (
	"fmt"
	"slices"

	ks2 "github.com/klauspost/compress/s2"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "s2"

// Levels: 1 default (fastest), 2 better, 3 best.
const (
	MinLevel     = 1
	MaxLevel     = 3
	DefaultLevel = 1
)

// Codec compresses with S2 blocks. It is safe for concurrent use.
type Codec struct{ level int }

var _ encoding.Codec = (*Codec)(nil)

// Option configures a Codec.
type Option func(*Codec) error

// WithLevel sets the level, MinLevel to MaxLevel. Default: DefaultLevel.
func WithLevel(l int) Option {
	return func(c *Codec) error {
		if l < MinLevel || l > MaxLevel {
			return fmt.Errorf("%w: s2 level %d", encoding.ErrBadOption, l)
		}
		c.level = l
		return nil
	}
}

// New returns an s2 codec.
func New(opts ...Option) (*Codec, error) {
	c := &Codec{level: DefaultLevel}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func init() {
	c, _ := New()
	_ = encoding.Register(c)
	_ = encoding.RegisterFactory(Name, encoding.SpecFactory(Name, New, nil, WithLevel, nil)) // s2[:level], no model
}

// Name returns "s2".
func (c *Codec) Name() string { return Name }

// Kind returns encoding.KindCompression.
func (c *Codec) Kind() encoding.Kind { return encoding.KindCompression }

// Params records the level.
func (c *Codec) Params() encoding.Params { return encoding.Params{Level: c.level} }

// Encode appends the S2 block of src to dst.
func (c *Codec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	n := ks2.MaxEncodedLen(len(src))
	if n < 0 {
		return dst, fmt.Errorf("%w: input too large for s2", encoding.ErrBadOption)
	}
	start := len(dst)
	dst = slices.Grow(dst, n)
	buf := dst[start : start+n]
	var out []byte
	switch c.level {
	case 2:
		out = ks2.EncodeBetter(buf, src)
	case 3:
		out = ks2.EncodeBest(buf, src)
	default:
		out = ks2.Encode(buf, src)
	}
	return dst[:start+len(out)], nil
}

// Decode appends the decoded block to dst; the block's recorded length is
// checked against max before allocating.
func (c *Codec) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	n, err := ks2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	if n > max {
		return dst, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, n, max)
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	out, err := ks2.Decode(dst[start:], src)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	return dst[:start+len(out)], nil
}
