// Package zstdenc gives the zstd-based codecs (pkg/encoding/zstd,
// pkg/encoding/xmlc) an encoder for github.com/klauspost/compress/zstd's
// EncodeAll that allocates for the input it has, not for the level's
// window.
//
// An encoder at any level keeps a history buffer of twice its window (8
// MiB at every level but the fastest), allocated at its first encode
// however small the input; at the better and best levels EncodeAll uses
// it for every input. Inputs that fit a smaller window get the same bytes
// from an encoder with that window, since no match can reach further back
// than the input (and the dictionary) holds: Encoder sends them to one,
// and only larger inputs to the level's own encoder. Each is built at its
// first use.
package zstdenc

import (
	"fmt"

	kzstd "github.com/klauspost/compress/zstd"
)

// SmallWindow is the window of the encoder for smaller inputs. Messages
// are mostly far smaller (a window of 1 MiB keeps 1.1 MiB of history
// rather than 16), while one that fits it still goes to a single encoder:
// each encoder has its own match tables, 34 MB at the best level, so a
// sender of ordinary messages pays for the tables once.
const SmallWindow = 1 << 20

// Encoder encodes whole inputs, like kzstd.Encoder.EncodeAll. It is safe
// for concurrent use.
type Encoder struct {
	small, full *kzstd.Encoder
	limit       int // inputs up to limit bytes go to small
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
	// (rather than twice the window, and at least 1 MiB) and does not
	// change what is encoded.
	small := append(opts[:len(opts):len(opts)], kzstd.WithWindowSize(SmallWindow), kzstd.WithLowerEncoderMem(true))
	if e.small, err = kzstd.NewWriter(nil, small...); err != nil {
		return nil, fmt.Errorf("zstd encoder for small inputs: %w", err)
	}
	return e, nil
}

// EncodeAll appends the zstd frame of src to dst.
func (e *Encoder) EncodeAll(src, dst []byte) []byte {
	if e.small != nil && len(src) <= e.limit {
		return e.small.EncodeAll(src, dst)
	}
	return e.full.EncodeAll(src, dst)
}
