package codecbench

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"sync"

	"github.com/p2pmsg/p2pmsg/internal/flatecodec"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// StdGzipName is the spec name of Go's own compress/gzip, measured as the
// reference the XML codec's speed targets name. It is not registered as a
// codec: p2pmsg's gzip codec (klauspost/compress) writes the same format
// faster.
const StdGzipName = "stdgzip"

// stdGzip is compress/gzip behind the Codec interface, for measurement,
// with writers and readers reused as the gzip codec reuses its own.
type stdGzip struct {
	level   int
	writers sync.Pool
	readers sync.Pool
}

func newStdGzip(level int) (*stdGzip, error) {
	if _, err := stdgzip.NewWriterLevel(nil, level); err != nil {
		return nil, fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
	}
	return &stdGzip{level: level}, nil
}

func (g *stdGzip) Name() string            { return StdGzipName }
func (g *stdGzip) Params() encoding.Params { return encoding.Params{Level: g.level} }

func (g *stdGzip) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	w, _ := g.writers.Get().(*stdgzip.Writer)
	if w == nil {
		w, _ = stdgzip.NewWriterLevel(b, g.level)
	} else {
		w.Reset(b)
	}
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	g.writers.Put(w)
	return b.Bytes(), nil
}

func (g *stdGzip) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	br := bytes.NewReader(src)
	r, _ := g.readers.Get().(*stdgzip.Reader)
	var err error
	if r == nil {
		r, err = stdgzip.NewReader(br)
	} else {
		err = r.Reset(br)
	}
	if err != nil {
		return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	r.Multistream(false)
	out, err := flatecodec.ReadAll(dst, r, max)
	if err == nil {
		g.readers.Put(r)
	}
	return out, err
}
