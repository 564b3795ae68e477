package pipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestBidisPerPeerBounded: a peer holds at most WithBidisPerPeer
// connections open to a listener that accepts everything; its next
// connect requests are refused and counted, while another peer still
// connects, and a connection the listener closes gives the place back.
// Before, one identity held 19,934 Bidis at once (the red team's run:
// RSS 99 → 248 MB, 19,964 goroutines).
func TestBidisPerPeerBounded(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	const perPeer = 4
	victim := newPipes(t, nodes[0], pipe.WithBidisPerPeer(perPeer))
	attacker, honest := newPipes(t, nodes[1]), newPipes(t, nodes[2])
	a := newAdv(t, adv.Unicast)
	l, err := victim.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *pipe.Bidi, 2*perPeer)
	go func() {
		for {
			b, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			accepted <- b
		}
	}()
	var held []*pipe.Bidi
	defer func() {
		for _, b := range held {
			b.Close()
		}
	}()
	connect := func(s *pipe.Service) error {
		b, err := s.Connect(ctx(t), a)
		if err == nil {
			held = append(held, b, <-accepted)
		}
		return err
	}
	for i := range perPeer {
		if err := connect(attacker); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, perPeer, err)
		}
	}
	if err := connect(attacker); !errors.Is(err, pipe.ErrRefused) {
		t.Fatalf("a connection beyond the peer's %d: %v, want ErrRefused", perPeer, err)
	}
	if n := victim.Stats().BidisRefused; n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
	if err := connect(honest); err != nil {
		t.Fatalf("another peer, meanwhile: %v", err)
	}
	held[1].Close() // the listener's end of the attacker's first
	if err := connect(attacker); err != nil {
		t.Fatalf("once the listener closed one of the peer's: %v", err)
	}
}

// TestBidiBacklogShares: connections waiting for Accept hold at most a
// quarter of a listener's backlog per peer and per remote host, so that
// neither can take every place; the rest are refused and counted. Before,
// one peer's connect requests took every place, and every other peer
// was refused until the application accepted.
func TestBidiBacklogShares(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3) // the victim and two identities on 127.0.0.1
	victim := newPipes(t, nodes[0], pipe.WithBacklog(8))
	const share = 8 / 4
	first, second := newPipes(t, nodes[1]), newPipes(t, nodes[2])
	other := newPipes(t, testutil.NodeOnHost(t, "127.0.0.2", nodes[0]))
	a := newAdv(t, adv.Unicast)
	l, err := victim.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		b   *pipe.Bidi
		err error
	}
	results := make(chan result, 2*share+2)
	connect := func(s *pipe.Service) {
		go func() {
			b, err := s.Connect(ctx(t), a)
			results <- result{b, err}
		}()
	}
	var held []*pipe.Bidi
	defer func() {
		for _, b := range held {
			b.Close()
		}
	}()
	// The connections that wait for Accept do not return yet: the one
	// beyond the peer's share does, refused.
	refused := func(what string) {
		t.Helper()
		r := <-results
		if r.b != nil {
			held = append(held, r.b)
		}
		if !errors.Is(r.err, pipe.ErrRefused) || strings.Contains(r.err.Error(), "did not accept") {
			t.Fatalf("%s: %v, want ErrRefused at once", what, r.err)
		}
	}
	for range share + 1 {
		connect(first)
	}
	refused("a connection beyond the peer's share")
	connect(second) // another identity, on the same host
	refused("a connection beyond the host's share")
	connect(other) // on 127.0.0.2
	if n := victim.Stats().BidisRefused; n != 2 {
		t.Errorf("%d refusals counted, want 2", n)
	}
	for range share + 1 {
		b, err := l.Accept(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	for range share + 1 {
		r := <-results
		if r.err != nil {
			t.Fatalf("a connection within the shares: %v", r.err)
		}
		held = append(held, r.b)
	}
}
