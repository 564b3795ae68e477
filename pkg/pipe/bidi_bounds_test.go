package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/node"
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
	accepted := acceptAll(t, l, 2*perPeer)
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
	results := make(chan connectResult, 2*share+2)
	connect := func(s *pipe.Service) { connectAsync(t, s, a, results) }
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

// TestConnectAfterRestart: a peer that restarts with the same identity
// connects to a listener it had a connection to before at once. Before,
// the listener's answer went to the stream of the peer's earlier run,
// which failed (endpoint.ErrPeerGone: nothing sent), and Accept dropped
// the connection without a word: the peer's first Connect after each
// restart waited 10 s, then "did not accept within 10s" (the swarm
// soak: 46 of 83 same-identity restarts).
func TestConnectAfterRestart(t *testing.T) {
	server := testutil.NewNode(t)
	ps := newPipes(t, server)
	a := newAdv(t, adv.Unicast)
	l, err := ps.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, l, 2)
	key := filepath.Join(t.TempDir(), "client.key")
	for run := range 2 {
		n, err := node.New(ctx(t), node.WithKeyFile(key), node.WithListenAddrs(testutil.Loopback()))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Connect(ctx(t), server.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		ep, err := endpoint.New(n)
		if err != nil {
			t.Fatal(err)
		}
		client, err := pipe.New(ep)
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(ctx(t), 5*time.Second) // under the listener's 10 s
		b, err := client.Connect(c, a)
		cancel()
		if err != nil {
			t.Fatalf("run %d: Connect: %v", run+1, err)
		}
		b.Close()
		client.Close()
		ep.Close()
		n.Close() // as the process exits
		testutil.WaitFor(t, "the server to see the client gone", func() bool {
			return server.Host().Network().Connectedness(n.ID()) != network.Connected
		})
	}
}

// acceptAll accepts every connection to l into the channel it returns
// (room for n) until the test ends, then closes l and the connections
// left in the channel.
func acceptAll(t *testing.T, l *pipe.Listener, n int) <-chan *pipe.Bidi {
	accepted := make(chan *pipe.Bidi, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			accepted <- b
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for range len(accepted) {
			(<-accepted).Close()
		}
	})
	return accepted
}

// TestBidiBacklogFullCounted: a listener whose backlog is full refuses
// the next connect request at once, and counts it. Before, the refusal
// was sent but counted nowhere (the socket layer's BacklogFull counted
// its own).
func TestBidiBacklogFullCounted(t *testing.T) {
	server := testutil.NewNode(t)
	victim := newPipes(t, server, pipe.WithBacklog(4)) // a quarter: 1 per peer and host
	a := newAdv(t, adv.Unicast)
	l, err := victim.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	results := make(chan connectResult, 5)
	for i := range 5 { // one peer on each of five hosts
		connectAsync(t, newPipes(t, testutil.NodeOnHost(t, fmt.Sprintf("127.0.0.%d", 2+i), server)), a, results)
		if i < 4 {
			testutil.WaitFor(t, "the request in the backlog", func() bool { return pipe.BacklogLen(l) == i+1 })
		}
	}
	if r := <-results; !errors.Is(r.err, pipe.ErrRefused) || strings.Contains(r.err.Error(), "did not accept") {
		t.Fatalf("a connection beyond a full backlog: %v, want ErrRefused at once", r.err)
	}
	if st := victim.Stats(); st.BidiBacklogFull != 1 || st.BidisRefused != 0 {
		t.Errorf("BidiBacklogFull %d, BidisRefused %d; want 1, 0", st.BidiBacklogFull, st.BidisRefused)
	}
	for range 4 {
		b, err := l.Accept(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
	}
	for range 4 {
		if r := <-results; r.err != nil {
			t.Fatal(r.err)
		} else {
			defer r.b.Close()
		}
	}
}

// connectResult is what a Connect returned.
type connectResult struct {
	b   *pipe.Bidi
	err error
}

// connectAsync connects s to a on a goroutine of its own, its result to
// results.
func connectAsync(t *testing.T, s *pipe.Service, a *adv.PipeAdvertisement, results chan<- connectResult) {
	go func() {
		b, err := s.Connect(ctx(t), a)
		results <- connectResult{b, err}
	}()
}
