// Package flatecodec holds what the gzip and deflate codecs share: a
// bounded read of a decompressor's output.
package flatecodec

import (
	"fmt"
	"io"
	"slices"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// ReadAll appends r's output to dst, failing with ErrTooLarge as soon as
// more than limit bytes come out. It allocates at most about twice limit.
func ReadAll(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start := len(dst)
	var probe [1]byte
	for {
		used := len(dst) - start
		var buf []byte
		if used == limit {
			buf = probe[:]
		} else {
			if len(dst) == cap(dst) {
				dst = slices.Grow(dst, min(max(used, 512), limit-used))
			}
			buf = dst[len(dst):min(cap(dst), start+limit)]
		}
		n, err := r.Read(buf)
		if used == limit && n > 0 {
			return dst, fmt.Errorf("%w: more than %d bytes", encoding.ErrTooLarge, limit)
		}
		if used < limit {
			dst = dst[:len(dst)+n]
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
		}
	}
}
