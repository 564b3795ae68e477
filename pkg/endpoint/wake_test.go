package endpoint_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
)

// wakeRecorder notes how many messages its listener had delivered when
// it was last woken.
type wakeRecorder struct {
	delivered, seen, wakes atomic.Int64
}

func (w *wakeRecorder) Wake() {
	w.seen.Store(w.delivered.Load())
	w.wakes.Add(1)
}

// TestWakeLaterFollowsEveryMessage: whatever bursts the messages come
// in, every delivered message is followed by a wake, and the reader
// defers them (fewer wakes than messages is what WakeLater is for, but
// only more than one message per read makes that so: not asserted).
func TestWakeLaterFollowsEveryMessage(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	w := &wakeRecorder{}
	if err := b.Register("wake", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		w.delivered.Add(1)
		d.WakeLater(w)
		d.WakeLater(w) // the same waker twice in a row is woken once
		d.Release()
	})); err != nil {
		t.Fatal(err)
	}
	to := endpoint.PeerAddress(nodes[1].ID(), "wake", "")
	const n = 5000
	for round := range 3 {
		for i := range n {
			if err := a.Send(ctx(t), to, seqMessage(0, i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
			t.Fatal(err)
		}
		want := int64((round + 1) * n)
		deadline := time.Now().Add(30 * time.Second)
		for w.seen.Load() != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := w.seen.Load(); got != want {
			t.Fatalf("round %d: last wake saw %d of %d messages", round, got, want)
		}
	}
	t.Logf("%d wakes for %d messages", w.wakes.Load(), 3*n)
}

// TestWakeOutsideAStream: a delivery not from a stream wakes at once.
func TestWakeOutsideAStream(t *testing.T) {
	w := &wakeRecorder{}
	var d endpoint.Delivery
	d.WakeLater(w)
	d.WakeNow()
	if w.wakes.Load() != 1 {
		t.Fatalf("%d wakes, want 1", w.wakes.Load())
	}
}
