package s2

import (
	"bytes"
	"encoding/binary"
	"testing"

	ks2 "github.com/klauspost/compress/s2"
)

// FuzzCheckTags: checkTags accepts exactly the blocks klauspost's decoder
// decodes, so that refusing a block before allocating refuses nothing the
// decoder would have taken.
func FuzzCheckTags(f *testing.F) {
	text := bytes.Repeat([]byte("p2pmsg checks its tags "), 400)
	for _, src := range [][]byte{nil, []byte("x"), text, make([]byte, 100_000), append(bytes.Clone(text[:300]), make([]byte, 70_000)...)} {
		f.Add(ks2.Encode(nil, src))
		f.Add(ks2.EncodeBetter(nil, src))
		f.Add(ks2.EncodeBest(nil, src))
	}
	// Lying lengths: a block that claims 16 MiB and holds three bytes of
	// garbage, or one literal.
	f.Add(append(binary.AppendUvarint(nil, 16<<20-1), 0xff, 0xff, 0xff))
	f.Add(append(binary.AppendUvarint(nil, 16<<20-1), 0, 'x'))
	f.Fuzz(func(t *testing.T, src []byte) {
		n, err := ks2.DecodedLen(src)
		if err != nil || n > 1<<20 {
			return
		}
		_, hl := binary.Uvarint(src)
		walked := checkTags(src[hl:], n)
		dec, err := ks2.Decode(nil, src)
		if (walked == nil) != (err == nil) {
			t.Fatalf("checkTags: %v; decoder: %v", walked, err)
		}
		if err == nil && len(dec) != n {
			t.Fatalf("decoded %d bytes, block records %d", len(dec), n)
		}
	})
}
