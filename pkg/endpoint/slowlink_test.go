package endpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// TestSlowHonestSenderNotReset: an honest sender of a large message on a
// slow uplink (emulated under TCP, TLS and yamux) keeps its frame while
// its link carries 16 KiB in well under a frame timeout. The receiver sees
// the frame advance only as whole yamux frames arrive: a sender that wrote
// a large message in go-yamux's 64 KiB frames showed nothing for 6.4 s on
// this link, and its frame was reset. The figures are scaled down from
// the default's, so that the test takes seconds: as an uplink of 2 KiB/s
// against the default 20 s timeout.
func TestSlowHonestSenderNotReset(t *testing.T) {
	const (
		rate    = 10 << 10 // bytes per second: 16 KiB in 1.6 s, 64 KiB in 6.4 s
		timeout = 4 * time.Second
		size    = 144 << 10
	)
	link := linkemu.Link{Up: linkemu.Shape{Bandwidth: rate}}
	tcpTLS := []node.Option{node.WithListenAddrs(testutil.LoopbackTCP), node.WithSecurity(node.SecurityTLS)}
	sender := testutil.NewNode(t, append(tcpTLS,
		node.WithLibp2pOptions(libp2p.NoTransports, libp2p.Transport(linkemu.NewTCPTransport(link))))...)
	receiver := testutil.NewNode(t, tcpTLS...)
	if err := sender.Connect(context.Background(), peer.AddrInfo{ID: receiver.ID(), Addrs: receiver.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	b, err := endpoint.New(receiver, endpoint.WithFrameTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ch, l := collector(1)
	b.Register("x", "", l)
	a := newService(t, sender)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := a.Send(sctx, endpoint.PeerAddress(receiver.ID(), "x", ""), message.New(message.Bytes("", "b", make([]byte, size)))); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case d := <-ch:
			d.Release()
			if s := b.Stats(); s.FramesTimedOut != 0 {
				t.Fatalf("delivered, but a frame timed out: %+v", s)
			}
			return
		case <-tick.C:
			if s := b.Stats(); s.FramesTimedOut != 0 {
				t.Fatalf("the honest sender's frame was reset: %+v", s)
			}
		case <-sctx.Done():
			t.Fatalf("not delivered within 2 minutes: %+v", b.Stats())
		}
	}
}
