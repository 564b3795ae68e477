// Package gzip is the gzip codec (RFC 1952) of p2pmsg's encoding layer,
// built on pkg/encoding and github.com/klauspost/compress/gzip.
package gzip

import (
	"bytes"
	"fmt"
	"sync"

	kgzip "github.com/klauspost/compress/gzip"

	"github.com/p2pmsg/p2pmsg/internal/flatecodec"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "gzip"

// Level bounds: HuffmanOnly (-2) to BestCompression (9); DefaultLevel is 6.
const (
	MinLevel     = kgzip.HuffmanOnly
	MaxLevel     = kgzip.BestCompression
	DefaultLevel = 6
)

// Codec compresses with gzip at one level. It is safe for concurrent use.
type Codec struct {
	level   int
	writers sync.Pool
	readers sync.Pool
}

var _ encoding.Codec = (*Codec)(nil)

// Option configures a Codec.
type Option func(*Codec) error

// WithLevel sets the compression level, MinLevel to MaxLevel (0 stores).
// Default: DefaultLevel.
func WithLevel(l int) Option {
	return func(c *Codec) error {
		if l < MinLevel || l > MaxLevel {
			return fmt.Errorf("%w: gzip level %d", encoding.ErrBadOption, l)
		}
		c.level = l
		return nil
	}
}

// New returns a gzip codec.
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
	_ = encoding.RegisterFactory(Name, encoding.SpecFactory(Name, New, nil, WithLevel, nil)) // gzip[:level], no model
}

// Name returns "gzip".
func (c *Codec) Name() string { return Name }

// Kind returns encoding.KindCompression.
func (c *Codec) Kind() encoding.Kind { return encoding.KindCompression }

// Params records the level.
func (c *Codec) Params() encoding.Params { return encoding.Params{Level: c.level} }

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }

// Encode appends the gzip stream of src to dst.
func (c *Codec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	a := &appender{b: dst}
	w, _ := c.writers.Get().(*kgzip.Writer)
	if w == nil {
		var err error
		if w, err = kgzip.NewWriterLevel(a, c.level); err != nil {
			return dst, err
		}
	} else {
		w.Reset(a)
	}
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	w.Reset(nil)
	c.writers.Put(w)
	return a.b, nil
}

// Decode appends the decompression of src to dst, at most max bytes.
func (c *Codec) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	br := bytes.NewReader(src)
	r, _ := c.readers.Get().(*kgzip.Reader)
	var err error
	if r == nil {
		r, err = kgzip.NewReader(br)
	} else {
		err = r.Reset(br)
	}
	if err != nil {
		return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	r.Multistream(false)
	out, err := flatecodec.ReadAll(dst, r, max)
	if err == nil && br.Len() != 0 {
		err = fmt.Errorf("%w: %d trailing bytes", encoding.ErrCorrupt, br.Len())
	}
	if err == nil {
		c.readers.Put(r)
	}
	return out, err
}
