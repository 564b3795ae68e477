package zstd_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// A codec's first encode allocates for the message, not for the level's 8
// MiB window: what is left is the level's match tables (34 MB at the best
// level, where zstd keeps them whatever the input) and a window's history
// sized to what a message is.
func TestFirstEncodeAllocatesForTheMessage(t *testing.T) {
	for _, tc := range []struct {
		level, size int
		max         uint64 // bytes
	}{
		{3, 1 << 20, 8 << 20},   // before, 19 MB
		{19, 600, 40 << 20},     // before, 53 MB
		{19, 1 << 20, 40 << 20}, // before, 53 MB
	} {
		t.Run(fmt.Sprintf("zstd:%d/%d", tc.level, tc.size), func(t *testing.T) {
			in := doc(tc.size)
			c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: tc.level})
			if err != nil {
				t.Fatal(err)
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			if _, err := c.Encode(nil, in, encoding.Binding{}); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&m1)
			if got := m1.TotalAlloc - m0.TotalAlloc; got > tc.max {
				t.Errorf("first encode allocated %d bytes, want at most %d", got, tc.max)
			}
		})
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
