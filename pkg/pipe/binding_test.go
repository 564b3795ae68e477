package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// answerQueries makes n answer every binding query itself, as a hostile
// peer would: with what answer returns for the query.
func answerQueries(n *node.Node, answer func(q *message.Message) *message.Message) {
	n.Host().SetStreamHandler(pipe.ResolverProtocol, func(st network.Stream) {
		defer st.Close()
		q, err := wire.Decode(io.LimitReader(st, 4096))
		if err != nil {
			st.Reset()
			return
		}
		wire.Encode(st, answer(q))
	})
}

// claimEverything makes n answer every binding query "found": with a
// proof signed by its own key when signed is true, with none otherwise.
func claimEverything(n *node.Node, signed bool) {
	answerQueries(n, func(q *message.Message) *message.Message {
		ans := message.New(message.Text("jxta", "Found", "true"), message.Text("jxta", "PeerId", n.JXTAPeerID().String()))
		if signed {
			pid, _ := q.Get("jxta", "PipeId")
			role, _ := q.Get("jxta", "Role")
			nonce, _ := q.Get("jxta", "Nonce")
			p, _ := adv.Parse([]byte(`<jxta:PipeAdvertisement xmlns:jxta="http://jxta.org"><Id>` + string(pid.Data) + `</Id><Type>JxtaUnicast</Type></jxta:PipeAdvertisement>`))
			sig, _ := n.Host().Peerstore().PrivKey(n.ID()).Sign(pipe.ProofStatement(p.ID, string(role.Data), n.ID(), nonce.Data))
			ans.Add(message.Bytes("jxta", "BindingProof", sig))
		}
		return ans
	})
}

// TestBindingsCannotBeHijacked is issue 21's row 4: peers that claim to
// bind a secure pipe, or a pipe whose advertisement names its binders,
// are ignored (and counted); every resolution finds the true binder.
func TestBindingsCannotBeHijacked(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 4)
	a, b, liar, signer := nodes[0], nodes[1], nodes[2], nodes[3]
	sa, sb := newPipes(t, a), newPipes(t, b)
	claimEverything(liar, false)
	claimEverything(signer, true)
	const resolutions = 40
	for _, typ := range []adv.PipeType{adv.UnicastSecure, adv.Unicast} {
		ad := newAdv(t, typ)
		ad.Binders = []string{b.ID().String()}
		in, err := sb.NewInputPipe(ad)
		if err != nil {
			t.Fatal(err)
		}
		before := sa.Stats().UnprovenAnswers
		hijacked := 0
		for range resolutions {
			p, err := sa.Resolve(ctx(t), ad, pipe.RoleInput)
			if err != nil {
				t.Fatal(err)
			}
			if p != b.ID() {
				hijacked++
			}
		}
		ignored := sa.Stats().UnprovenAnswers - before
		t.Logf("%s naming its binder: %d of %d resolutions hijacked, %d answers ignored", typ, hijacked, resolutions, ignored)
		if hijacked != 0 || ignored == 0 {
			t.Fatalf("%s: %d hijacked resolutions, %d answers ignored", typ, hijacked, ignored)
		}
		in.Close()
	}
	// A secure pipe that names no binder cannot be resolved by asking
	// around, only from the peers the caller names.
	ad := newAdv(t, adv.UnicastSecure)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := sa.Resolve(ctx(t), ad, pipe.RoleInput); !errors.Is(err, pipe.ErrUnprovable) {
		t.Fatalf("secure pipe naming no binder: %v", err)
	}
	if p, err := sa.Resolve(ctx(t), ad, pipe.RoleInput, pipe.ToPeers(peer.AddrInfo{ID: b.ID()})); err != nil || p != b.ID() {
		t.Fatalf("secure pipe at a named peer: %v, %v", p, err)
	}
	if _, err := sa.Resolve(ctx(t), ad, pipe.RoleInput, pipe.ToPeers(peer.AddrInfo{ID: liar.ID()})); err == nil {
		t.Fatal("a peer that proves nothing was taken as the binder")
	}
}

// TestDHTProvidersMustProve: a fake provider record for a pipe that names
// its binders leads to a peer whose answer is ignored.
func TestDHTProvidersMustProve(t *testing.T) {
	r := testutil.NewNode(t, node.WithDHT(node.DHTServer))
	boot := node.WithBootstrapPeers(r.AddrInfo())
	b := testutil.NewNode(t, node.WithDHT(node.DHTServer), boot)
	h := testutil.NewNode(t, node.WithDHT(node.DHTServer), boot)
	a := testutil.NewNode(t, node.WithDHT(node.DHTServer), boot)
	for _, n := range []*node.Node{r, a, b, h} {
		if err := n.RefreshRouting(ctx(t)); err != nil {
			t.Logf("refresh: %v", err)
		}
	}
	sa, sb, sh := newPipes(t, a), newPipes(t, b), newPipes(t, h)
	newPipes(t, r)
	ad := newAdv(t, adv.Unicast)
	ad.Binders = []string{b.ID().String()}
	// The hostile peer binds the pipe too, so its service publishes a
	// provider record and answers queries with a proof signed by its own
	// key; it is not among the binders.
	if _, err := sh.NewInputPipe(ad); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.NewInputPipe(ad); err != nil {
		t.Fatal(err)
	}
	hijacked, resolved := 0, 0
	for i := 0; i < 200 && (resolved < 20 || sa.Stats().UnprovenAnswers == 0); i++ {
		for _, p := range []peer.ID{b.ID(), h.ID()} {
			a.Host().Network().ClosePeer(p) // only the DHT can lead to them
		}
		rctx, cancel := context.WithTimeout(ctx(t), 2*time.Second)
		p, err := sa.Resolve(rctx, ad, pipe.RoleInput)
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond) // records still being stored
			continue
		}
		resolved++
		if p != b.ID() {
			hijacked++
		}
	}
	t.Logf("%d resolutions through the DHT, %d hijacked, %d answers ignored", resolved, hijacked, sa.Stats().UnprovenAnswers)
	if hijacked != 0 || resolved == 0 || sa.Stats().UnprovenAnswers == 0 {
		t.Fatalf("%d of %d resolutions hijacked, %d answers ignored", hijacked, resolved, sa.Stats().UnprovenAnswers)
	}
}

// TestResolveWhenTheBinderClosesFirst: a binder answers a binding query
// as soon as it has read it and closes the stream, which on QUIC stops
// the asker's sending; an asker that ends its side of the stream only
// after that (its goroutine descheduled between writing and ending)
// still takes the answer. Before the asker let the answer decide, its
// CloseWrite failed ("close called for canceled stream") and so did the
// resolution: a CI run met it as a socket pool's Dial failing.
func TestResolveWhenTheBinderClosesFirst(t *testing.T) {
	for _, tr := range []string{testutil.LoopbackQUIC, testutil.LoopbackTCP} {
		t.Run(tr, func(t *testing.T) {
			na := testutil.NewNode(t, node.WithListenAddrs(tr))
			nb := testutil.NewNode(t, node.WithListenAddrs(tr))
			if err := na.Connect(ctx(t), nb.AddrInfo()); err != nil {
				t.Fatal(err)
			}
			sa, sb := newPipes(t, na), newPipes(t, nb)
			a := newAdv(t, adv.Unicast)
			in, err := sb.NewInputPipe(a)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			// Long enough for the binder's answer and its close to
			// arrive first on loopback.
			pipe.SetQueryWrittenHook(func() { time.Sleep(200 * time.Millisecond) })
			defer pipe.SetQueryWrittenHook(nil)
			for _, opts := range [][]pipe.ResolveOption{{pipe.ToPeers(nb.AddrInfo())}, nil} {
				p, err := sa.Resolve(ctx(t), a, pipe.RoleInput, opts...)
				if err != nil {
					t.Fatalf("resolving (given peers %v): %v", opts != nil, err)
				}
				if p != nb.ID() {
					t.Fatalf("resolved to %s, want %s", p, nb.ID())
				}
			}
		})
	}
}

// TestConcurrentResolvesShareOne: concurrent Resolve calls for the same
// pipe and peers share one resolution, one query to the binder; a caller
// whose ctx ends leaves alone, the others still get the binder. Before,
// each made its own (a burst of 300 socket Dials, 300 resolver streams,
// which the peers' stream limits refused: 174 of 300 HTTP requests).
func TestConcurrentResolvesShareOne(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	a := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var queries atomic.Int32
	release := make(chan struct{})
	pipe.SetQueryWrittenHook(func() { queries.Add(1); <-release })
	defer pipe.SetQueryWrittenHook(nil)

	const n = 50
	leaving, leave := context.WithCancel(ctx(t))
	results := make(chan error, n+1)
	for i := range n + 1 {
		c := ctx(t)
		if i == n {
			c = leaving
		}
		go func() {
			p, err := sa.Resolve(c, a, pipe.RoleInput, pipe.ToPeers(nodes[1].AddrInfo()))
			if err == nil && p != nodes[1].ID() {
				err = fmt.Errorf("resolved to %s", p)
			}
			results <- err
		}()
	}
	testutil.WaitFor(t, "every caller to wait", func() bool { return pipe.FlightWaiters(sa) == n+1 })
	leave()
	if err := <-results; !errors.Is(err, context.Canceled) || !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("the caller that left: %v, want ErrNotResolved and context.Canceled", err)
	}
	close(release)
	for range n {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if q := queries.Load(); q != 1 {
		t.Fatalf("%d callers made %d queries, want 1", n+1, q)
	}
}

// TestResolveToThisPeer: an output pipe given this peer (ToPeers, as a
// program given its own address would) finds the input bound here, as it
// does given no peers; it failed with "asked 0 of 0 given peers". A role
// bound here that a peer cannot connect to itself in (a socket) and a
// pipe this peer, given, does not bind fail saying so.
func TestResolveToThisPeer(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	s := newPipes(t, nodes[0])
	newPipes(t, nodes[1])
	self := pipe.ToPeers(nodes[0].AddrInfo())
	a := newAdv(t, adv.Unicast)
	if _, err := s.Resolve(ctx(t), a, "socket", self); !errors.Is(err, pipe.ErrNotResolved) || !strings.Contains(err.Error(), "this peer, which was given, does not bind it") {
		t.Errorf("given only this peer, which binds nothing: %v", err)
	}
	in, err := s.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := s.NewOutputPipe(ctx(t), a, self)
	if err != nil {
		t.Fatalf("an output pipe given this peer, where its input is bound: %v", err)
	}
	defer out.Close()
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "to self"))); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "q") != "to self" {
		t.Fatalf("received %v, %v", m, err)
	}
	release, err := s.Announce(a, "socket")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, opts := range [][]pipe.ResolveOption{nil, {self}} {
		if _, err := s.Resolve(ctx(t), a, "socket", opts...); !errors.Is(err, pipe.ErrNotResolved) || !strings.Contains(err.Error(), "bound on this peer, which cannot connect to itself") {
			t.Errorf("a socket bound only here (%d peers given): %v", len(opts), err)
		}
	}
}

// Concurrent Resolves of two advertisements of one pipe ID, one naming
// its binders and one (a hostile peer's copy) naming none, are not
// shared: the one naming binders takes no unproven answer. Before, a
// resolution of the copy under way took the other's caller too, and it
// resolved to the peer that claimed the binding without a proof.
func TestSharedResolveKeepsBinders(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	sa, sh := newPipes(t, nodes[0]), newPipes(t, nodes[2])
	newPipes(t, nodes[1])
	real := newAdv(t, adv.Unicast)
	real.Binders = []string{nodes[1].ID().String()} // which binds nothing yet
	forged := *real
	forged.Binders = nil
	in, err := sh.NewInputPipe(&forged)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	release := make(chan struct{})
	pipe.SetQueryWrittenHook(func() { <-release })
	defer pipe.SetQueryWrittenHook(nil)

	type result struct {
		p   peer.ID
		err error
	}
	copied, named := make(chan result, 1), make(chan result, 1)
	resolve := func(a *adv.PipeAdvertisement, to chan<- result) {
		p, err := sa.Resolve(ctx(t), a, pipe.RoleInput)
		to <- result{p, err}
	}
	go resolve(&forged, copied)
	testutil.WaitFor(t, "the copy's resolution", func() bool { return pipe.FlightWaiters(sa) == 1 })
	go resolve(real, named)
	testutil.WaitFor(t, "both to wait", func() bool { return pipe.FlightWaiters(sa) == 2 })
	close(release)
	if r := <-copied; r.p != nodes[2].ID() {
		t.Fatalf("the copy: %s, %v; want the peer binding it", r.p, r.err)
	}
	if r := <-named; !errors.Is(r.err, pipe.ErrNotResolved) {
		t.Fatalf("the advertisement naming binders: %q, %v; want ErrNotResolved (its binder binds nothing, the other peer proves nothing)", r.p, r.err)
	}
}

// TestUnreachablePeersAreGone: a resolution among given peers none of
// which can be reached says so first and matches ErrPeerGone (as well as
// ErrNotResolved): Send's contract counts a peer that cannot be dialled
// again as gone, and a service retrying gone peers later must not take
// this for "nobody binds the pipe". Before, the error was "no peer found
// with the pipe bound: … (asked 0 of 1 given peer); last error:
// connecting to …", matching ErrNotResolved alone, the cause last.
func TestUnreachablePeersAreGone(t *testing.T) {
	a, b := testutil.NewNode(t), testutil.NewNode(t)
	sa := newPipes(t, a)
	x, _, out := unicast(t, sa, newPipes(t, b), pipe.ToPeers(b.AddrInfo()))
	if err := out.Send(ctx(t), message.New(message.Text("", "n", "1"))); err != nil {
		t.Fatal(err)
	}
	gone := testutil.NewNode(t)
	at := []peer.AddrInfo{b.AddrInfo(), gone.AddrInfo()}
	gone.Close()
	b.Close()
	check := func(what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, pipe.ErrPeerGone) || !errors.Is(err, pipe.ErrNotResolved) || !strings.HasPrefix(err.Error(), "pipe: resolving "+x.ID.String()+" as input: "+want+" be reached: connecting to ") {
			t.Errorf("%s: %v; want ErrPeerGone and ErrNotResolved, %q first", what, err, want)
		}
	}
	// The first Sends after b went may still be queued on its stream,
	// or fail with it (ErrPeerGone); then one resolves again.
	var err error
	testutil.WaitFor(t, "a Send to resolve again", func() bool {
		err = out.Send(ctx(t), message.New(message.Text("", "n", "2")))
		if err != nil && !errors.Is(err, pipe.ErrPeerGone) {
			t.Fatalf("Send to the peer gone: %v, want ErrPeerGone", err)
		}
		return errors.Is(err, pipe.ErrNotResolved)
	})
	check("Send resolving again", err, "the given peer could not")
	_, err = sa.NewOutputPipe(ctx(t), x, pipe.ToPeers(at...))
	check("NewOutputPipe to two peers gone", err, "none of the 2 given peers could")
}

// TestGivenPeerBackAtOnce: a peer given to ToPeers that could not be
// dialled, then restarted at its address, is reached by the next Send.
// Before, libp2p's backoff from the failed dial refused every dial for 5
// s ("dial backoff"), and longer after each further failure: 16 s after
// a 40 s outage a Send retried every second had been trying.
func TestGivenPeerBackAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", l.Addr().(*net.TCPAddr).Port)
	l.Close()
	key := filepath.Join(t.TempDir(), "k")
	x := newAdv(t, adv.Unicast)
	start := func() *node.Node {
		n, err := node.New(ctx(t), node.WithKeyFile(key), node.WithListenAddrs(listen))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if _, err := newPipes(t, n).NewInputPipe(x); err != nil {
			t.Fatal(err)
		}
		return n
	}
	b := start()
	out, err := newPipes(t, testutil.NewNode(t)).NewOutputPipe(ctx(t), x, pipe.ToPeers(b.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	send := func() error { return out.Send(ctx(t), message.New(message.Text("", "n", "1"))) }
	if err := send(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// Until a Send has dialled b and failed: the first may still be
	// queued on b's stream, or fail with it.
	testutil.WaitFor(t, "a Send to dial the peer gone and fail", func() bool {
		err := send()
		if err != nil && !errors.Is(err, pipe.ErrPeerGone) {
			t.Fatalf("Send to the peer gone: %v, want ErrPeerGone", err)
		}
		return errors.Is(err, pipe.ErrNotResolved)
	})
	start()
	if err := send(); err != nil {
		t.Fatalf("Send to the peer back at its address: %v", err)
	}
}
