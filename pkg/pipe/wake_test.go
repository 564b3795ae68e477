package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// twoPipes binds two unicast pipes, A and B, at sb and opens their
// output pipes at sa, to the peer at to.
func twoPipes(t *testing.T, sa, sb *pipe.Service, to peer.AddrInfo) (inA, inB *pipe.InputPipe, outA, outB *pipe.OutputPipe) {
	t.Helper()
	inA, outA = onePipe(t, sa, sb, to)
	inB, outB = onePipe(t, sa, sb, to)
	return inA, inB, outA, outB
}

// onePipe binds a unicast pipe at sb and opens its output pipe at sa, to
// the peer at to.
func onePipe(t *testing.T, sa, sb *pipe.Service, to peer.AddrInfo) (*pipe.InputPipe, *pipe.OutputPipe) {
	t.Helper()
	a := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sa.NewOutputPipe(ctx(t), a, pipe.ToPeers(to))
	if err != nil {
		t.Fatal(err)
	}
	return in, out
}

// TestBurstBlockedOnAnotherPipeWakesReceive: a burst puts a message in
// pipe A, then fills pipe B, whose Receive is not called until A's
// message is received. The reader, waiting for room in B, must first wake
// A's Receive (it deferred that wake to the end of the burst), or both
// sides wait for ever.
func TestBurstBlockedOnAnotherPipeWakesReceive(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	inA, inB, outA, outB := twoPipes(t, sa, sb, nodes[1].AddrInfo())
	// Everything is sent before anything is received, so the reader
	// finds bursts: A's message, then B's until B is full.
	const rounds, perB = 200, 3
	for r := range rounds {
		if err := outA.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(r)))); err != nil {
			t.Fatal(err)
		}
		for i := range perB {
			if err := outB.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(r*perB+i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for r := range rounds {
			m, err := inA.Receive(ctx(t))
			if err != nil || text(m, "n") != fmt.Sprint(r) {
				errs <- fmt.Errorf("round %d: A: %v %v", r, m, err)
				return
			}
			for i := range perB {
				m, err := inB.Receive(ctx(t))
				if err != nil || text(m, "n") != fmt.Sprint(r*perB+i) {
					errs <- fmt.Errorf("round %d: B %d: %v %v", r, i, m, err)
					return
				}
			}
		}
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// smallBudgetPipes starts the pipe service on n over an endpoint whose
// memory budget has room for about three 10 KiB messages, queued and
// held; both closed when the test ends.
func smallBudgetPipes(t *testing.T, n *node.Node) *pipe.Service {
	t.Helper()
	ep, err := endpoint.New(n, endpoint.WithMaxMessageSize(16<<10), endpoint.WithMemoryBudget(40<<10, 40<<10))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); ep.Close() })
	return s
}

// TestBurstBlockedOnTheBudgetWakesReceive: the reader holds a burst of
// messages queued in a pipe and waits for the memory budget they hold;
// only Receive frees it, so the reader wakes Receive before it waits.
func TestBurstBlockedOnTheBudgetWakesReceive(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	_, in, out := unicast(t, newPipes(t, nodes[0]), smallBudgetPipes(t, nodes[1]), pipe.ToPeers(nodes[1].AddrInfo()))
	const n = 200
	sent := make(chan error, 1)
	go func() {
		defer close(sent)
		for i := range n {
			m := message.New(message.Text("", "n", fmt.Sprint(i)), message.Bytes("", "pad", make([]byte, 10<<10)))
			if err := out.Send(ctx(t), m); err != nil {
				sent <- err
				return
			}
		}
	}()
	// Let the sender fill the budget before anything is received.
	time.Sleep(100 * time.Millisecond)
	for i := range n {
		m, err := in.Receive(ctx(t))
		if err != nil || text(m, "n") != fmt.Sprint(i) {
			t.Fatalf("message %d: %v %v", i, m, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestClosedPipeFreesItsSendersBudget: messages still queued in an input
// pipe or a Bidi when it is closed no longer hold their sender's endpoint
// memory budget, though they can still be received: an application that
// closes a pipe without draining it must not stall that peer for good.
func TestClosedPipeFreesItsSendersBudget(t *testing.T) {
	pad := func(i int) *message.Message {
		return message.New(message.Text("", "n", fmt.Sprint(i)), message.Bytes("", "pad", make([]byte, 10<<10)))
	}
	type receiver interface {
		Receive(context.Context) (*message.Message, error)
		Close() error
	}
	for _, tc := range []struct {
		name string
		// fill has sa send three messages that wait, unreceived, in a
		// queue of sb, and returns that queue's receiving end and length.
		fill func(t *testing.T, sa, sb *pipe.Service, to peer.AddrInfo) (receiver, func() int)
		eof  error // what Receive says once the queue is drained
	}{
		{"input pipe", func(t *testing.T, sa, sb *pipe.Service, to peer.AddrInfo) (receiver, func() int) {
			in, out := onePipe(t, sa, sb, to)
			defer out.Close()
			for i := range 3 {
				if err := out.Send(ctx(t), pad(i)); err != nil {
					t.Fatal(err)
				}
			}
			return in, func() int { return pipe.QueueLen(in) }
		}, pipe.ErrClosed},
		{"bidi", func(t *testing.T, sa, sb *pipe.Service, to peer.AddrInfo) (receiver, func() int) {
			a := newAdv(t, adv.Unicast)
			l, err := sb.Listen(a)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := make(chan *pipe.Bidi, 1)
			go func() {
				bc, err := l.Accept(ctx(t))
				if err != nil {
					t.Error(err)
				}
				accepted <- bc
			}()
			c, err := sa.Connect(ctx(t), a, pipe.ToPeers(to))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			bc := <-accepted
			if bc == nil {
				t.FailNow()
			}
			for i := range 3 {
				if err := c.Send(ctx(t), pad(i)); err != nil {
					t.Fatal(err)
				}
			}
			return bc, func() int { return pipe.BidiQueueLen(bc) }
		}, pipe.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			sa, sb := newPipes(t, nodes[0]), smallBudgetPipes(t, nodes[1])
			first, queued := tc.fill(t, sa, sb, nodes[1].AddrInfo())
			for queued() < 3 {
				time.Sleep(time.Millisecond)
			}
			first.Close() // not drained
			// The same sender, to another pipe.
			a := newAdv(t, adv.Unicast)
			in, err := sb.NewInputPipe(a)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			sent := make(chan error, 1)
			go func() {
				out, err := sa.NewOutputPipe(ctx(t), a, pipe.ToPeers(nodes[1].AddrInfo()))
				if err != nil {
					sent <- err
					return
				}
				defer out.Close()
				for i := range 10 {
					if err := out.Send(ctx(t), pad(i)); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			for i := range 10 {
				m, err := in.Receive(ctx(t))
				if err != nil || text(m, "n") != fmt.Sprint(i) {
					t.Fatalf("message %d: %v %v", i, m, err)
				}
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			// What was queued at Close can still be received.
			for i := range 3 {
				m, err := first.Receive(ctx(t))
				if err != nil || text(m, "n") != fmt.Sprint(i) {
					t.Fatalf("queued message %d after Close: %v %v", i, m, err)
				}
			}
			if _, err := first.Receive(ctx(t)); !errors.Is(err, tc.eof) {
				t.Fatalf("after the queue: %v, want %v", err, tc.eof)
			}
		})
	}
}

// TestReceiveMakesRoomAtOnce: pipe A's queue is full and the reader waits
// for room in it with B's message behind; the application takes one of
// A's messages, then waits for B's. Taking the message must make its room
// at once, or the reader and the application wait for each other.
func TestReceiveMakesRoomAtOnce(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(8))
	inA, inB, outA, outB := twoPipes(t, sa, sb, nodes[1].AddrInfo())
	for i := range 9 { // one more than A's queue holds
		if err := outA.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := outB.Send(ctx(t), message.New(message.Text("", "n", "b"))); err != nil {
		t.Fatal(err)
	}
	for pipe.QueueLen(inA) < 8 {
		time.Sleep(time.Millisecond)
	}
	if m, err := inA.Receive(ctx(t)); err != nil || text(m, "n") != "0" {
		t.Fatalf("A's first message: %v %v", m, err)
	}
	if m, err := inB.Receive(ctx(t)); err != nil || text(m, "n") != "b" {
		t.Fatalf("B's message: %v %v", m, err)
	}
}
