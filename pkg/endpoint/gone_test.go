package endpoint_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestSendToPeerGone: once a peer has gone (its node closed, the
// connection to it ended), a Send to it cannot dial it again and fails
// with ErrPeerGone, which the caller can match, rather than with libp2p's
// dial error alone.
func TestSendToPeerGone(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(1)
	if err := b.Register("chat", "", l); err != nil {
		t.Fatal(err)
	}
	dst := endpoint.PeerAddress(nodes[1].ID(), "chat", "")
	m := message.New(message.Text("", "t", "x"))
	if err := a.Send(ctx(t), dst, m); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil { // the next Send opens a new stream
		t.Fatal(err)
	}
	b.Close()
	nodes[1].Close()
	c := ctx(t)
	for nodes[0].Host().Network().Connectedness(nodes[1].ID()) != network.NotConnected && c.Err() == nil {
		runtime.Gosched()
	}
	if err := a.Send(ctx(t), dst, m); !errors.Is(err, endpoint.ErrPeerGone) {
		t.Fatalf("Send to a peer gone: %v, want endpoint.ErrPeerGone", err)
	}
}
