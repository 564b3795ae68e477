// Package zstdenc gives the zstd-based codecs (pkg/encoding/zstd,
// pkg/encoding/xmlc) an encoder for github.com/klauspost/compress/zstd's
// EncodeAll that allocates for the input it has, not for the level's
// window.
//
// An encoder keeps a history buffer of twice its window (a window of 8
// MiB at every level but the fastest, 4 MiB there), allocated at the first
// encode that needs it however small the input: at the better and best
// levels every input, at the others any input larger than one block.
// Inputs that fit a smaller window get the same bytes from an encoder with
// that window, since no match can reach further back than the input (and
// the dictionary) holds: Encoder sends them to one, and only larger inputs
// to the level's own encoder. Each is built at its first use. Once the
// level's encoder has been needed, it takes every input and the small one
// is let go: a sender of larger messages pays for one encoder's tables, as
// before, not for two.
package zstdenc

import (
	"fmt"
	"sync/atomic"

	kzstd "github.com/klauspost/compress/zstd"
)

// SmallWindow is the window of the encoder for smaller inputs: 1.1 MiB of
// history rather than 16. Messages are mostly far smaller, and a sender
// whose messages all fit builds only that encoder; one that sends a larger
// message builds the level's (whose tables, 34 MB at the best level, are
// not shared), and from then on uses only that one.
const SmallWindow = 1 << 20

// Encoder encodes whole inputs, like kzstd.Encoder.EncodeAll. It is safe
// for concurrent use.
type Encoder struct {
	small atomic.Pointer[kzstd.Encoder] // nil once full has been used
	full  *kzstd.Encoder
	limit int // inputs up to limit bytes go to small
}

// New returns an encoder with opts, which must not set the window or the
// encoder's memory use. prefix is the dictionary content the encoder is
// given (0 for none): a match may reach back into it, so it takes its
// share of the small window.
func New(prefix int, opts ...kzstd.EOption) (*Encoder, error) {
	full, err := kzstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, err
	}
	e := &Encoder{full: full, limit: SmallWindow - prefix}
	if e.limit <= 0 {
		return e, nil
	}
	// WithLowerEncoderMem sizes the history to the window plus one block
	// (rather than twice the window, and at least 1 MiB); an input that
	// fits the window never fills it, so what is encoded is the same.
	small, err := kzstd.NewWriter(nil, append(opts[:len(opts):len(opts)], kzstd.WithWindowSize(SmallWindow), kzstd.WithLowerEncoderMem(true))...)
	if err != nil {
		return nil, fmt.Errorf("zstd encoder for small inputs: %w", err)
	}
	e.small.Store(small)
	return e, nil
}

// EncodeAll appends the zstd frame of src to dst.
func (e *Encoder) EncodeAll(src, dst []byte) []byte {
	if len(src) <= e.limit {
		if s := e.small.Load(); s != nil {
			return s.EncodeAll(src, dst)
		}
	}
	if e.small.Load() != nil {
		e.small.Store(nil)
	}
	return e.full.EncodeAll(src, dst)
}
