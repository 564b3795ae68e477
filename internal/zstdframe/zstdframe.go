// Package zstdframe checks that a zstd payload is exactly one ordinary
// frame, for the zstd-based codecs: a skippable frame, a second frame or
// trailing bytes are refused before anything is decoded, so that no input
// makes the decoder work without producing output the caller budgeted
// for. It also tells, from the block headers alone, the most the frame
// can decode to, so that a decoder makes room for what the frame can hold
// rather than for what its header (or the caller's header) claims.
package zstdframe

import (
	"encoding/binary"
	"errors"
	"fmt"

	kzstd "github.com/klauspost/compress/zstd"
)

// ErrFrame is what Check's errors wrap.
var ErrFrame = errors.New("zstd payload is not exactly one well-formed frame")

// MaxBlockSize is the most one block holds or decodes to: RFC 8878
// §3.1.1.2.4 bounds every block by Block_Maximum_Size, at most 128 KiB,
// and klauspost/compress refuses a block that is or decodes to more.
const MaxBlockSize = 128 << 10

// minCompressedBlock is the smallest compressed block: a literals
// section header and a sequences section header of one byte each (RFC
// 8878 §3.1.1.3); klauspost/compress refuses smaller ones too.
const minCompressedBlock = 2

// Frame is what Check learns of a frame.
type Frame struct {
	kzstd.Header
	// MaxSize is the most the frame can decode to, read from its block
	// headers: a raw or RLE block's recorded size, MaxBlockSize for a
	// compressed one. A frame content size above it is refused.
	MaxSize uint64
}

// Check walks src's frame header and block headers (RFC 8878 §3.1.1) and
// fails unless src is one ordinary frame with nothing after it, whose
// recorded content size, if any, its blocks can hold. It reads only
// headers: its cost is one step per block.
func Check(src []byte) (Frame, error) {
	var f Frame
	if err := f.Decode(src); err != nil {
		return f, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	if f.Skippable {
		return f, fmt.Errorf("%w: skippable frame", ErrFrame)
	}
	p := f.HeaderSize
	for {
		if len(src)-p < 3 {
			return f, fmt.Errorf("%w: truncated block header", ErrFrame)
		}
		bh := uint32(src[p]) | uint32(src[p+1])<<8 | uint32(src[p+2])<<16
		p += 3
		last, typ, size := bh&1 == 1, (bh>>1)&3, int(bh>>3)
		if size > MaxBlockSize {
			return f, fmt.Errorf("%w: block of %d bytes", ErrFrame, size)
		}
		switch typ {
		case 0: // raw: size bytes of input, as many of output
			f.MaxSize += uint64(size)
		case 1: // RLE: one byte of input, size bytes of output
			f.MaxSize += uint64(size)
			size = 1
		case 2: // compressed: size bytes of input, at most a block of output
			if size < minCompressedBlock {
				return f, fmt.Errorf("%w: compressed block of %d bytes", ErrFrame, size)
			}
			f.MaxSize += MaxBlockSize
		default:
			return f, fmt.Errorf("%w: reserved block type", ErrFrame)
		}
		if len(src)-p < size {
			return f, fmt.Errorf("%w: truncated block", ErrFrame)
		}
		p += size
		if last {
			break
		}
	}
	if f.HasCheckSum {
		if len(src)-p < 4 {
			return f, fmt.Errorf("%w: truncated checksum", ErrFrame)
		}
		p += 4
	}
	if p != len(src) {
		kind := "trailing data"
		if len(src)-p >= 4 && binary.LittleEndian.Uint32(src[p:])&0xFFFFFFF0 == 0x184D2A50 {
			kind = "a skippable frame"
		}
		return f, fmt.Errorf("%w: %s after the frame (%d bytes)", ErrFrame, kind, len(src)-p)
	}
	if f.HasFCS && f.FrameContentSize > f.MaxSize {
		return f, fmt.Errorf("%w: content size %d, but its blocks hold at most %d bytes", ErrFrame, f.FrameContentSize, f.MaxSize)
	}
	return f, nil
}
