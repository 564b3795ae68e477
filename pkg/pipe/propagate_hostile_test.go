package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// propagating binds a propagate pipe's input at one service (with
// sbOpts) and opens its output at another, on two connected nodes, once
// the member is reachable; both pipes close when the test ends.
func propagating(t *testing.T, sbOpts ...pipe.Option) (sa, sb *pipe.Service, in *pipe.InputPipe, out *pipe.OutputPipe) {
	t.Helper()
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb = newPipes(t, nodes[0]), newPipes(t, nodes[1], sbOpts...)
	ad := newAdv(t, adv.Propagate)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	out = publisher(t, sa, ad)
	t.Cleanup(func() { out.Close() })
	return sa, sb, in, out
}

// publisher opens ad's output pipe at s once a member is reachable.
func publisher(t *testing.T, s *pipe.Service, ad *adv.PipeAdvertisement) *pipe.OutputPipe {
	t.Helper()
	out, err := s.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.WaitMembers(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	return out
}

// A member that does not read, flooded with near-maximum propagate
// messages, holds its queue's byte bound, the rest dropped and counted:
// gossipsub's buffer in front of the queue held 128 more 1 MiB messages,
// counted nowhere, 144 MiB in all.
func TestPropagateUnreadPipeBounded(t *testing.T) {
	_, sb, in, out := propagating(t)
	before := testutil.LiveHeap()
	const n = 150
	for range n {
		big := message.New(message.Bytes("", "b", make([]byte, pipe.DefaultMaxPropagate-64)))
		if err := out.Send(ctx(t), big); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	// Let gossipsub's message caches (5 heartbeats) forget them.
	time.Sleep(8 * time.Second)
	grown := testutil.LiveHeap() - before
	st := sb.Stats()
	received := 0
	for {
		rctx, cancel := context.WithTimeout(ctx(t), 500*time.Millisecond)
		_, err := in.Receive(rctx)
		cancel()
		if err != nil {
			break
		}
		received++
	}
	held := int64(received) * pipe.DefaultMaxPropagate
	t.Logf("sent %d x 1 MiB; %d still receivable after 8 s (%d MiB; heap grew %d MiB); undelivered %d, inbound dropped %d",
		n, received, held>>20, grown>>20, st.PropagateUndelivered, st.PropagateInboundDropped)
	if held > pipe.DefaultQueueBytes+pipe.DefaultMaxPropagate {
		t.Fatalf("an unread propagate pipe holds %d MiB, over its queue's %d MiB bound", held>>20, pipe.DefaultQueueBytes>>20)
	}
}

// A propagate message's size in the queue counts every element's bytes,
// its signature elements' too: 900 KiB in a signature element counted 384
// bytes, and a queue bound at 1 MiB took 60 of them.
func TestPropagateQueueCountsEveryByte(t *testing.T) {
	_, _, in, out := propagating(t, pipe.WithQueueLen(1024), pipe.WithQueueBytes(1<<20))
	before := testutil.LiveHeap()
	const n = 60
	for range n {
		m := message.New(message.Element{Name: "x", Signature: &message.Element{Name: "sig", Data: make([]byte, 900<<10)}})
		if err := out.Send(ctx(t), m); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	time.Sleep(7 * time.Second) // gossipsub's caches forget them
	q := pipe.QueueLen(in)
	grown := testutil.LiveHeap() - before
	t.Logf("sent %d messages of 900 KiB; the 1 MiB queue holds %d of them, heap grew %d MiB", n, q, grown>>20)
	if q > 2 {
		t.Fatalf("queue bounded at 1 MiB holds %d messages of 900 KiB (%d MiB)", q, grown>>20)
	}
}

// Service.Close racing the binding of a propagate input pipe: no data
// race, no nil stop function called (release was published before it
// existed).
func TestServiceCloseWhileBindingPropagate(t *testing.T) {
	n := testutil.NewNode(t)
	var bound atomic.Int64
	const rounds = 2000
	defer func() { t.Logf("bound before Close in %d of %d", bound.Load(), rounds) }()
	for i := range rounds {
		ep, err := endpoint.New(n)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pipe.New(ep)
		if err != nil {
			t.Fatal(err)
		}
		// Start gossipsub first, so that binding is quick.
		if _, err := s.NewInputPipe(newAdv(t, adv.Propagate)); err != nil {
			t.Fatal(err)
		}
		ad := newAdv(t, adv.Propagate)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := s.NewInputPipe(ad); err == nil {
				bound.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			// Spread Close over the binding's duration.
			for start := time.Now(); time.Since(start) < time.Duration(i%200)*2*time.Microsecond; {
			}
			s.Close()
		}()
		wg.Wait()
		ep.Close()
	}
}

// Closing a propagate input pipe: messages gossipsub had handed over but
// the queue had no room for are counted in Dropped, not lost in silence
// (26 of 30 were).
func TestPropagateCloseCountsWhatItDrops(t *testing.T) {
	sa, sb, in, out := propagating(t, pipe.WithQueueLen(4))
	const n = 30
	for i := range n {
		if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	queued := pipe.QueueLen(in)
	in.Close()
	received := 0
	for {
		c, cancel := context.WithTimeout(ctx(t), time.Second)
		_, err := in.Receive(c)
		cancel()
		if err != nil {
			break
		}
		received++
	}
	a, b := sa.Stats(), sb.Stats()
	counted := a.PropagateOutboundDropped + b.PropagateInboundDropped + b.PropagateUndelivered + in.Dropped()
	t.Logf("sent %d; queued at Close %d; received after Close %d; counted dropped %d", n, queued, received, counted)
	if uint64(received)+counted != n {
		t.Fatalf("%d of %d accepted messages neither received nor counted", n-received-int(counted), n)
	}
}

// A propagate pipe's handler is not called for messages taken after
// Close returned (it was, up to 6 times, for what gossipsub had buffered).
func TestPropagateHandlerNotCalledAfterClose(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	late := 0
	for round := range 6 {
		ad := newAdv(t, adv.Propagate)
		var calls atomic.Int64
		block := make(chan struct{})
		in, err := sb.NewInputPipe(ad, pipe.WithHandler(func(*pipe.Received) {
			if calls.Add(1) == 1 {
				<-block
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		out := publisher(t, sa, ad)
		for i := range 20 {
			if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		in.Close()
		atClose := calls.Load()
		close(block)
		time.Sleep(300 * time.Millisecond)
		after := calls.Load() - atClose
		t.Logf("round %d: handler calls at Close %d, after Close returned %d", round, atClose, after)
		late += int(after)
		out.Close()
	}
	if late > 0 {
		t.Fatalf("the handler was called %d times after InputPipe.Close returned", late)
	}
}

// Service.Close closes output pipes too: a propagate output pipe went on
// publishing after it, and on a shared router the topic stayed joined, so
// a new service could not bind the pipe ("duplicate validator").
func TestServiceCloseClosesOutputPipes(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	psCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ps, err := pubsub.NewGossipSub(psCtx, nodes[0].Host())
	if err != nil {
		t.Fatal(err)
	}
	ep, err := endpoint.New(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	s1, err := pipe.New(ep, pipe.WithPubSub(ps))
	if err != nil {
		t.Fatal(err)
	}
	sb := newPipes(t, nodes[1])
	ad := newAdv(t, adv.Propagate)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := s1.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.WaitMembers(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	sendErr := out.Send(ctx(t), message.New(message.Text("", "n", "after close")))
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	_, recvErr := in.Receive(c)
	cancel()
	s2, err := pipe.New(ep, pipe.WithPubSub(ps))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, bindErr := s2.NewInputPipe(ad)
	t.Logf("after Service.Close: Send = %v (received: %v); a new service binding the pipe: %v", sendErr, recvErr == nil, bindErr)
	if sendErr == nil || !errors.Is(sendErr, pipe.ErrClosed) || bindErr != nil {
		t.Fatalf("Service.Close left the propagate output pipe open: Send %v, rebinding %v", sendErr, bindErr)
	}
}

// WaitMembers on a closed propagate output pipe fails at once (it polled
// until its context ended: for ever with context.Background).
func TestWaitMembersAfterClose(t *testing.T) {
	_, _, _, out := propagating(t)
	out.Close()
	done := make(chan error, 1)
	go func() { done <- out.WaitMembers(context.Background(), 1) }()
	select {
	case err := <-done:
		t.Logf("WaitMembers after Close: %v", err)
	case <-time.After(3 * time.Second):
		t.Fatal("WaitMembers(context.Background()) on a closed propagate output pipe still waiting after 3 s (a member is connected and subscribed)")
	}
}

// A publisher that is a member of its propagate pipe too (a chat room)
// reaches the members WaitMembers saw: it publishes only to its gossipsub
// mesh, which the other member joined a heartbeat later, and WaitMembers
// returned before that: 3 to 4 of 5 messages were lost in silence.
func TestPropagateMemberSenderReachesMembers(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	// Start both routers and their streams on another pipe first.
	warm := newAdv(t, adv.Propagate)
	w1, _ := sa.NewInputPipe(warm)
	w2, _ := sb.NewInputPipe(warm)
	defer w1.Close()
	defer w2.Close()
	time.Sleep(time.Second)
	lost := 0
	const rounds = 5
	for i := range rounds {
		ad := newAdv(t, adv.Propagate)
		in, err := sb.NewInputPipe(ad)
		if err != nil {
			t.Fatal(err)
		}
		mine, err := sa.NewInputPipe(ad) // the sender is a member too
		if err != nil {
			t.Fatal(err)
		}
		out := publisher(t, sa, ad)
		if err := out.Send(ctx(t), message.New(message.Text("", "n", "hello"))); err != nil {
			t.Fatal(err)
		}
		if _, err := mine.Receive(ctx(t)); err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(ctx(t), 5*time.Second)
		_, err = in.Receive(c)
		cancel()
		if err != nil {
			lost++
			t.Logf("round %d: Send and WaitMembers returned nil, the member received nothing in 5 s: %v", i, err)
		}
		out.Close()
		mine.Close()
		in.Close()
	}
	a, b := sa.Stats(), sb.Stats()
	if lost > 0 {
		t.Fatalf("%d of %d messages lost; dropped counted: outbound %d, inbound %d, undelivered %d", lost, rounds,
			a.PropagateOutboundDropped, b.PropagateInboundDropped, b.PropagateUndelivered)
	}
}

// A signed propagate message replayed after the application re-bound the
// pipe is refused: the replay windows outlive the topic's joining (they
// were new after a re-bind, and the message was delivered again).
func TestPropagateReplayAfterRebindRefused(t *testing.T) {
	sc := newReplayScene(t)
	sc.in.Close() // the application re-binds the pipe
	in, err := sc.sr.NewInputPipe(sc.ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	time.Sleep(500 * time.Millisecond)
	before := sc.sr.Stats().PropagateReplays
	sc.replay(t)
	short, cancel := context.WithTimeout(ctx(t), 3*time.Second)
	defer cancel()
	if m, err := in.Receive(short); err == nil {
		t.Fatalf("replayed message delivered again after the pipe was re-bound: %q (replays counted: %d)", text(m, "order"), sc.sr.Stats().PropagateReplays-before)
	}
	t.Logf("replays refused: %d", sc.sr.Stats().PropagateReplays-before)
}

// TestPropagateAuthorsKeysNotKept: a member that receives propagate
// messages from authors it never connected to keeps none of their keys.
// Deriving each message's FromJXTA asked the peerstore for the author's
// key, and go-libp2p's in-memory keybook stores a key it extracts from
// an ID, for the node's life (only a disconnect lets it go): every new
// identity that published stayed in every member's peerstore, one more
// per author, without bound (a 44-minute swarm of 50 peers, beside
// `p2pmsg send` publishing from a fresh identity each time: 33 → 651
// peers in a survivor's peerstore, 105 of them with addresses).
func TestPropagateAuthorsKeysNotKept(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2) // the member and a hub
	member, hub := nodes[0], nodes[1]
	sm, sh := newPipes(t, member), newPipes(t, hub)
	ad := newAdv(t, adv.Propagate)
	in, err := sm.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	hin, err := sh.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer hin.Close()
	// The hub reaches the member (its mesh holds it) before any author
	// publishes through it.
	hout := publisher(t, sh, ad)
	defer hout.Close()
	if err := hout.Send(ctx(t), message.New(message.Text("", "n", "hub"))); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Receive(ctx(t)); err != nil {
		t.Fatal(err)
	}
	const authors = 4
	for i := range authors {
		a := testutil.NewNode(t)
		if err := a.Connect(ctx(t), hub.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		sa := newPipes(t, a)
		out := publisher(t, sa, ad) // the hub is its member
		if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
		r, err := in.ReceiveFrom(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if r.From != a.ID() || r.FromJXTA != a.JXTAPeerID() {
			t.Fatalf("message %d from %s (%s), want %s (%s)", i, r.From, r.FromJXTA, a.ID(), a.JXTAPeerID())
		}
		if c := member.Host().Network().Connectedness(a.ID()); c != network.NotConnected {
			t.Fatalf("the member is %v to author %d: the test wants it reached through the hub only", c, i)
		}
		for _, p := range member.Host().Peerstore().PeersWithKeys() {
			if p == a.ID() {
				t.Fatalf("author %d, never connected to the member, has its key kept in the member's peerstore (%d peers with keys)",
					i, len(member.Host().Peerstore().PeersWithKeys()))
			}
		}
		out.Close()
	}
}
