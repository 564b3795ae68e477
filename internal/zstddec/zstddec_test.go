package zstddec_test

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"testing"
	"weak"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/internal/zstddec"
)

func frameOf(t *testing.T, src []byte) []byte {
	t.Helper()
	e, err := kzstd.NewWriter(nil, kzstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	return e.EncodeAll(src, nil)
}

// What DecodeAll returned, and the frame it read, are let go once the
// caller lets them go: the pool's decoders keep no reference to either (a
// kzstd.Decoder keeps both until its next frame).
func TestKeepsNeitherOutputNorInput(t *testing.T) {
	p, err := zstddec.New()
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat([]byte("a message held by no one once decoded. "), 1<<14)
	frame := frameOf(t, src)
	out, err := p.DecodeAll(frame, make([]byte, 0, len(src)))
	if err != nil || !bytes.Equal(out, src) {
		t.Fatalf("decoded %d bytes (%v), want %d", len(out), err, len(src))
	}
	wOut, wIn := weak.Make(&out[0]), weak.Make(&frame[0])
	out, frame = nil, nil
	runtime.GC()
	runtime.GC()
	if wOut.Value() != nil {
		t.Error("the decoded output is still reachable")
	}
	if wIn.Value() != nil {
		t.Error("the frame decoded is still reachable")
	}
	runtime.KeepAlive(p)
}

// Concurrent decodes each get the frame they gave, and the pool's
// options still bound them: a frame larger than dst's room is refused.
func TestConcurrentAndBounded(t *testing.T) {
	p, err := zstddec.New(kzstd.WithDecodeAllCapLimit(true), kzstd.WithDecoderMaxMemory(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			src := bytes.Repeat([]byte{byte('a' + i)}, 10000+i)
			for range 20 {
				out, err := p.DecodeAll(frameOf(t, src), make([]byte, 0, len(src)))
				if err != nil || !bytes.Equal(out, src) {
					t.Errorf("decoded %d bytes (%v), want %d", len(out), err, len(src))
					return
				}
			}
		})
	}
	wg.Wait()
	big := frameOf(t, make([]byte, 2<<20))
	if _, err := p.DecodeAll(big, make([]byte, 0, 4<<20)); !errors.Is(err, kzstd.ErrDecoderSizeExceeded) {
		t.Errorf("a frame over the pool's memory limit: %v, want ErrDecoderSizeExceeded", err)
	}
	if _, err := p.DecodeAll(frameOf(t, make([]byte, 1000)), make([]byte, 0, 10)); !errors.Is(err, kzstd.ErrDecoderSizeExceeded) {
		t.Errorf("a frame over dst's room: %v, want ErrDecoderSizeExceeded", err)
	}
}
