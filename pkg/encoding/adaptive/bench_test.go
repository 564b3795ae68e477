package adaptive_test

import (
	"slices"
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

// asIsScheme is a scheme of zstd and s2 on a 10 GB/s path, where sending
// as is is always the choice, and without exploration.
func asIsScheme(b *testing.B) *adaptive.Scheme {
	z, _ := zstd.New()
	c, _ := s2.New()
	s, err := adaptive.New([]encoding.Codec{z, c}, adaptive.WithExploration(adaptive.NoExploration),
		adaptive.WithPath(adaptive.StaticPath(adaptive.Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10})))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkEncodeOverhead is what the scheme adds to sending an element as
// it is, on a path where that is the right choice: decisions are mostly
// reused, so it is a lookup and a copy of the message.
func BenchmarkEncodeOverhead(b *testing.B) {
	s := asIsScheme(b)
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

// BenchmarkEncodeCold is BenchmarkEncodeOverhead with the caches evicted
// before each element, as on a fast path where each message goes through
// the network stack, and other schemes' codecs, between two of the
// scheme's: what sending as is costs then is mostly the cache lines and
// code it touches. "copy" is the floor any scheme pays there: the copy of
// the message with the element unmarked.
func BenchmarkEncodeCold(b *testing.B) {
	s := asIsScheme(b)
	evict := make([]byte, 4<<20) // beyond this machine's L2
	m := message.New(doc(8<<10), message.Text("", "seq", "1"))
	for _, bc := range []struct {
		name string
		enc  func(*message.Message) *message.Message
	}{
		{"auto", func(m *message.Message) *message.Message { out, _ := s.Encode(m); return out }},
		{"copy", func(m *message.Message) *message.Message {
			out := m.Clone()
			for i, e := range m.All() {
				out.Set(i, encoding.Unmark(e))
			}
			return out
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// Timed one by one (evicting takes a thousand times longer), and
			// reported as the median: a descheduled thread's element would
			// weigh on a mean by more than the lines it is about.
			var took []time.Duration
			for b.Loop() {
				for i := 0; i < len(evict); i += 64 {
					evict[i]++
				}
				t0 := time.Now()
				out := bc.enc(m)
				took = append(took, time.Since(t0))
				if encoding.IsEncoded(out.At(0)) {
					b.Fatal("encoded on a 10 GB/s path")
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2]), "ns/op")
		})
	}
}
