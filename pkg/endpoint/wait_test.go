package endpoint_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
)

// waitRig is a peer whose sender's writer the test holds, so that Sends
// to it queue and then wait for room, and the batches taken once it is
// let go, with how many waiting Sends each woke.
type waitRig struct {
	a     *endpoint.Service
	to    endpoint.Address
	c     *orderChecker
	flush func() error

	mu    sync.Mutex
	takes []int // Sends woken by each batch taken while any waited
}

func newWaitRig(t *testing.T) (*waitRig, func()) {
	nodes := testutil.NewConnectedNodes(t, 2)
	r := &waitRig{a: newService(t, nodes[0]), c: &orderChecker{next: map[uint64]uint64{}}}
	b := newService(t, nodes[1])
	if err := b.Register("wait", "", r.c); err != nil {
		t.Fatal(err)
	}
	r.to = endpoint.PeerAddress(nodes[1].ID(), "wait", "")
	r.flush = func() error { return r.a.Flush(ctx(t), nodes[1].ID()) }
	if err := r.a.Send(ctx(t), r.to, seqMessage(99, 0, 100)); err != nil { // opens the stream
		t.Fatal(err)
	}
	// Not Flush: it ends the stream, and the next Send would wait for the
	// writer to open one, not for room.
	testutil.WaitFor(t, "the first message delivered", func() bool { return r.c.n.Load() == 1 })
	endpoint.SetTakeHook(func(n int) { r.mu.Lock(); r.takes = append(r.takes, n); r.mu.Unlock() })
	t.Cleanup(func() { endpoint.SetTakeHook(nil) })
	return r, endpoint.HoldWriter(r.a, nodes[1].ID())
}

func (r *waitRig) woken() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.takes)
}

// TestRoomHandedOutInTurn: eight goroutines send to one peer in loops
// and all wait for room while the stream's writer is busy. The first
// batch taken then wakes one of them, which fills the queue again, not
// all eight, of which seven would find it full and wait anew; everything
// still arrives, in each sender's order.
func TestRoomHandedOutInTurn(t *testing.T) {
	r, release := newWaitRig(t)
	const senders, each = 8, 2000 // 16,000 messages of 100 bytes: the 128 KiB queue fills
	wait := goSenders(senders, func(g int) {
		for seq := range each {
			if err := r.a.Send(ctx(t), r.to, seqMessage(g, seq, 100)); err != nil {
				t.Errorf("sender %d, message %d: %v", g, seq, err)
				return
			}
		}
	})
	testutil.WaitBlockedN(t, senders, "endpoint.(*sender).send", true)
	release()
	wait()
	if err := r.flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := r.c.n.Load(), int64(1+senders*each); got != want {
		t.Fatalf("%d messages delivered, want %d", got, want)
	}
	if err := r.c.err(); err != nil {
		t.Fatal(err)
	}
	takes := r.woken()
	if len(takes) == 0 || takes[0] != 1 {
		t.Fatalf("Sends woken by the batches taken: %v; want the first to wake 1 of the %d waiting", takes, senders)
	}
}

// fill has one goroutine send to the rig's peer until a Send of its
// waits for room, and returns once it does; that Send is its last (it
// ends with the Send's error, nil if it was sent, on done).
func (r *waitRig) fill(t *testing.T, ctx context.Context) (done chan error) {
	var stop atomic.Bool
	done = make(chan error, 1)
	go func() {
		for seq := 0; ; seq++ {
			err := r.a.Send(ctx, r.to, seqMessage(0, seq, 100))
			if err != nil || stop.Load() {
				done <- err
				return
			}
		}
	}()
	testutil.WaitBlocked(t, "endpoint.(*sender).send", true)
	stop.Store(true)
	return done
}

// TestBurstOfWaitingSendsLeavesTogether: Sends that come once (replies
// from many goroutines) and wait behind a full queue are all woken as
// soon as a batch is taken that they did not fill, so they leave in one
// batch, not one batch each.
func TestBurstOfWaitingSendsLeavesTogether(t *testing.T) {
	r, release := newWaitRig(t)
	filler := r.fill(t, ctx(t))
	const burst = 8
	errs := make(chan error, burst)
	for g := range burst {
		go func() { errs <- r.a.Send(ctx(t), r.to, seqMessage(1+g, 0, 100)) }()
	}
	testutil.WaitBlockedN(t, 1+burst, "endpoint.(*sender).send", true)
	release()
	if err := <-filler; err != nil {
		t.Fatal(err)
	}
	for range burst {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := r.flush(); err != nil {
		t.Fatal(err)
	}
	if err := r.c.err(); err != nil {
		t.Fatal(err)
	}
	if got, want := r.woken(), []int{1, burst}; !slices.Equal(got, want) {
		t.Fatalf("Sends woken by the batches taken: %v, want %v (the one that filled the queue, then the burst together)", got, want)
	}
}

// TestWaitEndedPassesNoTurn: a Send whose ctx ends while it waits for
// room leaves the line, so the batch taken next wakes the Send behind it,
// which would otherwise wait with room in the queue and no batch coming
// to wake it.
func TestWaitEndedPassesNoTurn(t *testing.T) {
	r, release := newWaitRig(t)
	fctx, cancel := context.WithCancel(ctx(t))
	filler := r.fill(t, fctx)
	after := make(chan error, 1)
	go func() { after <- r.a.Send(ctx(t), r.to, seqMessage(1, 0, 100)) }()
	testutil.WaitBlockedN(t, 2, "endpoint.(*sender).send", true)
	cancel()
	if err := <-filler; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first waiting Send, its ctx ended: %v, want context.Canceled", err)
	}
	release()
	select {
	case err := <-after:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the Send behind it still waits for room (batches taken woke %v)", r.woken())
	}
	if err := r.flush(); err != nil {
		t.Fatal(err)
	}
}
