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
