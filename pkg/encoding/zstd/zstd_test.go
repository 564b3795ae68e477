package zstd_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
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
	codectest.Fuzz(f, c)
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
