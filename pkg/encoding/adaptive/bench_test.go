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
	s := w.scheme(b, adaptive.WithPeer(path(10e6)))
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			e := doc(n)
			b.ReportAllocs()
			for b.Loop() {
				if d := s.Decide(e); d.Sent.Spec == "" {
					b.Fatal("no choice")
				}
			}
		})
	}
}

// BenchmarkEncodeReused is what the scheme costs per element in ordinary
// use, a stream of like messages on a fast path where sending as is is
// the choice: "reused" as it runs, deciding once per reuseCount elements;
// "fresh" with the path moving by more than the drift allowed before
// every element, so that every element is decided afresh. The difference
// is what remembering decisions saves; "copy" is the floor any scheme
// pays, the copy of the message with the element unmarked.
func BenchmarkEncodeReused(b *testing.B) {
	z, _ := zstd.New()
	c := s2.New()
	p := path(1e10)
	s, err := adaptive.New([]encoding.Codec{z, c}, adaptive.WithExploration(0), adaptive.WithPeer(p))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1 << 10, 64 << 10} {
		m := message.New(doc(n), message.Text("", "seq", "1"))
		for _, bc := range []struct {
			name string
			enc  func(i int) *message.Message
		}{
			{"reused", func(int) *message.Message { out, _ := s.Encode(m); return out }},
			{"fresh", func(i int) *message.Message {
				p.mu.Lock()
				p.path.RTT = time.Duration(30+30*(i%2)) * time.Microsecond
				p.mu.Unlock()
				out, _ := s.Encode(m)
				return out
			}},
			{"copy", func(int) *message.Message {
				out := m.Clone()
				for i, e := range m.All() {
					out.Set(i, encoding.Unmark(e))
				}
				return out
			}},
		} {
			b.Run(strconv.Itoa(n)+"/"+bc.name, func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if out := bc.enc(i); out == nil || encoding.IsEncoded(out.At(0)) {
						b.Fatal("encoded on a 10 GB/s path")
					}
					i++
				}
			})
		}
	}
}
