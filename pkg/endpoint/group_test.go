package endpoint_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// stalled is a sender whose receiver does not read: its first message
// holds the receiver's reader, a large one (plain Send) holds the
// stream's writer, two goroutines Send small messages through a group
// until they fail, and wait for room, and a plain small Send waits beside
// them.
type stalled struct {
	nodes     []*node.Node
	a         *endpoint.Service
	to        endpoint.Address
	g         *endpoint.SendGroup
	release   chan struct{} // lets the receiver read
	delivered atomic.Int64
	sent      atomic.Int64 // through the group
	grouped   chan error   // the group's two Sends' errors
	big       chan error
	plain     chan error
}

func stall(t *testing.T) *stalled {
	s := &stalled{nodes: testutil.NewConnectedNodes(t, 2), release: make(chan struct{}),
		grouped: make(chan error, 2), big: make(chan error, 1), plain: make(chan error, 1)}
	s.a = newService(t, s.nodes[0])
	b := newService(t, s.nodes[1])
	b.Register("slow", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {
		if s.delivered.Add(1) == 1 {
			<-s.release // holds the reader
		}
	}))
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	})
	s.to = endpoint.PeerAddress(s.nodes[1].ID(), "slow", "")
	if err := s.a.Send(ctx(t), s.to, small()); err != nil {
		t.Fatal(err)
	}
	// Larger than a yamux stream's window can ever be (16 MiB); until
	// the receiver reads, however long the other Sends wait.
	bctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { s.big <- s.a.Send(bctx, s.to, message.New(message.Bytes("", "p", make([]byte, 32<<20)))) }()
	testutil.WaitBlocked(t, "endpoint.writeLarge", false)
	s.g = s.a.NewSendGroup()
	for range 2 {
		go func() {
			for {
				if err := s.g.Send(ctx(t), s.to, small()); err != nil {
					s.grouped <- err
					return
				}
				s.sent.Add(1)
			}
		}()
	}
	testutil.WaitBlocked(t, "endpoint.(*sender).send", true)
	go func() { s.plain <- s.a.Send(ctx(t), s.to, small()) }()
	return s
}

func small() *message.Message { return message.New(message.Bytes("", "p", make([]byte, 1<<10))) }

// TestSendGroupCloseEndsWaits checks that a SendGroup's Close ends the
// Sends made through it that wait for a receiver that does not read (here
// for room in the queue, behind a large message that holds the stream's
// writer), with ErrGroupClosed, and ends nothing else: a plain Send
// waiting beside them, and everything accepted before, are delivered once
// the receiver reads, and Flush finds nothing lost. A Send through the
// group after Close fails at once.
func TestSendGroupCloseEndsWaits(t *testing.T) {
	s := stall(t)

	s.g.Close()
	for range 2 {
		if err := <-s.grouped; !errors.Is(err, endpoint.ErrGroupClosed) {
			t.Fatalf("Send through the group under its Close: %v, want ErrGroupClosed", err)
		}
	}
	if err := s.g.Send(ctx(t), s.to, small()); !errors.Is(err, endpoint.ErrGroupClosed) {
		t.Fatalf("Send through a closed group: %v, want ErrGroupClosed", err)
	}
	close(s.release)
	for what, ch := range map[string]chan error{"large": s.big, "plain": s.plain} {
		if err := <-ch; err != nil {
			t.Fatalf("%s Send beside the group: %v", what, err)
		}
	}
	if err := s.a.Flush(ctx(t), s.nodes[1].ID()); err != nil {
		t.Fatalf("Flush: %v, want nothing lost", err)
	}
	if got, want := s.delivered.Load(), 3+s.sent.Load(); got != want {
		t.Fatalf("%d messages delivered, want %d (the group's %d, the first, the large one, the plain one)", got, want, s.sent.Load())
	}
}

// TestCloseEndsWaitingSends checks that the service's Close ends every
// Send waiting for a receiver that does not read, with ErrClosed: the
// large one stalled in its write, those waiting for room, through a group
// or not.
func TestCloseEndsWaitingSends(t *testing.T) {
	s := stall(t)

	if err := s.a.Close(); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]chan error{"large": s.big, "plain": s.plain, "grouped": s.grouped} {
		if err := <-ch; !errors.Is(err, endpoint.ErrClosed) {
			t.Errorf("%s Send under the service's Close: %v, want ErrClosed", what, err)
		}
	}
	if err := <-s.grouped; !errors.Is(err, endpoint.ErrClosed) {
		t.Errorf("grouped Send under the service's Close: %v, want ErrClosed", err)
	}
}

// TestSendGroupCloseVisitsItsSender checks that a group whose Sends wrote
// to one peer visits that peer's sender alone when it closes, however
// many senders the service keeps: a service with thousands of peers
// closing a pipe or a Bidi for each paid for a visit to every sender on
// every Close.
func TestSendGroupCloseVisitsItsSender(t *testing.T) {
	const peers = 8
	nodes := testutil.NewConnectedNodes(t, peers+1)
	a := newService(t, nodes[0])
	for _, n := range nodes[1:] {
		b := newService(t, n)
		b.Register("sink", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {}))
		if err := a.Send(ctx(t), endpoint.PeerAddress(n.ID(), "sink", ""), small()); err != nil {
			t.Fatal(err)
		}
	}
	var visits atomic.Int64
	endpoint.SetInterruptHook(func() { visits.Add(1) })
	t.Cleanup(func() { endpoint.SetInterruptHook(nil) })

	for _, tt := range []struct {
		name   string
		to     int // peers the group sends to
		visits int64
	}{
		{"no Send", 0, 0},
		{"one peer", 1, 1},
		{"two peers", 2, peers}, // every sender, as before
	} {
		// A Flush ends each stream, so that the group's Sends open new
		// ones and write directly, as the case needs: on a stream whose
		// last write was slow (backlog), a Send queues for the flusher
		// and the group never writes there.
		for i := range tt.to {
			if err := a.Flush(ctx(t), nodes[1+i].ID()); err != nil {
				t.Fatal(err)
			}
		}
		g := a.NewSendGroup()
		for i := range tt.to {
			if err := g.Send(ctx(t), endpoint.PeerAddress(nodes[1+i].ID(), "sink", ""), small()); err != nil {
				t.Fatal(err)
			}
		}
		visits.Store(0)
		g.Close()
		if got := visits.Load(); got != tt.visits {
			t.Errorf("%s: Close visited %d senders of %d, want %d", tt.name, got, peers, tt.visits)
		}
	}
}

// TestSendGroupCloseEndsWritesToTwoPeers checks that Close cuts short
// the group's large writes stalled by two receivers that do not read.
func TestSendGroupCloseEndsWritesToTwoPeers(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	a := newService(t, nodes[0])
	release := make(chan struct{})
	for _, n := range nodes[1:] {
		b := newService(t, n)
		b.Register("slow", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) { <-release }))
	}
	t.Cleanup(func() { close(release) }) // before the services' Close, which waits for their handlers
	g := a.NewSendGroup()
	errs := make(chan error, 2)
	for _, n := range nodes[1:] {
		to := endpoint.PeerAddress(n.ID(), "slow", "")
		if err := a.Send(ctx(t), to, small()); err != nil { // holds the receiver's reader
			t.Fatal(err)
		}
		// Larger than a yamux stream's window can ever be (16 MiB).
		go func() { errs <- g.Send(ctx(t), to, message.New(message.Bytes("", "p", make([]byte, 32<<20)))) }()
	}
	testutil.WaitBlockedN(t, 2, "endpoint.writeLarge", false)
	g.Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, endpoint.ErrGroupClosed) {
			t.Fatalf("large Send through the group under its Close: %v, want ErrGroupClosed", err)
		}
	}
}
