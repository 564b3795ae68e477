// Package gzip is the gzip codec (RFC 1952) of p2pmsg's encoding layer,
// built on pkg/encoding and github.com/klauspost/compress/gzip.
package gzip

import (
	"bytes"
	"fmt"
	"sync"

	kgzip "github.com/klauspost/compress/gzip"

	"github.com/p2pmsg/p2pmsg/internal/flatecodec"
	"github.com/p2pmsg/p2pmsg/internal/specfactory"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "gzip"

// Level bounds: HuffmanOnly (-2) to BestCompression (9); the default is 6.
const (
	minLevel     = kgzip.HuffmanOnly
	maxLevel     = kgzip.BestCompression
	defaultLevel = 6
)

// Codec compresses with gzip at one level. It is safe for concurrent use.
type Codec struct {
	level   int
	writers sync.Pool
	readers sync.Pool
}

var _ encoding.Codec = (*Codec)(nil)

// New returns a gzip codec at the default level, 6. encoding.NewCodec
// builds one at another level from its spec ("gzip:9").
func New() *Codec { return &Codec{level: defaultLevel} }

func init() {
	_ = encoding.Register(New())
	// gzip[:level], level -2 (Huffman only) to 9 (best); no model.
	_ = encoding.RegisterFactory(Name, specfactory.Level(Name, minLevel, maxLevel, defaultLevel,
		func(l int) encoding.Codec { return &Codec{level: l} }))
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
