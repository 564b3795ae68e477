package cli

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// BenchmarkBridgeTransit measures what the bridge adds to a message's
// one-way transit on loopback: a JXTA peer (p2pmsg, signing as JXSE
// does) sends 1-byte messages on a pipe, one at a time, to a JXTA
// receiver directly (direct-p50-ns) and through the bridge to a
// libp2p-only receiver (bridged-p50-ns); added-ns is the difference of
// the medians.
func BenchmarkBridgeTransit(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jx := jxtaConfig{on: true, listen: "tcp://127.0.0.1:0"}
	lo := []string{"/ip4/127.0.0.1/tcp/0"}
	start := func(listen []string, j jxtaConfig) *peerStack { return startTestPeer(ctx, b, listen, j) }
	sender, bridge, direct, behind := start(nil, jxtaConfig{on: true}), start(lo, jx), start(nil, jx), start(lo, jxtaConfig{})
	newAdv := func() *adv.PipeAdvertisement { return newUnicastAdv(b) }
	// One-way transit of n messages from out to in.
	transit := func(out *pipe.OutputPipe, in *pipe.InputPipe, n int) []time.Duration {
		m := message.New(message.Text("study", "text", "x"))
		d := make([]time.Duration, n)
		for i := range d {
			t0 := time.Now()
			if err := out.Send(ctx, m); err != nil {
				b.Fatal(err)
			}
			r, err := in.ReceiveFrom(ctx)
			if err != nil {
				b.Fatal(err)
			}
			d[i] = time.Since(t0)
			r.Release()
		}
		slices.Sort(d)
		return d
	}

	// Direct: JXTA sender → JXTA receiver.
	pd := newAdv()
	inD, err := direct.pipes.NewInputPipe(pd)
	if err != nil {
		b.Fatal(err)
	}
	outD, err := sender.pipes.NewOutputPipe(ctx, pd, pipe.ToJXTAPeers(direct.ep.JXTA().Addrs()[0]))
	if err != nil {
		b.Fatal(err)
	}

	// Bridged: JXTA sender → bridge → libp2p-only receiver.
	pb := newAdv()
	inB, err := behind.pipes.NewInputPipe(pb)
	if err != nil {
		b.Fatal(err)
	}
	h := newHandoff(io.Discard)
	bin, err := bridge.pipes.NewInputPipe(pb, pipe.WithHandler(h.handle))
	if err != nil {
		b.Fatal(err)
	}
	fwd := &forwarder{pipes: bridge.pipes, adv: pb, confirm: true,
		opt: pipe.ToPeers(peer.AddrInfo{ID: behind.node.ID(), Addrs: behind.node.Host().Addrs()})}
	defer fwd.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runBridge(ctx, h, fwd, &forwarder{}, "behind", "", 0, io.Discard)
	}()
	defer bin.Close()
	defer func() { cancel(); <-done; h.stop() }()
	outB, err := sender.pipes.NewOutputPipe(ctx, pb, pipe.ToJXTAPeers(bridge.ep.JXTA().Addrs()[0]))
	if err != nil {
		b.Fatal(err)
	}

	transit(outD, inD, 20) // connections, resolution
	transit(outB, inB, 20)
	b.ResetTimer()
	var dd, db []time.Duration
	for range b.N { // alternate, so both see the same machine
		dd = append(dd, transit(outD, inD, 1)...)
		db = append(db, transit(outB, inB, 1)...)
	}
	b.StopTimer()
	slices.Sort(dd)
	slices.Sort(db)
	md, mb := dd[len(dd)/2], db[len(db)/2]
	b.ReportMetric(float64(md), "direct-p50-ns")
	b.ReportMetric(float64(mb), "bridged-p50-ns")
	b.ReportMetric(float64(mb-md), "added-ns")
}
