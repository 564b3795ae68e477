package pipe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// A Bidi's Close flushes the endpoint, which reports every refusal from
// that peer: an output pipe's refused message stays the output pipe's to
// report (Bidi.Close took it, and OutputPipe.Flush returned nil).
func TestBidiCloseLeavesOthersRefusals(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	to := pipe.ToPeers(nodes[1].AddrInfo())

	// An unrelated bidirectional pipe connection between A and B.
	ba := newAdv(t, adv.Unicast)
	l, err := sb.Listen(ba)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *pipe.Bidi, 1)
	go func() {
		b, err := l.Accept(ctx(t))
		if err != nil {
			t.Error(err)
		}
		accepted <- b
	}()
	bidi, err := sa.Connect(ctx(t), ba, to)
	if err != nil {
		t.Fatal(err)
	}
	defer (<-accepted).Close()

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
	for i := 0; i < 2; i++ { // the first fills the queue; the second waits for room
		if err := out.Send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	in.Close() // the waiting message is refused

	cerr := bidi.Close()
	t.Logf("Bidi.Close: %v", cerr)
	ferr := out.Flush(ctx(t))
	t.Logf("OutputPipe.Flush: %v", ferr)
	if !errors.Is(ferr, endpoint.ErrRefused) {
		t.Fatalf("a message refused by the receiver was not reported by the output pipe's Flush (Bidi.Close took the refusal: %v)", cerr)
	}
}

// TestControlOutputPipeRefusalWithoutBidi is the same without the Bidi
// Close: the output pipe's Flush reports the refused message.

// Closing Bidi Y leaves Bidi X's refusal to X.Flush (it returned nil).
func TestBidiRefusalsStayWithTheirBidi(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	to := pipe.ToPeers(nodes[1].AddrInfo())
	ba := newAdv(t, adv.Unicast)
	l, err := sb.Listen(ba)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *pipe.Bidi, 2)
	go func() {
		for i := 0; i < 2; i++ {
			b, err := l.Accept(ctx(t))
			if err != nil {
				t.Error(err)
				return
			}
			accepted <- b
		}
	}()
	x, err := sa.Connect(ctx(t), ba, to)
	if err != nil {
		t.Fatal(err)
	}
	xb := <-accepted
	y, err := sa.Connect(ctx(t), ba, to)
	if err != nil {
		t.Fatal(err)
	}
	defer (<-accepted).Close()
	for i := 0; i < 2; i++ {
		if err := x.Send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	xb.Close() // B's end of X: the waiting message is refused
	cerr := y.Close()
	t.Logf("Y.Close: %v", cerr)
	ferr := x.Flush(ctx(t))
	t.Logf("X.Flush: %v", ferr)
	if ferr == nil {
		t.Fatalf("X.Flush returned nil though B refused one of X's messages (Y.Close took the refusal: %v)", cerr)
	}
}

// TestControlBidiFlushReportsRefusal: without Y's Close, X's Flush
// reports the refused message.

// A Bidi closed after the other end closed first still reports what the
// other end refused (it returned nil at once).
func TestBidiCloseAfterRemoteCloseReportsRefusals(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	ba := newAdv(t, adv.Unicast)
	l, err := sb.Listen(ba)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *pipe.Bidi, 1)
	go func() {
		b, _ := l.Accept(ctx(t))
		accepted <- b
	}()
	x, err := sa.Connect(ctx(t), ba, pipe.ToPeers(nodes[1].AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	xb := <-accepted
	for i := 0; i < 2; i++ {
		if err := x.Send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	xb.Close() // refuses the message waiting for room
	time.Sleep(100 * time.Millisecond)
	t.Logf("X.Err before Close: %v", x.Err())
	if err := x.Close(); err == nil {
		t.Fatal("X.Close returned nil though B refused one of X's messages")
	}
}
