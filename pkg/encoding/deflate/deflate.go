// Package deflate is the raw DEFLATE codec (RFC 1951) of p2pmsg's encoding
// layer, built on pkg/encoding and github.com/klauspost/compress/flate.
package deflate

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"

	"github.com/p2pmsg/p2pmsg/internal/flatecodec"
	"github.com/p2pmsg/p2pmsg/internal/specfactory"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "deflate"

// Level bounds: HuffmanOnly (-2) to BestCompression (9); the default is 6.
const (
	minLevel     = flate.HuffmanOnly
	maxLevel     = flate.BestCompression
	defaultLevel = 6
)

// Codec compresses with DEFLATE at one level. It is safe for concurrent use.
type Codec struct {
	level   int
	writers sync.Pool
	readers sync.Pool
}

var _ encoding.Codec = (*Codec)(nil)

// New returns a deflate codec at the default level, 6. encoding.NewCodec
// builds one at another level from its spec ("deflate:9").
func New() *Codec { return &Codec{level: defaultLevel} }

func init() {
	_ = encoding.Register(New())
	// deflate[:level], level -2 (Huffman only) to 9 (best); no model.
	_ = encoding.RegisterFactory(Name, specfactory.Level(Name, minLevel, maxLevel, defaultLevel,
		func(l int) encoding.Codec { return &Codec{level: l} }))
}

// Name returns "deflate".
func (c *Codec) Name() string { return Name }

// Kind returns encoding.KindCompression.
func (c *Codec) Kind() encoding.Kind { return encoding.KindCompression }

// Params records the level.
func (c *Codec) Params() encoding.Params { return encoding.Params{Level: c.level} }

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }

// Encode appends the DEFLATE stream of src to dst.
func (c *Codec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	a := &appender{b: dst}
	w, _ := c.writers.Get().(*flate.Writer)
	if w == nil {
		var err error
		if w, err = flate.NewWriter(a, c.level); err != nil {
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
	w.Reset(io.Discard)
	c.writers.Put(w)
	return a.b, nil
}

// Decode appends the decompression of src to dst, at most max bytes.
func (c *Codec) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	br := bytes.NewReader(src)
	r, _ := c.readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReader(br)
	} else {
		_ = r.(flate.Resetter).Reset(br, nil)
	}
	out, err := flatecodec.ReadAll(dst, r, max)
	if err == nil && br.Len() != 0 {
		err = fmt.Errorf("%w: %d trailing bytes", encoding.ErrCorrupt, br.Len())
	}
	if err == nil {
		c.readers.Put(r)
	}
	return out, err
}
