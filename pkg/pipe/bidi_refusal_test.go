package pipe_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// refusing is two services on connected nodes, the second with a queue of
// one message (so a second message waits for room, and is refused when
// the pipe closes), and a bidirectional pipe listener there.
func refusing(t *testing.T) (sa, sb *pipe.Service, l *pipe.Listener, to pipe.ResolveOption) {
	t.Helper()
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb = newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	l, err := sb.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return sa, sb, l, pipe.ToPeers(nodes[1].AddrInfo())
}

// connected opens a connection from sa to l and returns both ends; the
// listening end closes when the test ends.
func connected(t *testing.T, sa *pipe.Service, l *pipe.Listener, to pipe.ResolveOption) (local, remote *pipe.Bidi) {
	t.Helper()
	accepted := make(chan *pipe.Bidi, 1)
	go func() {
		b, err := l.Accept(ctx(t))
		if err != nil {
			t.Error(err)
		}
		accepted <- b
	}()
	local, err := sa.Connect(ctx(t), l.Adv(), to)
	if err != nil {
		t.Fatal(err)
	}
	remote = <-accepted
	if remote == nil {
		t.FailNow() // Accept failed, reported above
	}
	t.Cleanup(func() { remote.Close() })
	return local, remote
}

// sendTwo sends two messages: the first fills the other end's queue, the
// second waits there for room, and is refused if that end closes.
func sendTwo(t *testing.T, send func(context.Context, *message.Message) error) {
	t.Helper()
	for range 2 {
		if err := send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
}

// A Bidi's Close flushes the endpoint, which reports every refusal from
// that peer: an output pipe's refused message stays the output pipe's to
// report (Bidi.Close took it, and OutputPipe.Flush returned nil).
func TestBidiCloseLeavesOthersRefusals(t *testing.T) {
	sa, sb, l, to := refusing(t)
	bidi, _ := connected(t, sa, l, to)
	a := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sa.NewOutputPipe(ctx(t), a, to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sendTwo(t, out.Send)
	in.Close() // the waiting message is refused
	cerr := bidi.Close()
	if ferr := out.Flush(ctx(t)); !errors.Is(ferr, endpoint.ErrRefused) {
		t.Fatalf("a message refused by the receiver was not reported by the output pipe's Flush: %v (Bidi.Close: %v)", ferr, cerr)
	}
}

// Closing Bidi Y leaves Bidi X's refusal to X.Flush (it returned nil).
func TestBidiRefusalsStayWithTheirBidi(t *testing.T) {
	sa, _, l, to := refusing(t)
	x, xb := connected(t, sa, l, to)
	y, _ := connected(t, sa, l, to)
	sendTwo(t, x.Send)
	xb.Close() // B's end of X: the waiting message is refused
	cerr := y.Close()
	if ferr := x.Flush(ctx(t)); !errors.Is(ferr, endpoint.ErrRefused) {
		t.Fatalf("X.Flush: %v, though B refused one of X's messages (Y.Close: %v)", ferr, cerr)
	}
}

// A Bidi closed after the other end closed first still reports what the
// other end refused (it returned nil at once).
func TestBidiCloseAfterRemoteCloseReportsRefusals(t *testing.T) {
	sa, _, l, to := refusing(t)
	x, xb := connected(t, sa, l, to)
	sendTwo(t, x.Send)
	xb.Close() // refuses the message waiting for room
	time.Sleep(100 * time.Millisecond)
	if err := x.Close(); !errors.Is(err, endpoint.ErrRefused) {
		t.Fatalf("X.Close: %v, though B refused one of X's messages (X.Err: %v)", err, x.Err())
	}
}

// A Bidi that sent nothing has nothing to report when it closes after
// the other end closed and that end's peer went away: before, its Close
// flushed the endpoint to the departed peer and reported "messages sent
// earlier may be lost" of messages the application never sent.
func TestBidiCloseAfterRemoteLeftSentNothing(t *testing.T) {
	a := testutil.NewNode(t)
	b, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Connect(ctx(t), a.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	sa := newPipes(t, a)
	epb, _ := endpoint.New(b)
	sb, _ := pipe.New(epb)
	t.Cleanup(func() { sb.Close(); epb.Close() })
	l, err := sa.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan *pipe.Bidi, 1)
	go func() {
		srv, err := l.Accept(ctx(t))
		if err != nil {
			t.Error(err)
		}
		accepted <- srv
	}()
	c, err := sb.Connect(ctx(t), l.Adv(), pipe.ToPeers(a.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.FailNow()
	}
	if err := c.Send(ctx(t), message.New(message.Text("", "q", "hello"))); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Receive(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Receive(ctx(t)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the other end's Close: %v, want io.EOF", err)
	}
	b.Close() // the other end's peer goes away
	if err := srv.Close(); err != nil {
		t.Fatalf("Close of a Bidi that sent nothing, its other end closed and gone: %v", err)
	}
}

// A Bidi whose Send fails part-way (its ctx ends while the message is
// being written to a peer that reads nothing) tells the other end, which
// receives what arrived and then io.EOF. Before, only the failing end
// ended: the other waited for messages until its peer went away.
func TestBidiFailedSendEndsTheOtherEnd(t *testing.T) {
	sa, _, l, to := refusing(t)
	x, xb := connected(t, sa, l, to)
	defer x.Close()
	sendFailsThenEOF(t, x, xb)
}

// sendFailsThenEOF sends X's two messages, then large ones until a Send
// fails (B's queue is full, its endpoint waits for room), and checks that
// B's end receives the two, then io.EOF: X told it of the failure.
func sendFailsThenEOF(t *testing.T, x, xb *pipe.Bidi) {
	t.Helper()
	sendTwo(t, x.Send)
	big := message.New(message.Bytes("", "big", make([]byte, 4<<20)))
	var err error
	for i := 0; err == nil && i < 20; i++ {
		sctx, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
		err = x.Send(sctx, big)
		cancel()
	}
	if err == nil || x.Err() == nil {
		t.Fatalf("no Send failed: %v (X.Err %v)", err, x.Err())
	}
	wait, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	n := 0
	for {
		_, err := xb.Receive(wait)
		if err == nil {
			n++
			continue
		}
		if !errors.Is(err, io.EOF) {
			t.Fatalf("after %d messages, B's end: %v, want io.EOF once X's Send failed (%v)", n, err, x.Err())
		}
		break
	}
	if n < 2 {
		t.Fatalf("B received %d messages before io.EOF, want the 2 sent before the failure", n)
	}
}

// TestBidiCloseNoticeAfterWaitingMessage: a close notice that overtakes
// a message already arrived, which waits for room in the Bidi's queue,
// ends the connection only after it: the other end receives both
// messages, then io.EOF. After a Send fails part-way its notice comes on
// a new endpoint stream while the message waits on the old one. Before,
// the notice ended the connection at once and the waiting message was
// refused: one message, then io.EOF (TestBidiAbortNoticeUnderRefusalFlood
// failed so under load).
func TestBidiCloseNoticeAfterWaitingMessage(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	ep := sb.Endpoint()
	l, err := sb.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x, xb := connected(t, sa, l, pipe.ToPeers(nodes[1].AddrInfo()))
	defer x.Close()
	before := ep.Stats().Received
	sendTwo(t, x.Send) // the first fills xb's queue, the second waits for room
	testutil.WaitFor(t, "the second message handed to the Bidi", func() bool { return ep.Stats().Received == before+2 })
	// The notice, on a stream of its own.
	st, err := nodes[0].Host().NewStream(ctx(t), nodes[1].ID(), endpoint.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Write(testutil.EndpointFrame(t, pipe.BidiService, "x/"+pipe.ConnID(x), message.New())); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the notice handed over", func() bool { return ep.Stats().Received == before+3 })
	for i := range 2 {
		if _, err := xb.Receive(ctx(t)); err != nil {
			t.Fatalf("message %d of 2: %v", i+1, err)
		}
	}
	if _, err := xb.Receive(ctx(t)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the 2 messages: %v, want io.EOF", err)
	}
}
