package endpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"))
}

func newService(t *testing.T, n *node.Node) *endpoint.Service {
	t.Helper()
	s, err := endpoint.New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// collector is a listener that hands deliveries to a channel.
func collector(buf int) (chan *endpoint.Delivery, endpoint.Listener) {
	ch := make(chan *endpoint.Delivery, buf)
	return ch, endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) { ch <- d })
}

func recv(t *testing.T, ch chan *endpoint.Delivery) *endpoint.Delivery {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery within 30 s")
		return nil
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestSendReceiveInOrder(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(2000)
	if err := b.Register("chat", "room1", l); err != nil {
		t.Fatal(err)
	}
	if err := b.Register("chat", "room1", l); !errors.Is(err, endpoint.ErrExists) {
		t.Fatalf("double registration: %v", err)
	}
	dst := endpoint.PeerAddress(nodes[1].ID(), "chat", "room1")
	for i := 0; i < 1000; i++ {
		if err := a.Send(ctx(t), dst, message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ {
		d := recv(t, ch)
		e, _ := d.Message.Get("", "n")
		if string(e.Data) != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %s", i, e.Data)
		}
		if d.Source != nodes[0].ID() || d.SourceJXTA != nodes[0].JXTAPeerID() || d.Service != "chat" || d.Param != "room1" ||
			d.RemoteHost != netip.MustParsePrefix("127.0.0.1/32") {
			t.Fatalf("delivery %+v", d)
		}
	}
	// One stream carried them all.
	if n := len(nodes[0].Host().Network().ConnsToPeer(nodes[1].ID())[0].GetStreams()); n > 2 {
		t.Fatalf("%d streams for one destination", n)
	}
}

func TestLargeMessageAndJXTAAddress(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(1)
	b.Register("bulk", "", l) // empty param catches every param
	big := make([]byte, 20<<20)
	for i := range big {
		big[i] = byte(i * 13)
	}
	jx := nodes[1].JXTAPeerID().String()[len("urn:jxta:"):]
	addr, err := endpoint.ParseAddress("jxta://" + jx + "/bulk/any/param")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx(t), addr, message.New(message.Bytes("", "blob", big))); err != nil {
		t.Fatal(err)
	}
	d := recv(t, ch)
	if e, _ := d.Message.Get("", "blob"); !bytes.Equal(e.Data, big) || d.Param != "any/param" {
		t.Fatalf("large message damaged (param %q)", d.Param)
	}
}

// TestForgedSourceRejected: messages whose source element names another
// peer, or anything but the sender's own address, are not delivered,
// counted, and refused back: the sender's Flush reports them
// (ErrSourceForged). Before, they were dropped in silence: Send and Flush
// returned nil.
func TestForgedSourceRejected(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(4)
	b.Register("svc", "", l)
	dst := endpoint.PeerAddress(nodes[1].ID(), "svc", "")
	truth := endpoint.PeerAddress(nodes[0].ID(), "", "").String()
	lies := []string{endpoint.PeerAddress(nodes[2].ID(), "", "").String(), "tcp://10.0.0.5:9701", "not an address"}
	for _, lie := range lies {
		if err := a.Send(ctx(t), dst, message.New(message.Text("jxta", endpoint.SourceElement, lie), message.Text("", "x", "forged"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Send(ctx(t), dst, message.New(message.Text("jxta", endpoint.SourceElement, truth), message.Text("", "x", "honest"))); err != nil {
		t.Fatal(err)
	}
	d := recv(t, ch)
	if e, _ := d.Message.Get("", "x"); string(e.Data) != "honest" {
		t.Fatalf("got %q", e.Data)
	}
	if st := b.Stats(); st.SourceForged != 3 {
		t.Fatalf("stats %+v", st)
	}
	err := a.Flush(ctx(t), nodes[1].ID())
	var re *endpoint.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, endpoint.ErrSourceForged) || !errors.Is(err, endpoint.ErrRefused) || re.Count != 3 || re.Code != endpoint.RefusedForged {
		t.Fatalf("Flush after forged sources: %v (%+v), want 3 refused, ErrSourceForged", err, re)
	}
}

func TestPanickingListenerAndUnknownService(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	b.Register("boom", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) { panic("listener bug") }))
	ch, l := collector(1)
	b.Register("ok", "", l)
	a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "boom", ""), message.New())
	a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "nobody", ""), message.New())
	if err := a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "ok", ""), message.New()); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	if st := b.Stats(); st.ListenerPanics != 1 || st.NoListener != 1 || st.Received != 2 { // the panicking one was handed over too
		t.Fatalf("stats %+v", st)
	}
}

func TestDeadPeerThenReconnect(t *testing.T) {
	a := testutil.NewNode(t)
	bNode, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	info := bNode.AddrInfo()
	sa := newService(t, a)
	sb, _ := endpoint.New(bNode)
	ch, l := collector(1)
	sb.Register("svc", "", l)
	a.Connect(ctx(t), info)
	dst := endpoint.PeerAddress(info.ID, "svc", "")
	if err := sa.Send(ctx(t), dst, message.New()); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	sb.Close()
	bNode.Close()
	var sendErr error
	for i := 0; i < 50 && sendErr == nil; i++ {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		sendErr = sa.Send(c, dst, message.New(message.Bytes("", "pad", make([]byte, 64<<10))))
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	if sendErr == nil {
		t.Fatal("sending to a dead peer kept succeeding")
	}
	if _, err := sa.Resolve(endpoint.Address{Protocol: "smtp", Addr: "x"}); !errors.Is(err, endpoint.ErrAddress) {
		t.Fatalf("unknown protocol: %v", err)
	}
	if _, err := sa.Resolve(endpoint.Address{Protocol: endpoint.ProtocolJXTA, Addr: "cbid-59616261646162614E5047205032503392713D47093741118F31F2A71986C41103"}); !errors.Is(err, endpoint.ErrUnknownPeer) {
		t.Fatalf("unknown JXTA peer: %v", err)
	}
}

// TestRelay: B is reachable only through relay R; A's message reaches B's
// listener through R, and B's reply reaches A.
func TestRelay(t *testing.T) {
	// A relay serves others only once it believes it is publicly reachable.
	// It is a host of its own, 127.0.0.3: relayed messages come from it.
	r := testutil.NewNode(t, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()),
		node.WithListenAddrs("/ip4/127.0.0.3/tcp/0"))
	a := testutil.NewNode(t)
	b := testutil.NewNode(t, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
	if len(b.Host().Addrs()) != 0 {
		t.Fatalf("B listens on %v; it must be reachable only through the relay", b.Host().Addrs())
	}
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
	sa, sb := newService(t, a), newService(t, b)
	chB, lB := collector(1)
	sb.Register("ping", "", lB)
	chA, lA := collector(1)
	sa.Register("pong", "", lA)
	if err := sa.Send(ctx(t), endpoint.PeerAddress(b.ID(), "ping", ""), message.New(message.Text("", "q", "hello"))); err != nil {
		t.Fatal(err)
	}
	d := recv(t, chB)
	if d.Source != a.ID() || !d.Relayed || d.RemoteHost != netip.MustParsePrefix("127.0.0.3/32") {
		t.Fatalf("B sees source %v, relayed %v, from host %v; want A through the relay's host", d.Source, d.Relayed, d.RemoteHost)
	}
	if err := sb.Send(ctx(t), endpoint.PeerAddress(a.ID(), "pong", ""), message.New(message.Text("", "a", "world"))); err != nil {
		t.Fatal(err)
	}
	if e, _ := recv(t, chA).Message.Get("", "a"); string(e.Data) != "world" {
		t.Fatalf("reply %q", e.Data)
	}
	for _, c := range a.Host().Network().ConnsToPeer(b.ID()) {
		if !c.Stat().Limited && !bytes.Contains([]byte(c.RemoteMultiaddr().String()), []byte("p2p-circuit")) {
			t.Fatalf("A reached B directly at %v", c.RemoteMultiaddr())
		}
	}
}

func TestParseAddress(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    endpoint.Address
		wantErr bool
	}{
		{"jxta://cbid-01/svc/p/q", endpoint.Address{Protocol: "jxta", Addr: "cbid-01", Service: "svc", Param: "p/q"}, false},
		{"tcp://127.0.0.1:9701", endpoint.Address{Protocol: "tcp", Addr: "127.0.0.1:9701"}, false},
		{"nonsense", endpoint.Address{}, true},
		{"://x", endpoint.Address{}, true},
		{"jxta:///svc", endpoint.Address{}, true},
		{"p2p://notapeer/svc", endpoint.Address{}, true},
	} {
		got, err := endpoint.ParseAddress(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseAddress(%q) = %+v, %v", tt.in, got, err)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"jxta://cbid-01/svc/p", "p2p://12D3KooWExample/x", "tcp://1.2.3.4:9701", "a://b/c/d/e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := endpoint.ParseAddress(s)
		if err != nil {
			return
		}
		b, err := endpoint.ParseAddress(a.String())
		if err != nil || b != a {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, a, a.String(), b, err)
		}
	})
}

func TestSlowListenerBlocksSender(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	b.Register("slow", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}))
	to := endpoint.PeerAddress(nodes[1].ID(), "slow", "")
	m := message.New(message.Bytes("", "p", make([]byte, 1<<20)))
	if err := a.Send(ctx(t), to, m); err != nil {
		t.Fatal(err)
	}
	<-entered // the reader is now stuck in the listener
	// Nothing reads any more, so the flow-control windows fill and a Send
	// blocks until its context ends. Without backpressure all 256 MiB would
	// be accepted.
	sctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for range 256 {
			if err := a.Send(sctx, to, m); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	select {
	case err := <-errc:
		t.Fatalf("sending to a stuck listener ended before cancellation: %v", err)
	case <-time.After(300 * time.Millisecond): // when to cancel, not an assertion
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Send ended with %v, want context.Canceled", err)
	}
	close(release)
	// The next Send opens a fresh stream and gets through.
	ch, l := collector(1)
	b.Register("fast", "", l)
	if err := a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "fast", ""), message.New(message.Text("", "q", "x"))); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	// The cancelled Send reset a stream that carried messages whose Send
	// had succeeded: the next Flush says they may be lost, once.
	if err := a.Flush(ctx(t), nodes[1].ID()); !errors.Is(err, endpoint.ErrMaybeLost) {
		t.Fatalf("flush after a reset: %v, want ErrMaybeLost", err)
	}
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatalf("second flush: %v", err)
	}
}

// TestFlushNamesLostDestinations: when a stream is reset under messages
// to several destinations, Flush's LostError names them (the pipes above
// sort a loss out by them), up to 16; beyond, it says others may be lost
// too.
func TestFlushNamesLostDestinations(t *testing.T) {
	for _, n := range []int{2, 17} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			a, _ := newService(t, nodes[0]), newService(t, nodes[1])
			for i := range n {
				to := endpoint.PeerAddress(nodes[1].ID(), "s", fmt.Sprint(i))
				if err := a.Send(ctx(t), to, message.New(message.Text("", "n", "x"))); err != nil {
					t.Fatal(err)
				}
			}
			nodes[1].Host().Network().ClosePeer(nodes[0].ID())
			err := a.Flush(ctx(t), nodes[1].ID())
			var le *endpoint.LostError
			if !errors.As(err, &le) || !errors.Is(err, endpoint.ErrMaybeLost) {
				t.Fatalf("flush after a reset: %v, want a LostError", err)
			}
			if le.Peer != nodes[1].ID() || len(le.Dests) != min(n, 16) || le.Others != (n > 16) {
				t.Fatalf("%+v: want %d destinations, others %v", le, min(n, 16), n > 16)
			}
			if !le.Has("s", "0") || !le.Has("s", "1") || le.Has("t", "0") != (n > 16) {
				t.Fatalf("%+v: Has wrong", le)
			}
		})
	}
}

// TestShutdownLetsSendersFlush: a receiver that shuts down gracefully
// while a sender flushes lets the flush succeed (everything sent was
// delivered), refuses what arrives after it began, and ends with ctx.
func TestShutdownLetsSendersFlush(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(100)
	b.Register("s", "", l)
	to := endpoint.PeerAddress(nodes[1].ID(), "s", "")
	for i := range 10 {
		if err := a.Send(ctx(t), to, message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		recv(t, ch)
	}
	// The receiver has everything and shuts down; the sender's stream is
	// still open, so Shutdown waits for it.
	shut := make(chan error, 1)
	go func() { shut <- b.Shutdown(ctx(t)) }()
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatalf("flush to a receiver shutting down: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	// Shut down: a new message is not delivered. Either Send says so (once
	// the sender's host has learnt that the peer dropped the protocol, it
	// cannot open a stream) or Send accepts it and its flush fails.
	if err := a.Send(ctx(t), to, message.New(message.Text("", "n", "late"))); err == nil {
		if err := a.Flush(ctx(t), nodes[1].ID()); err == nil {
			t.Fatal("a message sent after shutdown was accepted and its flush succeeded")
		}
	}
	select {
	case d := <-ch:
		t.Fatalf("delivered after shutdown: %v", d.Message)
	default:
	}
}

// TestShutdownAsksIdleSendersToEnd: a sender that sent without Flush and
// then sends nothing more ends its stream when the receiver shuts down,
// so Shutdown returns without waiting for its ctx, and the sender's
// Flush vouches for what it sent. Before, nothing asked an idle sender
// to end its stream: Shutdown waited its whole ctx, then reset the
// stream, and the sender's Flush failed with ErrMaybeLost for messages
// that had all been delivered (a swarm soak's Peer.Shutdown waited so).
func TestShutdownAsksIdleSendersToEnd(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	a, c, b := newService(t, nodes[0]), newService(t, nodes[2]), newService(t, nodes[1])
	ch, l := collector(20)
	b.Register("s", "", l)
	to := endpoint.PeerAddress(nodes[1].ID(), "s", "")
	for _, s := range []*endpoint.Service{a, c} {
		for i := range 5 {
			if err := s.Send(ctx(t), to, message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 10 {
		recv(t, ch)
	}
	sctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := sctx.Err(); err != nil {
		t.Fatalf("Shutdown waited for its ctx to end: %v", err)
	}
	for i, s := range []*endpoint.Service{a, c} {
		if err := s.Flush(ctx(t), nodes[1].ID()); err != nil {
			t.Errorf("sender %d's flush, after the receiver shut down: %v", i, err)
		}
	}
}

// TestGoingAwayReceiverThatStalls: a receiver that asks its sender to
// end the stream (the going-away record) and then neither reads nor ends
// its side holds the sender's writes to it at most 10 s: the stream is
// then reset, and the sender's Flush reports that its message may be
// lost, rather than wait for the receiver (a hostile peer's stall).
func TestGoingAwayReceiverThatStalls(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	held := make(chan network.Stream, 1)
	nodes[1].Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
		// A hello (version 2, a 64 MiB limit), then the first frame read,
		// then the record, then nothing.
		hello := binary.AppendUvarint(binary.AppendUvarint([]byte{'H'}, 2), 64<<20)
		if _, err := st.Write(hello); err != nil {
			st.Reset()
			return
		}
		if _, err := st.Read(make([]byte, 1)); err != nil {
			st.Reset()
			return
		}
		st.Write([]byte{'G'})
		held <- st
	})
	defer func() {
		select {
		case st := <-held:
			st.Reset()
		default:
		}
	}()
	ending := make(chan struct{})
	var once sync.Once
	endpoint.SetGoingAwayHook(func() { once.Do(func() { close(ending) }) })
	t.Cleanup(func() { endpoint.SetGoingAwayHook(nil) })
	if err := a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "s", ""), message.New(message.Text("", "n", "x"))); err != nil {
		t.Fatal(err)
	}
	<-ending // the sender is ending the stream, waiting for the receiver's end
	err := a.Flush(ctx(t), nodes[1].ID())
	if !errors.Is(err, endpoint.ErrMaybeLost) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush after the receiver stalled its going away: %v, want ErrMaybeLost before its ctx ends", err)
	}
}

// TestGoingAwayBeforeHello: a going-away record before the receiver's
// hello is out of order: the sender resets the stream as for any record
// that lies, and its Flush says the message may be lost (ErrFrame).
func TestGoingAwayBeforeHello(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	nodes[1].Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
		defer st.Reset()
		st.Write(binary.AppendUvarint(binary.AppendUvarint([]byte{'G', 'H'}, 2), 64<<20))
		io.Copy(io.Discard, st)
	})
	if err := a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "s", ""), message.New(message.Text("", "n", "x"))); err != nil {
		return // the stream was reset before the message went: Send said so
	}
	if err := a.Flush(ctx(t), nodes[1].ID()); !errors.Is(err, endpoint.ErrMaybeLost) {
		t.Fatalf("Flush after a going-away record before the hello: %v, want ErrMaybeLost", err)
	}
}

// TestShutdownBoundedByContext: a sender that keeps its stream open,
// asked to end it or not (a raw stream that does not read its back
// channel), does not hold a shutdown beyond its context.
func TestShutdownBoundedByContext(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	b := newService(t, nodes[1])
	ch, l := collector(1)
	b.Register("s", "", l)
	st, err := nodes[0].Host().NewStream(ctx(t), nodes[1].ID(), endpoint.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	if _, err := st.Write(testutil.EndpointFrame(t, "s", "", message.New(message.Text("", "n", "x")))); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	sctx, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Register("t", "", l); !errors.Is(err, endpoint.ErrClosed) {
		t.Fatalf("Register after Shutdown: %v, want ErrClosed", err)
	}
}
