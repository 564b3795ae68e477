package zstd_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// doc returns the first n bytes of a SOAP/DataSet query result.
func doc(n int) []byte { return datasets.DataSet(n/200 + 10)[:n] }

// BenchmarkFirstEncode measures what a new codec costs until it has
// encoded one message: building it, and the encoder's tables and history
// its first encode allocates.
func BenchmarkFirstEncode(b *testing.B) {
	for _, level := range []int{1, 3, 19} {
		for _, n := range []int{600, 16 << 10, 1 << 20} {
			in := doc(n)
			b.Run(fmt.Sprintf("zstd:%d/%d", level, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: level})
					if err != nil {
						b.Fatal(err)
					}
					if out, err := c.Encode(nil, in, encoding.Binding{}); err != nil || len(out) == 0 {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkEncodeShared measures one codec encoding from every goroutine
// (run with -cpu 1,2), as a node's senders share it: with the work on the
// CPU, -cpu 2 should encode about twice as many messages per second.
func BenchmarkEncodeShared(b *testing.B) {
	for _, level := range []int{1, 3, 19} {
		for _, n := range []int{1 << 10, 64 << 10} {
			in := doc(n)
			c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: level})
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("zstd:%d/%d", level, n), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					var out []byte
					for pb.Next() {
						var err error // each goroutine's own
						if out, err = c.Encode(out[:0], in, encoding.Binding{}); err != nil || len(out) == 0 {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkMixedSizes measures a new level-19 codec encoding a small
// message, one larger than 1 MiB and a small one again: B/op is what it
// allocates, live-B what it still holds afterwards.
func BenchmarkMixedSizes(b *testing.B) {
	small, large := doc(600), doc(2<<20)
	b.ReportAllocs()
	var live float64
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c, err := encoding.NewCodec(encoding.Spec{Name: "zstd", Level: 19})
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range [][]byte{small, large, small} {
			if out, err := c.Encode(nil, in, encoding.Binding{}); err != nil || len(out) == 0 {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		runtime.KeepAlive(c)
		live += float64(int64(m1.HeapAlloc) - int64(m0.HeapAlloc))
	}
	b.ReportMetric(live/float64(b.N), "live-B/op")
}
