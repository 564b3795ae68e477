package pipe_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// BenchmarkPipeRate measures one-way messages through a unicast pipe, from
// Send to the receiver's ReceiveFrom, sent as fast as the senders can:
// b.N messages per run, the run ending when the last one is received (and
// released). Bytes are the payloads.
func BenchmarkPipeRate(b *testing.B) {
	for _, senders := range []int{1, 8} {
		for _, size := range []int{16, 100, 1 << 10, 16 << 10} {
			b.Run(fmt.Sprintf("senders=%d/size=%d", senders, size), func(b *testing.B) { benchPipeRate(b, senders, size) })
		}
	}
}

func benchPipeRate(b *testing.B, senders, size int) {
	nodes := testutil.NewConnectedNodes(b, 2)
	var svcs []*pipe.Service
	for _, n := range nodes {
		ep, err := endpoint.New(n)
		if err != nil {
			b.Fatal(err)
		}
		ps, err := pipe.New(ep)
		if err != nil {
			b.Fatal(err)
		}
		defer ep.Close()
		defer ps.Close()
		svcs = append(svcs, ps)
	}
	a, err := adv.New(adv.Unicast, "rate", "")
	if err != nil {
		b.Fatal(err)
	}
	in, err := svcs[1].NewInputPipe(a)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	ctx := context.Background()
	out, err := svcs[0].NewOutputPipe(ctx, a, pipe.ToPeers(nodes[1].AddrInfo()))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	run := func(n int) {
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			testutil.SendConcurrently(b, n, senders, size, func(m *message.Message) error { return out.Send(ctx, m) })
		}()
		for range n {
			r, err := in.ReceiveFrom(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Message.At(0).Data) != size {
				b.Fatal("wrong size")
			}
			r.Release()
		}
		<-sent
	}
	run(1000) // resolved, the stream open, the buffers grown
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testutil.CPUTime()
	run(b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(testutil.CPUTime()-cpu)/float64(b.N), "cpu-ns/msg")
}
