package endpoint_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// BenchmarkEndpointRate measures one-way messages, from Send to the
// receiver's listener, sent as fast as the senders can: b.N messages per
// run, the run ending when the last one is handed over. senders is the
// number of goroutines sending to the one peer at once. Bytes are the
// payloads.
func BenchmarkEndpointRate(b *testing.B) {
	for _, senders := range []int{1, 8} {
		for _, size := range []int{16, 100, 1 << 10, 16 << 10} {
			b.Run(fmt.Sprintf("senders=%d/size=%d", senders, size), func(b *testing.B) { benchRate(b, senders, size) })
		}
	}
}

func benchRate(b *testing.B, senders, size int) {
	nodes := testutil.NewConnectedNodes(b, 2)
	sa, err := endpoint.New(nodes[0])
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	sb, err := endpoint.New(nodes[1])
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	var got atomic.Int64
	var want atomic.Int64
	done := make(chan struct{}, 1)
	if err := sb.Register("sink", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		if len(d.Message.At(0).Data) != size {
			b.Error("wrong size")
		}
		d.Release()
		if got.Add(1) == want.Load() {
			done <- struct{}{}
		}
	})); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	to := endpoint.PeerAddress(nodes[1].ID(), "sink", "")
	run := func(n int) {
		got.Store(0)
		want.Store(int64(n))
		testutil.SendConcurrently(b, n, senders, size, func(m *message.Message) error { return sa.Send(ctx, to, m) })
		<-done
	}
	run(1000) // the stream opens and the buffers grow
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testutil.CPUTime()
	run(b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(testutil.CPUTime()-cpu)/float64(b.N), "cpu-ns/msg")
}
