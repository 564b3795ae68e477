package encoding

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Header bounds, checked when decoding a header.
const (
	maxCodecName = 64
	maxKeyID     = 128
	maxMIME      = 256
)

const (
	magic   = "P2E"
	version = 1
)

// Header describes an encoded element.
type Header struct {
	Codec  string
	Params Params
	MIME   string // original MIME type
	Size   uint64 // original size in bytes
}

// appendHeader appends the binary form of h to dst.
func appendHeader(dst []byte, h Header) []byte {
	dst = append(dst, magic...)
	dst = append(dst, version)
	dst = appendString(dst, h.Codec)
	dst = binary.AppendVarint(dst, int64(h.Params.Level))
	dst = binary.AppendUvarint(dst, uint64(h.Params.DictID))
	dst = appendString(dst, h.Params.KeyID)
	dst = appendString(dst, h.MIME)
	dst = binary.AppendUvarint(dst, h.Size)
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// ParseHeader decodes the header at the start of data and returns it with
// the header length. Errors wrap ErrCorrupt.
func ParseHeader(data []byte) (Header, int, error) {
	var h Header
	if len(data) < len(magic)+1 || string(data[:len(magic)]) != magic {
		return h, 0, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if data[len(magic)] != version {
		return h, 0, fmt.Errorf("%w: unsupported header version %d", ErrCorrupt, data[len(magic)])
	}
	p := len(magic) + 1
	var err error
	if h.Codec, p, err = readString(data, p, maxCodecName, "codec"); err != nil {
		return h, 0, err
	}
	lv, n := binary.Varint(data[p:])
	if n <= 0 || lv < math.MinInt32 || lv > math.MaxInt32 {
		return h, 0, fmt.Errorf("%w: bad level", ErrCorrupt)
	}
	h.Params.Level, p = int(lv), p+n
	d, n := binary.Uvarint(data[p:])
	if n <= 0 || d > math.MaxUint32 {
		return h, 0, fmt.Errorf("%w: bad dictionary ID", ErrCorrupt)
	}
	h.Params.DictID, p = uint32(d), p+n
	if h.Params.KeyID, p, err = readString(data, p, maxKeyID, "key ID"); err != nil {
		return h, 0, err
	}
	if h.MIME, p, err = readString(data, p, maxMIME, "MIME"); err != nil {
		return h, 0, err
	}
	sz, n := binary.Uvarint(data[p:])
	if n <= 0 {
		return h, 0, fmt.Errorf("%w: bad size", ErrCorrupt)
	}
	h.Size, p = sz, p+n
	return h, p, nil
}

func readString(data []byte, p, max int, what string) (string, int, error) {
	l, n := binary.Uvarint(data[p:])
	if n <= 0 || l > uint64(max) || uint64(len(data)-p-n) < l {
		return "", 0, fmt.Errorf("%w: bad %s", ErrCorrupt, what)
	}
	p += n
	return string(data[p : p+int(l)]), p + int(l), nil
}
