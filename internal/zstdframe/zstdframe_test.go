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

// withBlocks is a frame of the given blocks (3-byte headers, content),
// recording claim as its content size when claim >= 0.
func withBlocks(claim int64, blocks ...[]byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58} // no content size, a 2 MiB window
	if claim >= 0 {
		f = append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xE0}, binary.LittleEndian.AppendUint64(nil, uint64(claim))...)
	}
	for _, b := range blocks {
		f = append(f, b...)
	}
	return f
}

// block is a block header of a type and size, the last one if last.
func block(typ, size int, last bool) []byte {
	h := uint32(typ)<<1 | uint32(size)<<3
	if last {
		h |= 1
	}
	return []byte{byte(h), byte(h >> 8), byte(h >> 16)}
}

func TestCheck(t *testing.T) {
	big := bytes.Repeat([]byte("p2pmsg checks its frames "), 20000) // several blocks
	one, noCRC := frame(t, big, true), frame(t, []byte("x"), false)
	raw := append(block(0, 1, true), 'x')
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
		{"a raw block as large as it records", withBlocks(1, raw), true},
		{"content size beyond the blocks", withBlocks(16<<20, raw), false},
		{"content size one byte beyond the blocks", withBlocks(2, raw), false},
		{"compressed block of one byte", withBlocks(-1, append(block(2, 1, true), 0)), false},
		{"block over 128 KiB", withBlocks(-1, append(block(1, MaxBlockSize+1, true), 0)), false},
	} {
		_, err := Check(tc.src)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrFrame)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestMaxSize: what a frame's blocks can hold, read from their headers.
func TestMaxSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  []byte
		want uint64
	}{
		{"raw", withBlocks(-1, append(block(0, 3, true), "abc"...)), 3},
		{"RLE", withBlocks(-1, append(block(1, 1000, true), 'a')), 1000},
		{"compressed", withBlocks(-1, append(block(2, 2, true), 0, 0)), MaxBlockSize},
		{"all three", withBlocks(-1, append(block(0, 1, false), 'a'), append(block(1, 10, false), 'b'), append(block(2, 2, true), 0, 0)), 11 + MaxBlockSize},
	} {
		f, err := Check(tc.src)
		if err != nil || f.MaxSize != tc.want {
			t.Errorf("%s: MaxSize %d, %v; want %d", tc.name, f.MaxSize, err, tc.want)
		}
	}
}

// FuzzCheck: Check never panics, and what it accepts decodes, if it
// does, to no more than MaxSize.
func FuzzCheck(f *testing.F) {
	f.Add(frame(f, []byte("hello"), true))
	f.Add(frame(f, bytes.Repeat([]byte("ab"), 100000), false))
	f.Add(skippable(4))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 1, 0, 0})
	f.Add(withBlocks(16<<20, append(block(0, 1, true), 'x'))) // a content size its blocks cannot hold
	f.Add(withBlocks(-1, append(block(2, 2, false), 0, 0), append(block(2, 2, true), 0, 0)))
	dec, err := kzstd.NewReader(nil, kzstd.WithDecoderMaxMemory(1<<20), kzstd.WithDecoderConcurrency(1))
	if err != nil {
		f.Fatal(err)
	}
	defer dec.Close()
	f.Fuzz(func(t *testing.T, src []byte) {
		fr, err := Check(src)
		if err != nil {
			return
		}
		out, err := dec.DecodeAll(src, nil) // must not panic; may fail on corrupt blocks
		if err == nil && uint64(len(out)) > fr.MaxSize {
			t.Fatalf("decoded %d bytes, MaxSize %d", len(out), fr.MaxSize)
		}
	})
}
