package s2

import (
	"encoding/binary"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// S2 block tags (the low two bits of a tag's first byte).
const (
	tagLiteral = 0
	tagCopy1   = 1
	tagCopy2   = 2
	tagCopy4   = 3
)

// checkTags walks the tags of an S2 block, after its length header, as
// klauspost/compress/s2's decoder does (decode_other.go), without copying
// anything: it fails with ErrCorrupt unless they decode to exactly want
// bytes — every tag whole, every literal within the block, every copy
// reaching back only into what came before. A block can claim any length
// in its header, and the decoder allocates the claim before decoding;
// this walk, one step per tag of at least two bytes, makes the claim
// worth what the block holds. A block it accepts, the decoder decodes.
func checkTags(src []byte, want int) error {
	d, offset := 0, 0
	for s := 0; s < len(src); {
		tag := src[s]
		var length int
		switch tag & 3 {
		case tagLiteral:
			x := uint64(tag >> 2)
			s++
			if x >= 60 { // the length minus one follows in x-59 bytes
				n := int(x) - 59
				if len(src)-s < n {
					return corruptTag("literal length", s)
				}
				x = uint64(le(src[s : s+n]))
				s += n
			}
			if x+1 > uint64(len(src)-s) || x+1 > uint64(want-d) {
				return corruptTag("literal", s)
			}
			s += int(x) + 1
			d += int(x) + 1
			continue
		case tagCopy1:
			if len(src)-s < 2 {
				return corruptTag("copy", s)
			}
			length = int(tag >> 2 & 7)
			o := int(tag&0xe0)<<3 | int(src[s+1])
			s += 2
			if o == 0 { // a repeat of the last offset; long ones say their length
				if length >= 5 {
					n := length - 4 // 1 to 3 bytes, counting from 4, 1<<8, 1<<16
					if len(src)-s < n {
						return corruptTag("repeat length", s)
					}
					length = int(le(src[s:s+n])) + [...]int{4, 1 << 8, 1 << 16}[n-1]
					s += n
				}
			} else {
				offset = o
			}
			length += 4
		case tagCopy2:
			if len(src)-s < 3 {
				return corruptTag("copy", s)
			}
			length, offset = 1+int(tag>>2), int(binary.LittleEndian.Uint16(src[s+1:]))
			s += 3
		case tagCopy4:
			if len(src)-s < 5 {
				return corruptTag("copy", s)
			}
			length, offset = 1+int(tag>>2), int(binary.LittleEndian.Uint32(src[s+1:]))
			s += 5
		}
		if offset <= 0 || offset > d || length > want-d {
			return corruptTag("copy", s)
		}
		d += length
	}
	if d != want {
		return fmt.Errorf("%w: s2 block records %d bytes, its tags hold %d", encoding.ErrCorrupt, want, d)
	}
	return nil
}

// le reads a little-endian number of 1 to 4 bytes.
func le(b []byte) uint32 {
	var v uint32
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint32(b[i])
	}
	return v
}

func corruptTag(what string, at int) error {
	return fmt.Errorf("%w: s2 block: bad %s at byte %d", encoding.ErrCorrupt, what, at)
}
