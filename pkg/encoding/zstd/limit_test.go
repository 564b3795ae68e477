package zstd_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

// WithMaxDecodedSize bounds what a Decode makes, whatever the caller's
// limit: a frame recording more fails with ErrTooLarge, as it does beyond
// the caller's limit, and before room is made for it.
func TestMaxDecodedSizeBoundsDecode(t *testing.T) {
	const limit = 1 << 20
	sender, _ := zstd.New()
	src := make([]byte, 8<<20)
	frame, _ := sender.Encode(nil, src, encoding.Binding{}) // records its 8 MiB
	c, err := zstd.New(zstd.WithMaxDecodedSize(limit))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		max     int // the caller's limit
		wantErr error
	}{
		{"caller's limit above the codec's", len(src), encoding.ErrTooLarge},
		{"caller's limit below the codec's", limit / 2, encoding.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := c.Decode(nil, frame, c.Params(), encoding.Binding{}, tt.max)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit {
				t.Errorf("refusing a %d-byte frame of %d bytes allocated %d KiB, beyond the codec's limit of %d KiB", len(frame), len(src), alloc>>10, limit>>10)
			}
		})
	}
	small := src[:limit]
	frame, _ = sender.Encode(nil, small, encoding.Binding{})
	if out, err := c.Decode(nil, frame, c.Params(), encoding.Binding{}, len(src)); err != nil || len(out) != limit {
		t.Fatalf("a frame of the codec's limit: %d bytes, %v", len(out), err)
	}
}
