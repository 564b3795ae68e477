// Package zstdframe checks that a zstd payload is exactly one ordinary
// frame, for the zstd-based codecs: a skippable frame, a second frame or
// trailing bytes are refused before anything is decoded, so that no input
// makes the decoder work without producing output the caller budgeted
// for.
package zstdframe

import (
	"encoding/binary"
	"errors"
	"fmt"

	kzstd "github.com/klauspost/compress/zstd"
)

// ErrFrame is what Check's errors wrap.
var ErrFrame = errors.New("zstd payload is not exactly one frame")

// Check walks src's frame header and block headers (RFC 8878 §3.1.1) and
// fails unless src is one ordinary frame with nothing after it. It reads
// only headers: its cost is one step per block.
func Check(src []byte) (kzstd.Header, error) {
	var h kzstd.Header
	if err := h.Decode(src); err != nil {
		return h, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	if h.Skippable {
		return h, fmt.Errorf("%w: skippable frame", ErrFrame)
	}
	p := h.HeaderSize
	for {
		if len(src)-p < 3 {
			return h, fmt.Errorf("%w: truncated block header", ErrFrame)
		}
		bh := uint32(src[p]) | uint32(src[p+1])<<8 | uint32(src[p+2])<<16
		p += 3
		last, typ, size := bh&1 == 1, (bh>>1)&3, int(bh>>3)
		switch typ {
		case 0, 2: // raw, compressed: size bytes of input
		case 1: // RLE: one byte of input
			size = 1
		default:
			return h, fmt.Errorf("%w: reserved block type", ErrFrame)
		}
		if len(src)-p < size {
			return h, fmt.Errorf("%w: truncated block", ErrFrame)
		}
		p += size
		if last {
			break
		}
	}
	if h.HasCheckSum {
		if len(src)-p < 4 {
			return h, fmt.Errorf("%w: truncated checksum", ErrFrame)
		}
		p += 4
	}
	if p != len(src) {
		kind := "trailing data"
		if len(src)-p >= 4 && binary.LittleEndian.Uint32(src[p:])&0xFFFFFFF0 == 0x184D2A50 {
			kind = "a skippable frame"
		}
		return h, fmt.Errorf("%w: %s after the frame (%d bytes)", ErrFrame, kind, len(src)-p)
	}
	return h, nil
}
