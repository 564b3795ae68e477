package adaptive_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// BenchmarkDecide is the cost of a decision made afresh: classifying the
// element and estimating every candidate.
func BenchmarkDecide(b *testing.B) {
	w := newWorld()
	s := w.scheme(b, adaptive.WithPath(path(10e6)))
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			e := doc(n)
			b.ReportAllocs()
			for b.Loop() {
				if d := s.Decide(e); d.Choice() == "" {
					b.Fatal("no choice")
				}
			}
		})
	}
}

// BenchmarkEncodeOverhead is what the scheme adds to sending an element as
// it is, on a path where that is the right choice: decisions are mostly
// reused, so it is a lookup and a copy of the message.
func BenchmarkEncodeOverhead(b *testing.B) {
	z, _ := zstd.New()
	c, _ := s2.New()
	s, err := adaptive.New([]encoding.Codec{z, c}, adaptive.WithExploration(adaptive.NoExploration),
		adaptive.WithPath(adaptive.StaticPath(adaptive.Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10})))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			m := message.New(doc(n))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				out, err := s.Encode(m)
				if err != nil || encoding.IsEncoded(out.At(0)) {
					b.Fatalf("%v: encoded on a 10 GB/s path", err)
				}
			}
		})
	}
}

// BenchmarkEncodeDriftingPath is the scheme's cost per element when the
// path moves by more than the drift allowed before every element (as a
// loopback RTT does): the estimates are made afresh each time, the
// content's kind mostly remembered.
func BenchmarkEncodeDriftingPath(b *testing.B) {
	z, _ := zstd.New()
	c, _ := s2.New()
	rtt := 30 * time.Microsecond
	s, err := adaptive.New([]encoding.Codec{z, c}, adaptive.WithExploration(adaptive.NoExploration),
		adaptive.WithPath(adaptive.PathFunc(func() adaptive.Path {
			rtt = 90*time.Microsecond - rtt // 30 µs, 60 µs, 30 µs, …
			return adaptive.Path{RTT: rtt, Bandwidth: 1e10}
		})))
	if err != nil {
		b.Fatal(err)
	}
	m := message.New(doc(64 << 10))
	b.SetBytes(64 << 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}
