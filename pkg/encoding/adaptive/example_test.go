package adaptive_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// The same element goes as it is over 10 Gbit/s Ethernet and compressed
// over DSL: what the scheme learnt of gzip when it was made (a measurement
// on a built-in sample) is enough to tell.
func ExampleScheme_Decide() {
	doc := bytes.Repeat([]byte("<employee><name>Ann</name><phone>977-2271</phone></employee>\n"), 1700)
	e := encoding.Producer{}.XML("", "doc", doc)
	gz := gzip.New()
	models := adaptive.NewModels()
	for _, p := range []adaptive.Path{
		{RTT: 300 * time.Microsecond, Bandwidth: 1.25e9}, // 10 GbE: faster than gzip:6 compresses on any CPU
		{RTT: 60 * time.Millisecond, Bandwidth: 80e3},    // dsl uplink
	} {
		s, _ := adaptive.New([]encoding.Codec{gz}, adaptive.WithModels(models), adaptive.WithPeer(staticPeer(p)))
		d := s.Decide(e)
		fmt.Printf("%.0f MB/s: %s\n", p.Bandwidth/1e6, d.Sent.Spec)
	}
	// Output:
	// 1250 MB/s: identity
	// 0 MB/s: gzip:6
}

// staticPeer is a receiver at the end of a path that does not change,
// whose profile is unknown; it ignores what the scheme tells it.
type staticPeer adaptive.Path

func (p staticPeer) Path() adaptive.Path                  { return adaptive.Path(p) }
func (staticPeer) ReceiverProfile() *adaptive.Profile     { return nil }
func (staticPeer) ObserveExchange(n int, d time.Duration) {}

// Across the Atlantic a warm connection moves 100 kB in little more than
// the one-way delay; after idle, slow start (10 segments, doubling every
// round trip) adds two round trips (three windows); a long transfer is
// bandwidth-bound either way, slow start costing a second once.
func ExamplePath_TransferTime() {
	warm := adaptive.Path{RTT: 178 * time.Millisecond, Bandwidth: 95e6 / 8}
	cold := warm
	cold.InitWindow = 10 * 1460
	for _, n := range []int{1000, 100_000, 50_000_000} {
		fmt.Printf("%d bytes: %v warm, %v after idle\n", n, warm.TransferTime(n).Round(time.Millisecond), cold.TransferTime(n).Round(time.Millisecond))
	}
	// Output:
	// 1000 bytes: 89ms warm, 89ms after idle
	// 100000 bytes: 97ms warm, 450ms after idle
	// 50000000 bytes: 4.3s warm, 5.41s after idle
}

// A scheme fits anywhere a fixed one does: here on an output adapter. The
// models are kept in the node's data directory across restarts.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "adaptive")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "models.json")
	models, _ := adaptive.Load(file) // empty on first start

	z, _ := zstd.New()
	s, err := adaptive.New([]encoding.Codec{z}, adaptive.WithModels(models),
		adaptive.WithPeer(staticPeer{RTT: 60 * time.Millisecond, Bandwidth: 80e3}))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, b := memPipe()
	out, _ := encoding.NewOutput(a, s)
	doc := bytes.Repeat([]byte("<row><id>1</id><city>Bern</city></row>"), 2000)
	out.Send(context.Background(), message.New(out.Producer().XML("", "doc", doc)))

	m, _ := b.Receive(context.Background())
	fmt.Println("sent encoded:", encoding.IsEncoded(m.At(0)))
	// The receiver decodes as any does, timing its decodes into its own
	// models: the decode profile it serves its senders.
	received := adaptive.NewModels()
	dec, _ := encoding.NewDecoder(received.TimeDecodes())
	m, _ = dec.Decode(m)
	fmt.Println("decoded intact:", bytes.Equal(m.At(0).Data, doc))

	models.Save(file)
	again, _ := adaptive.Load(file)
	fmt.Println("remembered:", again.Specs())
	// Output:
	// sent encoded: true
	// decoded intact: true
	// remembered: [zstd:3]
}
