package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// newPipes starts the endpoint and pipe services on n, closed when the
// test ends.
func newPipes(t *testing.T, n *node.Node, opts ...pipe.Option) *pipe.Service {
	t.Helper()
	ep, err := endpoint.New(n)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipe.New(ep, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); ep.Close() })
	return s
}

func newAdv(t *testing.T, typ adv.PipeType) *adv.PipeAdvertisement {
	t.Helper()
	a, err := adv.New(typ, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// unicast binds a new unicast pipe on sb and opens an output pipe to it
// on sa, resolved with opts; both close when the test ends.
func unicast(t *testing.T, sa, sb *pipe.Service, opts ...pipe.ResolveOption) (*adv.PipeAdvertisement, *pipe.InputPipe, *pipe.OutputPipe) {
	t.Helper()
	a := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	out, err := sa.NewOutputPipe(ctx(t), a, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return a, in, out
}

func text(m *message.Message, name string) string {
	e, _ := m.Get("", name)
	return string(e.Data)
}

func TestUnicastResolvedByQuery(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	sa, sb, _ := newPipes(t, nodes[0]), newPipes(t, nodes[1]), newPipes(t, nodes[2])
	a := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := sb.NewInputPipe(a); !errors.Is(err, pipe.ErrBound) {
		t.Fatalf("second binding: %v", err)
	}
	out, err := sa.NewOutputPipe(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if out.RemotePeer() != nodes[1].ID() {
		t.Fatalf("resolved to %s, want %s", out.RemotePeer(), nodes[1].ID())
	}
	for i := range 200 {
		if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		r, err := in.ReceiveFrom(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := text(r.Message, "n"); got != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %s", i, got)
		}
		if r.From != nodes[0].ID() || r.FromJXTA != nodes[0].JXTAPeerID() || r.Pipe != a.ID || r.Security == "" {
			t.Fatalf("provenance %+v", r)
		}
	}
}

func TestUnknownPipeAndBadInput(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	sa := newPipes(t, nodes[0])
	newPipes(t, nodes[1])
	// nodes[2] runs no pipe service at all: it cannot answer.
	a := newAdv(t, adv.Unicast)
	_, err := sa.NewOutputPipe(ctx(t), a)
	if !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("unbound pipe: %v", err)
	}
	// Every peer answered (or could not), so resolution ended without
	// waiting for its timeout.
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("resolution waited for the timeout although every peer had answered: %v", err)
	}
	_, err = sa.NewOutputPipe(ctx(t), a, pipe.ToPeers(nodes[1].AddrInfo()))
	if !errors.Is(err, pipe.ErrNotResolved) || !strings.Contains(err.Error(), "(asked 1 of 1 given peer)") {
		t.Fatalf("unbound pipe at a given peer: %v", err)
	}
	short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if _, err := sa.Connect(short, a); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("connect to an unbound pipe: %v", err)
	}
	if _, err := sa.NewInputPipe(nil); !errors.Is(err, pipe.ErrBadAdv) {
		t.Fatalf("nil advertisement: %v", err)
	}
	if _, err := sa.NewInputPipe(&adv.PipeAdvertisement{Type: adv.Unicast}); !errors.Is(err, pipe.ErrBadAdv) {
		t.Fatalf("advertisement without ID: %v", err)
	}
	if _, err := sa.Listen(newAdv(t, adv.Propagate)); !errors.Is(err, pipe.ErrWrongType) {
		t.Fatalf("bidi on a propagate pipe: %v", err)
	}
	for _, o := range []pipe.Option{pipe.WithQueueLen(0), pipe.WithResolveTimeout(0), pipe.WithBacklog(-1), pipe.WithBidisPerPeer(0), pipe.WithBidisPerPeer(1<<16 + 1), pipe.WithQueryPeers(0), pipe.WithPubSub(nil)} {
		ep, _ := endpoint.New(testutil.NewNode(t))
		if _, err := pipe.New(ep, o); !errors.Is(err, pipe.ErrBadOption) {
			t.Errorf("bad option accepted: %v", err)
		}
		ep.Close()
	}
}

func TestExplicitPeerNotYetConnected(t *testing.T) {
	a, b := testutil.NewNode(t), testutil.NewNode(t)
	sa, sb := newPipes(t, a), newPipes(t, b)
	ad := newAdv(t, adv.Unicast)
	in, _ := sb.NewInputPipe(ad)
	defer in.Close()
	out, err := sa.NewOutputPipe(ctx(t), ad, pipe.ToPeers(b.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "hi"))); err != nil {
		t.Fatal(err)
	}
	m, err := in.Receive(ctx(t))
	if err != nil || text(m, "q") != "hi" {
		t.Fatalf("%v %v", m, err)
	}
}

func TestHandlerAndLocalDelivery(t *testing.T) {
	n := testutil.NewNode(t)
	s := newPipes(t, n)
	a := newAdv(t, adv.Unicast)
	got := make(chan *pipe.Received, 2)
	var calls int
	in, err := s.NewInputPipe(a, pipe.WithHandler(func(r *pipe.Received) {
		calls++
		if calls == 1 {
			panic("handler bug")
		}
		got <- r
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Receive(ctx(t)); !errors.Is(err, pipe.ErrHandler) {
		t.Fatalf("Receive on a handler pipe: %v", err)
	}
	out, err := s.NewOutputPipe(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	out.Send(ctx(t), message.New(message.Text("", "q", "lost")))
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "kept"))); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if text(r.Message, "q") != "kept" || r.From != n.ID() {
		t.Fatalf("%+v", r)
	}
	if in.Dropped() != 1 {
		t.Fatalf("dropped %d, want the panicking delivery counted", in.Dropped())
	}
}

func TestCloseKeepsQueuedMessages(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	a := newAdv(t, adv.Unicast)
	in, _ := sb.NewInputPipe(a)
	out, err := sa.NewOutputPipe(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i))))
	}
	deadline := time.Now().Add(30 * time.Second)
	for pipe.QueueLen(in) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	in.Close()
	for i := range 3 {
		m, err := in.Receive(ctx(t))
		if err != nil || text(m, "n") != fmt.Sprint(i) {
			t.Fatalf("queued message %d after Close: %v %v", i, m, err)
		}
	}
	if _, err := in.Receive(ctx(t)); !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("after the queue: %v", err)
	}
}

// TestReresolveAfterPeerGoes: the input moves to another peer; the output
// pipe's next Send after a failure finds it there.
func TestReresolveAfterPeerGoes(t *testing.T) {
	a := testutil.NewNode(t)
	b, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	c := testutil.NewNode(t)
	for _, n := range []*node.Node{b, c} {
		if err := a.Connect(ctx(t), n.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	sa, sc := newPipes(t, a), newPipes(t, c)
	epb, _ := endpoint.New(b)
	sb, _ := pipe.New(epb)
	ad := newAdv(t, adv.Unicast)
	inB, _ := sb.NewInputPipe(ad)
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "to b"))); err != nil {
		t.Fatal(err)
	}
	if m, _ := inB.Receive(ctx(t)); text(m, "q") != "to b" {
		t.Fatal("b did not get its message")
	}
	sb.Close()
	epb.Close()
	b.Close()
	inC, _ := sc.NewInputPipe(ad)
	defer inC.Close()
	var sendErr error
	for i := 0; i < 100; i++ {
		sctx, cancel := context.WithTimeout(ctx(t), 2*time.Second)
		sendErr = out.Send(sctx, message.New(message.Text("", "q", "to c")))
		cancel()
		if sendErr == nil && out.RemotePeer() == c.ID() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out.RemotePeer() != c.ID() {
		t.Fatalf("output pipe still sends to %s (last error %v)", out.RemotePeer(), sendErr)
	}
	if m, err := inC.Receive(ctx(t)); err != nil || text(m, "q") != "to c" {
		t.Fatalf("c: %v %v", m, err)
	}
}

// relayed returns nodes a, r, b where b is reachable only through relay
// r, a is connected to b through r, and a pipe service runs on a and b.
func relayed(t *testing.T) (a, b *node.Node, sa, sb *pipe.Service) {
	r := testutil.NewNode(t, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
	a = testutil.NewNode(t)
	b = testutil.NewNode(t, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
	if err := b.Connect(ctx(t), r.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx(t), r.AddrInfo()); err != nil {
		t.Fatalf("reservation on the relay: %v", err)
	}
	circuit, _ := ma.NewMultiaddr(r.Addrs()[0].String() + "/p2p-circuit")
	if err := a.Connect(ctx(t), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("A to B through R: %v", err)
	}
	return a, b, newPipes(t, a), newPipes(t, b)
}

func TestSecureThroughRelay(t *testing.T) {
	a, b, sa, sb := relayed(t)
	ad := newAdv(t, adv.UnicastSecure)
	ad.Binders = []string{b.ID().String()}
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "secret", "s3"))); err != nil {
		t.Fatal(err)
	}
	r, err := in.ReceiveFrom(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if text(r.Message, "secret") != "s3" || r.From != a.ID() || r.FromJXTA != a.JXTAPeerID() || !r.Relayed || r.Security == "" {
		t.Fatalf("received %+v", r)
	}
}

func TestBidi(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	newPipes(t, nodes[2])
	ad := newAdv(t, adv.Unicast)
	l, err := sb.Listen(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := sb.Listen(ad); !errors.Is(err, pipe.ErrBound) {
		t.Fatalf("second listener: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // an echo server that upper-cases nothing: it counts
		defer wg.Done()
		c, err := l.Accept(ctx(t))
		if err != nil {
			t.Error(err)
			return
		}
		if c.RemotePeer() != nodes[0].ID() || c.RemoteJXTAPeerID() != nodes[0].JXTAPeerID() {
			t.Errorf("server sees %s", c.RemotePeer())
		}
		for i := 0; ; i++ {
			m, err := c.Receive(ctx(t))
			if errors.Is(err, io.EOF) {
				c.Close()
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			m.Add(message.Text("", "seq", fmt.Sprint(i)))
			if err := c.Send(ctx(t), m); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	c, err := sa.Connect(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	if c.RemotePeer() != nodes[1].ID() {
		t.Fatalf("connected to %s", c.RemotePeer())
	}
	for i := range 50 {
		if err := c.Send(ctx(t), message.New(message.Text("", "q", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		m, err := c.Receive(ctx(t))
		if err != nil || text(m, "q") != fmt.Sprint(i) || text(m, "seq") != fmt.Sprint(i) {
			t.Fatalf("reply %d: %v %v", i, m, err)
		}
	}
	c.Close()
	wg.Wait()
	if _, err := c.Receive(ctx(t)); !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("receive after close: %v", err)
	}
	if err := c.Send(ctx(t), message.New()); !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
}

func TestBidiRefusedAndPeerGone(t *testing.T) {
	a := testutil.NewNode(t)
	b, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.Connect(ctx(t), b.AddrInfo())
	sa := newPipes(t, a)
	epb, _ := endpoint.New(b)
	sb, _ := pipe.New(epb, pipe.WithBacklog(1))
	t.Cleanup(func() { sb.Close(); epb.Close() })
	ad := newAdv(t, adv.Unicast)
	l, _ := sb.Listen(ad)
	// Connect returns once the listener accepts; until then the request
	// waits in the backlog, which holds one: the second is refused.
	first := make(chan *pipe.Bidi, 1)
	go func() {
		c, err := sa.Connect(ctx(t), ad)
		if err != nil {
			t.Error(err)
		}
		first <- c
	}()
	for pipe.BacklogLen(l) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := sa.Connect(ctx(t), ad); !errors.Is(err, pipe.ErrRefused) {
		t.Fatalf("connect beyond the backlog: %v", err)
	}
	srv, err := l.Accept(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// The server's first message cannot overtake the acceptance.
	srv.Send(ctx(t), message.New(message.Text("", "q", "greeting")))
	c1 := <-first
	if c1 == nil {
		t.FailNow()
	}
	if m, err := c1.Receive(ctx(t)); err != nil || text(m, "q") != "greeting" {
		t.Fatalf("%v %v", m, err)
	}
	// Closing the service ends its connections gracefully: the tail
	// arrives, then io.EOF.
	for i := range 100 {
		srv.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i))))
	}
	go sb.Close()
	for i := range 100 {
		if m, err := c1.Receive(ctx(t)); err != nil || text(m, "n") != fmt.Sprint(i) {
			t.Fatalf("message %d of the tail: %v %v", i, m, err)
		}
	}
	if _, err := c1.Receive(ctx(t)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the tail: %v, want io.EOF", err)
	}
}

// A Connect whose request finds the peer gone (here its earlier stream
// reset: the connection closed, and the resolution dialled it again)
// fails matching ErrPeerGone, as an output pipe's Send does. Before, it
// matched only endpoint.ErrPeerGone ("connecting to …: endpoint: … the
// peer went away (stream reset)"), and a caller matching this package's
// sentinel, as docs/pipes.md teaches, missed it.
func TestConnectPeerGoneMatches(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := nodes[0], nodes[1]
	sa := newPipes(t, a)
	sb := newPipes(t, b)
	ad := newAdv(t, adv.Unicast)
	l, err := sb.Listen(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if srv, err := l.Accept(ctx(t)); err == nil {
			srv.Close()
		}
	}()
	c, err := sa.Connect(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b.Host().Network().ClosePeer(a.ID())
	testutil.WaitFor(t, "the connection gone", func() bool { return a.Host().Network().Connectedness(b.ID()) != network.Connected })
	if c, err := sa.Connect(ctx(t), ad, pipe.ToPeers(b.AddrInfo())); !errors.Is(err, pipe.ErrPeerGone) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Connect after the stream to the peer was reset: %v; want ErrPeerGone (endpoint.ErrPeerGone: %v)", err, errors.Is(err, endpoint.ErrPeerGone))
	}
}

// TestConnectCtxEndsWaitingForAccept: a Connect whose ctx ends while the
// listener's application has not accepted says what it waited for, and
// still matches the ctx's error.
func TestConnectCtxEndsWaitingForAccept(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := nodes[0], nodes[1]
	sa := newPipes(t, a)
	sb := newPipes(t, b)
	ad := newAdv(t, adv.Unicast)
	l, err := sb.Listen(ad) // never accepts
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		for pipe.BacklogLen(l) == 0 && c.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	bidi, err := sa.Connect(c, ad)
	<-waited
	if err == nil {
		bidi.Close()
		t.Fatal("Connect returned a connection the listener never accepted")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connecting to "+b.ID().String()) {
		t.Fatalf("Connect whose ctx ended waiting for the accept: %q; want context.Canceled, naming the peer it waited for", err)
	}
}

func TestBidiPeerGone(t *testing.T) {
	a := testutil.NewNode(t)
	b, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.Connect(ctx(t), b.AddrInfo())
	sa := newPipes(t, a)
	epb, _ := endpoint.New(b)
	sb, _ := pipe.New(epb)
	t.Cleanup(func() { sb.Close(); epb.Close() })
	ad := newAdv(t, adv.Unicast)
	l, _ := sb.Listen(ad)
	go func() {
		if srv, err := l.Accept(ctx(t)); err == nil {
			srv.Send(ctx(t), message.New(message.Text("", "q", "last words")))
		}
	}()
	c, err := sa.Connect(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.Receive(ctx(t)); err != nil || text(m, "q") != "last words" {
		t.Fatalf("%v %v", m, err)
	}
	b.Close() // the peer vanishes without closing its pipes
	if _, err := c.Receive(ctx(t)); !errors.Is(err, pipe.ErrPeerGone) {
		t.Fatalf("receive from a vanished peer: %v, want ErrPeerGone", err)
	}
}

func TestBidiAcceptCloseOrdering(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	ad := newAdv(t, adv.Unicast)
	l, _ := sb.Listen(ad)
	defer l.Close()
	for i := range 30 {
		go func() {
			if srv, err := l.Accept(ctx(t)); err == nil {
				srv.Send(ctx(t), message.New(message.Text("", "q", "hi")))
				srv.Close()
			}
		}()
		c, err := sa.Connect(ctx(t), ad)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if m, err := c.Receive(ctx(t)); err != nil || text(m, "q") != "hi" {
			t.Fatalf("connection %d: %v %v", i, m, err)
		}
		if _, err := c.Receive(ctx(t)); !errors.Is(err, io.EOF) {
			t.Fatalf("connection %d: %v, want io.EOF", i, err)
		}
		c.Close()
	}
}

// TestClosedServiceRefuses: once the pipe service is closed, binding,
// resolving and connecting fail with ErrClosed, also when the layers
// below closed with it, as a Peer's Close closes them. Before, they failed
// with what those layers said: NewInputPipe with the endpoint's "service
// closed", NewOutputPipe, Connect and Resolve with ErrNotResolved ("no peer
// has the pipe bound", the node being unable to dial), or, with the
// endpoint and node up, after asking the network.
func TestClosedServiceRefuses(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sb := newPipes(t, nodes[1])
	a, bidi := newAdv(t, adv.Unicast), newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	l, err := sb.Listen(bidi)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	to := pipe.ToPeers(nodes[1].AddrInfo())
	for _, below := range []string{"up", "closed"} {
		ep, err := endpoint.New(nodes[0])
		if err != nil {
			t.Fatal(err)
		}
		sa, err := pipe.New(ep)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sa.Resolve(ctx(t), a, pipe.RoleInput, to); err != nil {
			t.Fatalf("%s: resolving before Close: %v", below, err)
		}
		sa.Close()
		if below == "closed" {
			ep.Close()
			nodes[0].Close()
		}
		_, err = sa.NewInputPipe(newAdv(t, adv.Unicast))
		errs := []error{err}
		_, err = sa.NewOutputPipe(ctx(t), a, to)
		errs = append(errs, err)
		_, err = sa.Resolve(ctx(t), a, pipe.RoleInput, to)
		errs = append(errs, err)
		_, err = sa.Connect(ctx(t), bidi, to)
		errs = append(errs, err)
		_, err = sa.Listen(newAdv(t, adv.Unicast))
		errs = append(errs, err)
		for i, err := range errs {
			if !errors.Is(err, pipe.ErrClosed) {
				t.Errorf("endpoint and node %s, call %d after Close: %v, want ErrClosed", below, i, err)
			}
		}
		ep.Close()
	}
}

func TestLocalOutputReresolves(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	ad := newAdv(t, adv.Unicast)
	local, _ := sa.NewInputPipe(ad)
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil || out.RemotePeer() != nodes[0].ID() {
		t.Fatalf("local resolution: %v %v", out.RemotePeer(), err)
	}
	local.Close()
	if err := out.Send(ctx(t), message.New()); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("send to a closed local input: %v", err)
	}
	remote, _ := sb.NewInputPipe(ad)
	defer remote.Close()
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "moved"))); err != nil {
		t.Fatal(err)
	}
	if m, err := remote.Receive(ctx(t)); err != nil || text(m, "q") != "moved" {
		t.Fatalf("%v %v", m, err)
	}
	out.Close()
	if err := out.Send(ctx(t), message.New()); !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("send after Close: %v", err)
	}
}

func TestPropagate(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 4)
	svcs := make([]*pipe.Service, len(nodes))
	for i, n := range nodes {
		svcs[i] = newPipes(t, n)
	}
	ad := newAdv(t, adv.Propagate)
	var ins []*pipe.InputPipe
	for _, s := range svcs[1:] {
		in, err := s.NewInputPipe(ad)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		ins = append(ins, in)
	}
	out, err := svcs[0].NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.WaitMembers(ctx(t), 3); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range ins {
		seen := map[string]bool{}
		for range 5 {
			r, err := in.ReceiveFrom(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if r.From != nodes[0].ID() || r.FromJXTA != nodes[0].JXTAPeerID() {
				t.Fatalf("from %s", r.From)
			}
			seen[text(r.Message, "n")] = true
		}
		if len(seen) != 5 {
			t.Fatalf("member got %v", seen)
		}
	}
	big := message.New(message.Bytes("", "b", make([]byte, pipe.DefaultMaxPropagate)))
	if err := out.Send(ctx(t), big); !errors.Is(err, pipe.ErrTooLarge) {
		t.Fatalf("oversized propagate message: %v", err)
	}
	// The largest message allowed still arrives: gossipsub's own limit
	// leaves room for what it adds.
	limit := message.New(message.Bytes("", "b", make([]byte, pipe.DefaultMaxPropagate-64)))
	if err := out.Send(ctx(t), limit); err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if m, err := in.Receive(ctx(t)); err != nil || m.Len() != 1 || len(m.At(0).Data) != pipe.DefaultMaxPropagate-64 {
			t.Fatalf("largest propagate message: %v", err)
		}
	}
	if err := (&pipe.OutputPipe{}).WaitMembers(ctx(t), 1); !errors.Is(err, pipe.ErrWrongType) {
		t.Fatalf("WaitMembers on a unicast pipe: %v", err)
	}
}

// TestDHTResolution: A knows only R; B's binding reaches A through the
// DHT's provider records.
func TestDHTResolution(t *testing.T) {
	r := testutil.NewNode(t, node.WithDHT(node.DHTServer))
	b := testutil.NewNode(t, node.WithDHT(node.DHTServer), node.WithBootstrapPeers(r.AddrInfo()))
	a := testutil.NewNode(t, node.WithDHT(node.DHTServer), node.WithBootstrapPeers(r.AddrInfo()))
	for _, n := range []*node.Node{r, a, b} {
		if err := n.RefreshRouting(ctx(t)); err != nil {
			t.Logf("refresh: %v", err)
		}
	}
	sa, sb := newPipes(t, a), newPipes(t, b)
	newPipes(t, r)
	ad := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out *pipe.OutputPipe
	for i := 0; i < 100; i++ { // until B's provider record is stored
		a.Host().Network().ClosePeer(b.ID())
		rctx, cancel := context.WithTimeout(ctx(t), 2*time.Second)
		out, err = sa.NewOutputPipe(rctx, ad)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("resolution through the DHT: %v", err)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "via dht"))); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "q") != "via dht" {
		t.Fatalf("%v %v", m, err)
	}
}

// TestDataForUnboundPipes sends pipe data straight through the endpoint
// to pipes not bound at the receiver (never bound, and closed): each is
// dropped, and the bound pipe's messages, before and after, all arrive.
// A pipe whose endpoint listener is already taken is refused.
func TestDataForUnboundPipes(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	bound, gone := newAdv(t, adv.Unicast), newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(bound)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	closed, err := sb.NewInputPipe(gone)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	to := func(key string) endpoint.Address { return endpoint.PeerAddress(nodes[1].ID(), pipe.DataService, key) }
	for i, key := range []string{pipe.Key(bound.ID), "no-such-pipe", pipe.Key(gone.ID), "", pipe.Key(bound.ID)} {
		if err := sa.Endpoint().Send(ctx(t), to(key), message.New(message.Text("", "n", strconv.Itoa(i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for _, want := range []string{"0", "4"} {
		m, err := in.Receive(ctx(t))
		if err != nil || text(m, "n") != want {
			t.Fatalf("received %v, %v; want message %s", m, err, want)
		}
	}
	short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	if m, err := in.Receive(short); err == nil {
		t.Fatalf("a message for another pipe reached this one: %v", text(m, "n"))
	}

	taken := newAdv(t, adv.Unicast)
	if err := sb.Endpoint().Register(pipe.DataService, pipe.Key(taken.ID), endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {})); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.NewInputPipe(taken); !errors.Is(err, pipe.ErrBound) {
		t.Fatalf("pipe whose endpoint listener is taken: %v", err)
	}
	sb.Endpoint().Unregister(pipe.DataService, pipe.Key(taken.ID))
	p, err := sb.NewInputPipe(taken)
	if err != nil {
		t.Fatalf("after the listener left: %v", err)
	}
	p.Close()
}

// TestPropagateDropsAreCounted: a member that does not read, flooded by a
// publisher. Gossipsub sheds what does not fit its queues; every message
// is either received or counted as dropped by one of the two services.
func TestPropagateDropsAreCounted(t *testing.T) {
	sa, sb, in, out := propagating(t, pipe.WithQueueLen(1))
	const n = 400
	for i := range n {
		if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	deadline := ctx(t)
	received := 0
	accounted := func() (uint64, pipe.Stats, pipe.Stats) {
		a, b := sa.Stats(), sb.Stats()
		return uint64(received) + a.PropagateOutboundDropped + b.PropagateInboundDropped + b.PropagateUndelivered, a, b
	}
	for {
		got, a, b := accounted()
		if got == n {
			if b.PropagateUndelivered+a.PropagateOutboundDropped+b.PropagateInboundDropped == 0 {
				t.Fatal("a member that did not read lost nothing: the test did not overflow anything")
			}
			t.Logf("received %d; dropped: outbound %d, inbound %d, undelivered %d", received, a.PropagateOutboundDropped, b.PropagateInboundDropped, b.PropagateUndelivered)
			break
		}
		if got > n {
			t.Fatalf("received %d and counted %+v, %+v as dropped: more than the %d sent", received, a, b, n)
		}
		rctx, cancel := context.WithTimeout(deadline, 100*time.Millisecond)
		_, err := in.Receive(rctx)
		cancel()
		switch {
		case err == nil:
			received++
		case deadline.Err() != nil:
			t.Fatalf("received %d, counted %+v, %+v as dropped: %d of %d unaccounted for", received, a, b, n-got, n)
		}
	}
}

// TestReleasedReceivedReused: an application receives 3,000 messages
// from an input pipe or a Bidi with ReceiveFrom and Receive, releases
// some at once, some later and some never; a Received (and its message)
// it holds unreleased is never handed out again for a later message,
// however the released ones are recycled (with their delivery's storage,
// or through a pool).
func TestReleasedReceivedReused(t *testing.T) {
	for _, kind := range []string{"input pipe", "bidi"} {
		t.Run(kind, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
			var a *adv.PipeAdvertisement
			var in receiver
			var send func(context.Context, *message.Message) error
			if kind == "bidi" {
				l, err := sb.Listen(newAdv(t, adv.Unicast))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				local, remote := connected(t, sa, l, pipe.ToPeers(nodes[1].AddrInfo()))
				a, in, send = l.Adv(), remote, local.Send
			} else {
				var out *pipe.OutputPipe
				a, in, out = unicast(t, sa, sb, pipe.ToPeers(nodes[1].AddrInfo()))
				send = out.Send
			}
			receiveReleasing(t, in, send, nodes[0].ID(), a)
		})
	}
}

// receiver is an input pipe or a Bidi.
type receiver interface {
	Receive(context.Context) (*message.Message, error)
	ReceiveFrom(context.Context) (*pipe.Received, error)
}

// receiveReleasing is TestReleasedReceivedReused's run over in, the
// messages sent with send.
func receiveReleasing(t *testing.T, in receiver, send func(context.Context, *message.Message) error, from peer.ID, a *adv.PipeAdvertisement) {
	const n = 3000
	sent := make(chan struct{})
	sctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-sent }()
	go func() {
		defer close(sent)
		for i := range n {
			m := message.New()
			// Small messages come in the endpoint's recycled storage,
			// large ones not.
			size := 8
			if i%7 == 0 {
				size = 20 << 10
			}
			m.Add(message.Element{Name: "i", Data: fmt.Appendf(make([]byte, 0, size), "%0*d", size, i)})
			if err := send(sctx, m); err != nil {
				if sctx.Err() == nil {
					t.Error(err)
				}
				return
			}
		}
	}()
	type held struct {
		i int
		r *pipe.Received
		m *message.Message
	}
	var kept, later []held
	for i := range n {
		if i%5 == 4 {
			m, err := in.Receive(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			kept = append(kept, held{i: i, m: m})
			continue
		}
		r, err := in.ReceiveFrom(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		switch i % 5 {
		case 0, 1:
			r.Release()
		case 2:
			later = append(later, held{i: i, r: r, m: r.Message})
			if len(later) == 10 {
				for _, h := range later {
					check(t, h.i, h.r, h.m, from, a)
					h.r.Release()
				}
				later = later[:0]
			}
		case 3:
			kept = append(kept, held{i: i, r: r, m: r.Message})
		}
	}
	for _, h := range kept {
		check(t, h.i, h.r, h.m, from, a)
	}
}

// check says whether r (if not nil) and m are still message i's.
func check(t *testing.T, i int, r *pipe.Received, m *message.Message, from peer.ID, a *adv.PipeAdvertisement) {
	t.Helper()
	if r != nil && (r.Message != m || r.From != from || r.Pipe != a.ID) {
		t.Fatalf("message %d: its Received was reused: %+v", i, r)
	}
	got, err := strconv.Atoi(text(m, "i"))
	if err != nil || got != i {
		t.Fatalf("message %d: holds %q", i, text(m, "i"))
	}
}
