// Package s2 is the S2 codec (a faster Snappy extension, block format) of
// p2pmsg's encoding layer, built on pkg/encoding and
// github.com/klauspost/compress/s2.
package s2

import (
	"encoding/binary"
	"fmt"
	"slices"

	ks2 "github.com/klauspost/compress/s2"

	"github.com/p2pmsg/p2pmsg/internal/specfactory"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "s2"

// Levels: 1 default (fastest), 2 better, 3 best.
const (
	minLevel     = 1
	maxLevel     = 3
	defaultLevel = 1
)

// Codec compresses with S2 blocks. It is safe for concurrent use.
type Codec struct{ level int }

var _ encoding.Codec = (*Codec)(nil)

// New returns an s2 codec at the default level, 1. encoding.NewCodec
// builds one at another level from its spec ("s2:3").
func New() *Codec { return &Codec{level: defaultLevel} }

func init() {
	_ = encoding.Register(New())
	// s2[:level], level 1 (fastest) to 3 (best); no model.
	_ = encoding.RegisterFactory(Name, specfactory.Level(Name, minLevel, maxLevel, defaultLevel,
		func(l int) encoding.Codec { return &Codec{level: l} }))
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

// Decode appends the decoded block to dst. The block's recorded length is
// checked against max before anything is allocated; room beyond what dst
// has is made only for a block whose tags add up to its length
// (checkTags), as the decoder needs all of it before it starts.
func (c *Codec) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	n, err := ks2.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	if n > max {
		return dst, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, n, max)
	}
	if n > cap(dst)-len(dst) {
		_, hl := binary.Uvarint(src) // DecodedLen read it
		if err := checkTags(src[hl:], n); err != nil {
			return dst, err
		}
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	out, err := ks2.Decode(dst[start:], src)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	return dst[:start+len(out)], nil
}
