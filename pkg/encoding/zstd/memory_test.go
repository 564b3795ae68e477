package zstd_test

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"weak"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

// A codec's first encode allocates for the message, not for the level's 8
// MiB window: what is left is the level's match tables (34 MB at the best
// level, where zstd keeps them whatever the input) and a window's history
// sized to what a message is. It builds one encoder, however many
// processors there are.
func TestFirstEncodeAllocatesForTheMessage(t *testing.T) {
	for _, tc := range []struct {
		level, size int
		max         uint64 // bytes
	}{
		{3, 1 << 20, 8 << 20},   // before, 19 MB
		{19, 600, 40 << 20},     // before, 53 MB
		{19, 1 << 20, 40 << 20}, // before, 53 MB
	} {
		for _, procs := range []int{2, 64} {
			t.Run(fmt.Sprintf("zstd:%d/%d/GOMAXPROCS=%d", tc.level, tc.size, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				firstEncode(t, tc.level, tc.size, tc.max)
			})
		}
	}
}

// firstEncode checks that a new codec's first encode of size bytes
// allocates at most max bytes.
func firstEncode(t *testing.T, level, size int, max uint64) {
	t.Helper()
	in := doc(size)
	c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: level})
	if err != nil {
		t.Fatal(err)
	}
	var err2 error
	got := testutil.Allocated(func() { _, err2 = c.Encode(nil, in, encoding.Binding{}) })
	if err2 != nil {
		t.Fatal(err2)
	}
	if got > max {
		t.Errorf("first encode allocated %d bytes, want at most %d", got, max)
	}
}

// A codec shared by goroutines builds at most one encoder per encode it
// runs at once, not one per processor: n goroutines encoding through one
// codec allocate at most n encoders' tables and history (1.4 MB at level
// 3 for a small message), at GOMAXPROCS 64 as at 2, and one goroutine
// builds one however many messages it encodes.
func TestSharedCodecAllocatesPerEncodeAtOnce(t *testing.T) {
	const perEncoder = 2 << 20 // one level-3 encoder and its history for a 600 B message, 1.4 MB, with room
	in := doc(600)
	for _, procs := range []int{2, 64} {
		for _, n := range []int{1, 2, 8} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/goroutines=%d", procs, n), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: 3})
				if err != nil {
					t.Fatal(err)
				}
				got := testutil.Allocated(func() {
					var wg sync.WaitGroup
					for range n {
						wg.Go(func() {
							var out []byte
							for range 50 {
								var err error
								if out, err = c.Encode(out[:0], in, encoding.Binding{}); err != nil {
									t.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
				})
				if got > uint64(n)*perEncoder {
					t.Errorf("%d goroutines encoding 50 messages each allocated %d bytes, want at most %d (one encoder each)", n, got, n*perEncoder)
				}
			})
		}
	}
}

// A codec that has encoded a message larger than the small window keeps
// one encoder, not two: what it holds is what the level's encoder alone
// held before the small one existed (53 MB at level 19), not 90 MB.
func TestMixedSizesKeepOneEncoder(t *testing.T) {
	small, large := doc(600), doc(2<<20)
	c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: 19})
	if err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for _, in := range [][]byte{small, large, small} {
		if _, err := c.Encode(nil, in, encoding.Binding{}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(c)
	if got := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); got > 60<<20 {
		t.Errorf("after messages of %d, %d and %d bytes the codec holds %d bytes, want at most 60 MiB", len(small), len(large), len(small), got)
	}
}

// A decoded message is the caller's once Decode returns: the codec keeps
// no reference to it, nor to the frame it read, so both go when the caller
// lets them go. Before, klauspost's decoder kept both until its next frame,
// for each of its GOMAXPROCS block decoders: a receiver held the last
// messages it had decoded, up to the decoded-size limit (64 MiB) each.
func TestDecodeKeepsNoMessage(t *testing.T) {
	for _, dict := range []bool{false, true} {
		t.Run(fmt.Sprintf("dictionary=%v", dict), func(t *testing.T) {
			var opts []zstd.Option
			if dict {
				files, err := codecbench.ModelFiles()
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					if bytes.HasPrefix(f, []byte{0x37, 0xA4, 0x30, 0xEC}) { // a zstd dictionary
						opts = append(opts, zstd.WithEncoderDictionary(f))
						break
					}
				}
			}
			c, err := zstd.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			frame, err := c.Encode(nil, doc(1<<20), encoding.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Decode(nil, frame, c.Params(), encoding.Binding{}, 64<<20)
			if err != nil || len(out) != 1<<20 {
				t.Fatalf("decoded %d bytes (%v), want %d", len(out), err, 1<<20)
			}
			wOut, wIn := weak.Make(&out[0]), weak.Make(&frame[0])
			out, frame = nil, nil
			runtime.GC()
			runtime.GC()
			if wOut.Value() != nil {
				t.Error("the decoded message is still reachable")
			}
			if wIn.Value() != nil {
				t.Error("the frame decoded is still reachable")
			}
			runtime.KeepAlive(c)
		})
	}
}
