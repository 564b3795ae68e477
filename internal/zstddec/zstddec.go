// Package zstddec gives the zstd-based codecs (pkg/encoding/zstd,
// pkg/encoding/xmlc) decoders for github.com/klauspost/compress/zstd's
// DecodeAll that keep nothing of what they decoded once the call returns.
//
// A kzstd.Decoder's block decoder keeps a reference to the output of the
// last frame it decoded (its sequence decoder's output slice) and to that
// frame's last block of input until it decodes another frame: a codec's
// decoder held the last message it decoded, whichever the caller had
// since let go, and a receiver with models held one per model and per
// processor, each as large as the decoded-size limit allows (64 MiB by
// default). A Pool decodes each frame with a decoder of its own (one
// block decoder), then has it decode a constant empty frame, which
// resets those references to the constant, before it is used again.
package zstddec

import (
	"runtime"
	"sync"

	kzstd "github.com/klauspost/compress/zstd"
)

// emptyFrame is a zstd frame of no content: single segment, content size
// 0, one empty raw block, the last.
var emptyFrame = []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00}

// Pool decodes whole frames, like kzstd.Decoder.DecodeAll. It is safe for
// concurrent use, and concurrent calls decode in parallel, each with a
// decoder of its own: it builds one when every one it has is busy, and
// keeps at most GOMAXPROCS of them idle (no more decode at once on a
// CPU each; one more built later costs a few kilobytes and its buffers,
// which a decode of a block refills anyway).
type Pool struct {
	opts []kzstd.DOption

	mu   sync.Mutex
	idle []*kzstd.Decoder
}

// New returns a pool of decoders built with opts, which must not set the
// concurrency. It builds one, to check opts.
func New(opts ...kzstd.DOption) (*Pool, error) {
	p := &Pool{opts: append(opts[:len(opts):len(opts)], kzstd.WithDecoderConcurrency(1))}
	d, err := kzstd.NewReader(nil, p.opts...)
	if err != nil {
		return nil, err
	}
	p.idle = append(p.idle, d)
	return p, nil
}

// DecodeAll appends to dst what the frames of src decode to, as
// kzstd.Decoder.DecodeAll does with the pool's options.
func (p *Pool) DecodeAll(src, dst []byte) ([]byte, error) {
	d, err := p.get()
	if err != nil {
		return dst, err
	}
	out, err := d.DecodeAll(src, dst)
	// The empty frame resets what d's block decoder refers to (the
	// output and input above) to itself; it cannot fail.
	_, _ = d.DecodeAll(emptyFrame, nil)
	p.put(d)
	return out, err
}

// get returns an idle decoder, or a new one if none is idle (the options
// built one at New, so they do not fail now).
func (p *Pool) get() (*kzstd.Decoder, error) {
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 {
		p.mu.Unlock()
		return kzstd.NewReader(nil, p.opts...)
	}
	d := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	p.mu.Unlock()
	return d, nil
}

func (p *Pool) put(d *kzstd.Decoder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) < runtime.GOMAXPROCS(0) {
		p.idle = append(p.idle, d)
	}
}
