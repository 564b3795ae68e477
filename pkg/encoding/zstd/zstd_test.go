package zstd_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/internal/zstdframe"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

func TestConformance(t *testing.T) {
	c, err := zstd.New()
	if err != nil {
		t.Fatal(err)
	}
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c, err := zstd.New()
	if err != nil {
		f.Fatal(err)
	}
	// Lying sizes, within the fuzz target's limit: a frame recording 60,000
	// bytes of content and holding one raw block of a byte; one recording
	// nothing and holding two compressed blocks of two bytes.
	f.Add(append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xE0, 0x60, 0xea, 0, 0, 0, 0, 0, 0}, 9, 0, 0, 'x'))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x14, 0, 0, 0, 0, 0x15, 0, 0, 0, 0})
	// A frame makes room for what its blocks can hold (a compressed
	// block of a few bytes up to 128 KiB), within the limit: zstd's own
	// ratio, which the frame's output may well reach.
	codectest.FuzzRoom(f, c, func(src []byte, max int) int {
		fr, err := zstdframe.Check(src)
		if err != nil {
			return 0
		}
		return int(min(fr.MaxSize, uint64(max)))
	})
}

// A frame without a content size (as a streaming encoder writes) decoding
// to far more than the limit fails with ErrTooLarge in bounded memory.
func TestBombWithoutContentSize(t *testing.T) {
	var buf bytes.Buffer
	w, err := kzstd.NewWriter(&buf, kzstd.WithEncoderLevel(kzstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range 256 { // 256 MiB of zeros
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var h kzstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("frame has content size or bad header: %v", err)
	}
	c, _ := zstd.New()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = c.Decode(nil, buf.Bytes(), c.Params(), encoding.Binding{}, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, encoding.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("decoding the bomb allocated %d bytes", alloc)
	}
	t.Logf("%d-byte bomb of 256 MiB refused at 1 MiB", buf.Len())
}

// A frame makes room for what its blocks can hold, not for what the
// caller's limit or its own header claims: one that records no content
// size and holds a byte decodes to that byte, one that records 16 MiB and
// holds a byte is refused.
func TestLyingSizesCostWhatTheFrameHolds(t *testing.T) {
	const claim = 16<<20 - 1
	var buf bytes.Buffer
	w, _ := kzstd.NewWriter(&buf)
	w.Write([]byte("x"))
	w.Close()
	lying := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xE0}, binary.LittleEndian.AppendUint64(nil, claim)...)
	lying = append(lying, 9, 0, 0, 'x') // one raw block of 1 byte
	c, _ := zstd.New()
	for _, tc := range []struct {
		name    string
		frame   []byte
		wantErr error
	}{
		{"no content size", buf.Bytes(), nil},
		{"content size beyond the blocks", lying, encoding.ErrCorrupt},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out, err := c.Decode(nil, tc.frame, c.Params(), encoding.Binding{}, claim)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, tc.wantErr) || (err == nil && string(out) != "x") {
			t.Fatalf("%s: decoded %q, %v; want %v", tc.name, out, err, tc.wantErr)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s: decoding a %d-byte frame with a limit of %d bytes allocated %d KiB", tc.name, len(tc.frame), claim, alloc>>10)
		}
	}
}
