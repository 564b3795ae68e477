package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// identity is a peer made for one exchange: it takes one message and
// goes away, as a peer cycling through libp2p identities does.
func identity(t *testing.T, sa *endpoint.Service) peer.ID {
	t.Helper()
	n, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s, err := endpoint.New(n)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, l := collector(1)
	s.Register("answer", "", l)
	if err := sa.Node().Connect(ctx(t), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	if err := sa.Send(ctx(t), endpoint.PeerAddress(n.ID(), "answer", ""), message.New(message.Text("", "x", "hi"))); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	return n.ID()
}

func seq(i int) *message.Message { return message.New(message.Text("", "n", fmt.Sprint(i))) }

func recvSeq(t *testing.T, ch chan *endpoint.Delivery, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		e, _ := recv(t, ch).Message.Get("", "n")
		if string(e.Data) != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %s", i, e.Data)
		}
	}
	select {
	case d := <-ch:
		e, _ := d.Message.Get("", "n")
		t.Fatalf("message %s arrived after %d", e.Data, to-1)
	default:
	}
}

// TestSenderTableBounded: peers that take a message and go away, each a
// new libp2p identity, leave the sender table within its bound and its
// senders without buffers. A retired sender loses nothing: a peer it
// served gets what follows in order, one whose stream still carries
// unflushed messages is not retired, and what a gone peer refused is
// reported by Flush.
func TestSenderTableBounded(t *testing.T) {
	const bound = 8
	a := testutil.NewNode(t)
	sa := newService(t, a)
	endpoint.SetMaxSenders(sa, bound)

	// p is served, flushed, then retired; q keeps unflushed messages.
	nodes := testutil.NewConnectedNodes(t, 2)
	var chs [2]chan *endpoint.Delivery
	var dsts [2]endpoint.Address
	for i, n := range nodes {
		s := newService(t, n)
		var l endpoint.Listener
		chs[i], l = collector(64)
		s.Register("seq", "", l)
		if err := a.Connect(ctx(t), n.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		dsts[i] = endpoint.PeerAddress(n.ID(), "seq", "")
	}
	p, q := nodes[0].ID(), nodes[1].ID()
	for i := range 5 {
		for _, dst := range dsts {
			if err := sa.Send(ctx(t), dst, seq(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sa.Flush(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4*bound || endpoint.HasSender(sa, p); i++ {
		if i == 200 {
			t.Fatal("200 peers later, p still has its sender")
		}
		id := identity(t, sa)
		testutil.WaitFor(t, "the identity's stream to end", func() bool { return endpoint.StreamEnded(sa, id) })
		if n, _ := endpoint.Senders(sa); n > bound {
			t.Fatalf("%d senders after %d identities, bound %d", n, i+1, bound)
		}
	}
	if n, bytes := endpoint.Senders(sa); bytes != 0 {
		t.Fatalf("%d senders, those whose stream is over holding %d bytes of buffers", n, bytes)
	}
	if !endpoint.HasSender(sa, q) {
		t.Fatal("q's sender, with messages in flight, was retired")
	}

	// What follows reaches p after what went before, and q's stream
	// delivers everything.
	for i := 5; i < 10; i++ {
		for _, dst := range dsts {
			if err := sa.Send(ctx(t), dst, seq(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, peer := range []peer.ID{p, q} {
		if err := sa.Flush(ctx(t), peer); err != nil {
			t.Fatal(err)
		}
		recvSeq(t, chs[i], 0, 10)
	}
	// Each identity went away with a message that Flush never
	// confirmed: more reports than the table holds, the excess counted.
	if n := sa.Stats().ReportsDropped; n == 0 {
		t.Fatal("reports of possibly lost messages beyond the bound were not counted")
	}
}

// TestRetiredSenderReports: what a retired sender had still to report (a
// refusal, a stream lost under an accepted message) is reported by the
// next Flush to its peer, once.
func TestRetiredSenderReports(t *testing.T) {
	a := testutil.NewNode(t)
	sa := newService(t, a)
	rNode, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	sr, err := endpoint.New(rNode)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(ctx(t), rNode.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	r := rNode.ID()
	if err := sa.Send(ctx(t), endpoint.PeerAddress(r, "nobody", ""), seq(0)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the refusal", func() bool { return sa.Stats().RefusalsReceived == 1 })
	sr.Close()
	rNode.Close()
	testutil.WaitFor(t, "r's stream to end", func() bool { return endpoint.StreamEnded(sa, r) })
	if !endpoint.RetireSender(sa, r) {
		t.Fatal("the sender of a peer gone was not retired")
	}
	err = sa.Flush(ctx(t), r)
	if !errors.Is(err, endpoint.ErrRefused) || !errors.Is(err, endpoint.ErrMaybeLost) {
		t.Fatalf("flushing to r, gone after refusing: %v", err)
	}
	// Both on one line, as every error: errors.Join's newline split it.
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("flushing to r: the error's text spans lines: %q", err)
	}
	if err := sa.Flush(ctx(t), r); err != nil {
		t.Fatalf("flushing to r again: %v", err)
	}
}

// TestSendToRetiredSender: a Send holding a sender retired since it
// looked it up (Send's caches still point at it) looks again, and the
// peer gets every message in order.
func TestSendToRetiredSender(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(64)
	sb.Register("seq", "", l)
	dst := endpoint.PeerAddress(nodes[1].ID(), "seq", "")
	for round := range 3 {
		for i := range 5 {
			if err := sa.Send(ctx(t), dst, seq(5*round+i)); err != nil {
				t.Fatal(err)
			}
		}
		if endpoint.RetireSender(sa, nodes[1].ID()) {
			t.Fatal("a sender with unflushed messages was retired")
		}
		if err := sa.Flush(ctx(t), nodes[1].ID()); err != nil {
			t.Fatal(err)
		}
		// Idle once a flusher that lost the race to Flush has gone.
		testutil.WaitFor(t, "the flushed sender to retire", func() bool { return endpoint.RetireSender(sa, nodes[1].ID()) })
	}
	if err := sa.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatal(err)
	}
	recvSeq(t, ch, 0, 15)
	// A large message takes the other path.
	big := message.New(message.Bytes("", "n", make([]byte, 100<<10)))
	if err := sa.Send(ctx(t), dst, big); err != nil {
		t.Fatal(err)
	}
	if err := sa.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the flushed sender to retire", func() bool { return endpoint.RetireSender(sa, nodes[1].ID()) })
	if err := sa.Send(ctx(t), dst, big); err != nil {
		t.Fatal(err)
	}
	if err := sa.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	recv(t, ch)
}
