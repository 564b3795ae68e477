package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// TestQUIC: messages both ways between nodes that listen only on QUIC.
func TestQUIC(t *testing.T) {
	a := testutil.NewNode(t, node.WithListenAddrs(testutil.LoopbackQUIC))
	b := testutil.NewNode(t, node.WithListenAddrs(testutil.LoopbackQUIC))
	if err := a.Connect(ctx(t), b.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	sa, sb := newService(t, a), newService(t, b)
	chB, lB := collector(2)
	sb.Register("q", "", lB)
	chA, lA := collector(1)
	sa.Register("r", "", lA)
	big := pattern(4<<20, 1)
	if err := sa.Send(ctx(t), endpoint.PeerAddress(b.ID(), "q", "p"), message.New(message.Text("", "t", "hello"))); err != nil {
		t.Fatal(err)
	}
	if err := sa.Send(ctx(t), endpoint.PeerAddress(b.ID(), "q", "p"), message.New(message.Bytes("", "big", big))); err != nil {
		t.Fatal(err)
	}
	if e, _ := recv(t, chB).Message.Get("", "t"); string(e.Data) != "hello" {
		t.Fatalf("small message arrived as %q", e.Data)
	}
	d := recv(t, chB)
	if e, _ := d.Message.Get("", "big"); !bytes.Equal(e.Data, big) || d.Source != a.ID() {
		t.Fatal("4 MiB message damaged or from the wrong source")
	}
	if err := sb.Send(ctx(t), endpoint.PeerAddress(a.ID(), "r", ""), d.Message); err != nil {
		t.Fatal(err)
	}
	if e, _ := recv(t, chA).Message.Get("", "big"); !bytes.Equal(e.Data, big) {
		t.Fatal("reply damaged")
	}
	for _, n := range [][2]*node.Node{{a, b}, {b, a}} {
		conns := n[0].Host().Network().ConnsToPeer(n[1].ID())
		if len(conns) == 0 {
			t.Fatal("no connection")
		}
		for _, c := range conns {
			if tr := c.ConnState().Transport; tr != "quic-v1" {
				t.Fatalf("connection over %q, want quic-v1", tr)
			}
		}
	}
}

// TestPeerDisconnectsMidMessage: the receiver drops the connection while a
// large message is on its way; the sender gets an error, and its next Send
// dials again and gets through.
func TestPeerDisconnectsMidMessage(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	b.Register("stuck", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}))
	ch, l := collector(1)
	b.Register("ok", "", l)
	stuck := endpoint.PeerAddress(nodes[1].ID(), "stuck", "")
	if err := a.Send(ctx(t), stuck, message.New()); err != nil {
		t.Fatal(err)
	}
	<-entered // B's reader waits in the listener: nothing more is read
	// 60 MiB cannot fit in the flow-control windows, so this Send is still
	// writing when B hangs up.
	big := message.New(message.Bytes("", "big", make([]byte, 60<<20)))
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		errc <- a.Send(ctx(t), stuck, big)
	}()
	<-started
	time.Sleep(100 * time.Millisecond) // lets the Send get going; not an assertion
	if err := nodes[1].Host().Network().ClosePeer(nodes[0].ID()); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if err == nil {
		t.Fatal("a Send cut off by the peer's hang-up reported success")
	}
	t.Logf("the Send cut off: %v", err)
	close(release)
	if err := a.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), "ok", ""), message.New(message.Text("", "q", "again"))); err != nil {
		t.Fatalf("the Send after the hang-up: %v", err)
	}
	if e, _ := recv(t, ch).Message.Get("", "q"); string(e.Data) != "again" {
		t.Fatalf("got %q", e.Data)
	}
}

// TestStreamsPerPeerLimit: a peer opening more endpoint streams than
// allowed has the extra ones reset, and can still send once it closes
// them.
func TestStreamsPerPeerLimit(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1], endpoint.WithMaxStreamsPerPeer(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ch, l := collector(16)
	b.Register("ok", "", l)
	var raw []network.Stream
	for range 3 {
		st, err := nodes[0].Host().NewStream(ctx(t), nodes[1].ID(), endpoint.ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, st)
		st.Write([]byte{1}) // a service name of one byte, never sent: the reader waits
	}
	deadline := time.Now().Add(30 * time.Second)
	for b.Stats().StreamsRefused != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want one stream refused", b.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, st := range raw {
		st.Reset()
	}
	// Once B has seen the resets the endpoint's own stream is accepted.
	to := endpoint.PeerAddress(nodes[1].ID(), "ok", "")
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("no message got through after the extra streams closed")
		}
		if err := a.Send(ctx(t), to, message.New(message.Text("", "i", fmt.Sprint(i)))); err != nil {
			continue // its stream was refused: the next Send opens another
		}
		select {
		case <-ch:
			return
		case <-time.After(100 * time.Millisecond): // when to retry, not an assertion
		}
	}
}

func TestBadLimitOptions(t *testing.T) {
	n := testutil.NewNode(t)
	for _, o := range []endpoint.Option{
		endpoint.WithMaxStreamsPerPeer(0), endpoint.WithMaxStreamsPerPeer(2000),
		endpoint.WithMaxPrealloc(-1, 10), endpoint.WithMaxPrealloc(10, 5), endpoint.WithMaxPrealloc(0, 1<<40),
		endpoint.WithMaxMessageSize(1),
	} {
		if _, err := endpoint.New(n, o); !errors.Is(err, endpoint.ErrBadOption) {
			t.Errorf("bad option accepted: %v", err)
		}
	}
}

// TestLargeMessagesWithoutPrealloc: with preallocation off, large messages
// grow their buffers as their bytes arrive, and still arrive whole.
func TestLargeMessagesWithoutPrealloc(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1], endpoint.WithMaxPrealloc(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ch, l := collector(2)
	b.Register("bulk", "", l)
	to := endpoint.PeerAddress(nodes[1].ID(), "bulk", "")
	one, two := pattern(9<<20, 3), pattern(5<<20+1, 4)
	if err := a.Send(ctx(t), to, message.New(message.Bytes("", "one", one), message.Bytes("", "two", two))); err != nil {
		t.Fatal(err)
	}
	m := recv(t, ch).Message
	if e1, _ := m.Get("", "one"); !bytes.Equal(e1.Data, one) {
		t.Fatal("first element damaged")
	}
	if e2, _ := m.Get("", "two"); !bytes.Equal(e2.Data, two) {
		t.Fatal("second element damaged")
	}
}

// TestRelease: a listener that releases each message gets later messages
// intact whether or not their buffers are recycled ones.
func TestRelease(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	type check struct {
		ok  bool
		len int
	}
	results := make(chan check, 64)
	var want [][]byte
	for i := range 20 {
		want = append(want, pattern(64<<10+i*1000, byte(i)))
	}
	next := 0
	b.Register("r", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		e, _ := d.Message.Get("", "p")
		results <- check{bytes.Equal(e.Data, want[next]), len(e.Data)}
		next++
		d.Release()
		d.Release() // a second call does nothing
	}))
	to := endpoint.PeerAddress(nodes[1].ID(), "r", "")
	for _, p := range want {
		if err := a.Send(ctx(t), to, message.New(message.Bytes("", "p", p))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range want {
		select {
		case r := <-results:
			if !r.ok {
				t.Fatalf("message %d (%d bytes) damaged", i, r.len)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no delivery within 30 s")
		}
	}
	(&endpoint.Delivery{}).Release() // not made by the service: nothing happens
}

// TestCancelledContextThenAnother: a context cancelled after its Send
// returned makes its later Sends fail, and leaves the stream usable for
// Sends with other contexts.
func TestCancelledContextThenAnother(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(4)
	b.Register("c", "", l)
	to := endpoint.PeerAddress(nodes[1].ID(), "c", "")
	c1, cancel1 := context.WithCancel(context.Background())
	if err := a.Send(c1, to, message.New(message.Text("", "n", "1"))); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	cancel1()
	if err := a.Send(c1, to, message.New(message.Text("", "n", "x"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with a cancelled context: %v", err)
	}
	for i := 2; i <= 3; i++ {
		c2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
		err := a.Send(c2, to, message.New(message.Text("", "n", fmt.Sprint(i))))
		cancel2()
		if err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		if e, _ := recv(t, ch).Message.Get("", "n"); string(e.Data) != fmt.Sprint(i) {
			t.Fatalf("got message %s, want %d", e.Data, i)
		}
	}
}

// TestSendUnencodable: a message the wire format cannot carry is refused
// before anything is written, small, large or nil, and the stream stays
// usable.
func TestSendUnencodable(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	ch, l := collector(1)
	b.Register("u", "", l)
	to := endpoint.PeerAddress(nodes[1].ID(), "u", "")
	for _, bad := range []*message.Message{
		message.New(message.Text("", "\xff", "small")),
		message.New(message.Bytes("", "\xff", make([]byte, 1<<20))),
		nil,
	} {
		if err := a.Send(ctx(t), to, bad); !errors.Is(err, wire.ErrUnencodable) {
			t.Fatalf("Send of an unencodable message: %v", err)
		}
	}
	if err := a.Send(ctx(t), to, message.New(message.Text("", "ok", "yes"))); err != nil {
		t.Fatal(err)
	}
	if e, _ := recv(t, ch).Message.Get("", "ok"); string(e.Data) != "yes" {
		t.Fatalf("got %q", e.Data)
	}
}

// TestCloseNotHeldByAStallingReceiver: a receiver that never sends its
// hello holds a large Send waiting for it, and one that reads everything
// but never ends its side of the stream holds a Flush waiting for that
// end; both wait on the caller's context, and Close must still return,
// and end them, however long those contexts are.
func TestCloseNotHeldByAStallingReceiver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		receiver func(st network.Stream, hold <-chan struct{})
		// call is what waits: a Send or a Flush with no deadline.
		call func(s *endpoint.Service, to peer.ID) error
	}{
		{"Send waiting for the hello", func(st network.Stream, hold <-chan struct{}) {
			<-hold // no hello, reads nothing
			st.Reset()
		}, func(s *endpoint.Service, to peer.ID) error {
			return s.Send(context.Background(), endpoint.PeerAddress(to, "x", ""), message.New(message.Bytes("", "b", make([]byte, 100<<10))))
		}},
		{"Flush waiting for the end of stream", func(st network.Stream, hold <-chan struct{}) {
			st.Write([]byte{'H', 1, 0x80, 0x80, 0x80, 1}) // hello: version 1, 2 MiB
			io.Copy(io.Discard, st)                       // reads up to the sender's end of stream
			<-hold                                        // and never ends its own side
			st.Reset()
		}, func(s *endpoint.Service, to peer.ID) error {
			if err := s.Send(context.Background(), endpoint.PeerAddress(to, "x", ""), message.New(message.Text("", "t", "hi"))); err != nil {
				return err
			}
			return s.Flush(context.Background(), to)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			a, err := endpoint.New(nodes[0])
			if err != nil {
				t.Fatal(err)
			}
			hold := make(chan struct{})
			defer close(hold)
			nodes[1].Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) { tc.receiver(st, hold) })
			called := make(chan error, 1)
			go func() { called <- tc.call(a, nodes[1].ID()) }()
			time.Sleep(300 * time.Millisecond) // it waits
			closed := make(chan struct{})
			go func() { a.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return within 10 s")
			}
			select {
			case err := <-called:
				if !errors.Is(err, endpoint.ErrClosed) {
					t.Errorf("after Close: %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still waiting after Close")
			}
			// Close dropped whatever was queued: a later Flush cannot
			// vouch for it.
			if err := a.Flush(ctx(t), nodes[1].ID()); !errors.Is(err, endpoint.ErrClosed) {
				t.Errorf("Flush after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestCloseCutsAWriteAboutToStart: the service's Close comes while a
// large Send holds the stream's token and has not yet prepared its
// write, to a receiver that reads nothing more. Close moves the stream's
// write deadline into the past and waits for the token; the Send must
// then not write. Before, its prepare put the deadline back (to none: its
// ctx has none, and an earlier Send's had set one), so it wrote 32 MiB to
// the stalled receiver and Close waited for it for ever.
func TestCloseCutsAWriteAboutToStart(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b := newService(t, nodes[1])
	release := make(chan struct{})
	var delivered atomic.Int64
	b.Register("slow", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {
		if delivered.Add(1) == 1 {
			<-release // holds the receiver's reader
		}
	}))
	defer close(release)
	to := endpoint.PeerAddress(nodes[1].ID(), "slow", "")
	// A Send whose ctx has a deadline sets the stream's write deadline.
	dctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := a.Send(dctx, to, small()); err != nil {
		t.Fatal(err)
	}

	reached, resume := make(chan struct{}), make(chan struct{})
	endpoint.SetLargePrepareHook(func() { close(reached); <-resume })
	big := make(chan error, 1)
	go func() {
		big <- a.Send(context.Background(), to, message.New(message.Bytes("", "p", make([]byte, 32<<20))))
	}()
	<-reached
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	testutil.WaitBlocked(t, "endpoint.(*sender).close", true) // for the token
	close(resume)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits after 30 s for a large Send it was to cut short")
	}
	if err := <-big; !errors.Is(err, endpoint.ErrClosed) {
		t.Fatalf("large Send under Close: %v, want ErrClosed", err)
	}
	endpoint.SetLargePrepareHook(nil)
}
