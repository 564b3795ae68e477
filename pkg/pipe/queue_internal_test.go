package pipe

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestOneWakePerBurstReachesEveryReceive: k Receives wait; a burst of k
// messages comes with one wake-up (as a stream's reader gives it); each
// Receive takes one message and goes, so the wake must be passed on.
func TestOneWakePerBurstReachesEveryReceive(t *testing.T) {
	const k = 4
	b := newInbox(16, 1<<20)
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan *Received, k)
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			r, err := b.get(ctx, done, func() error { return ErrClosed })
			if err != nil {
				t.Error(err)
				return
			}
			got <- r
		})
	}
	for b.waiters.Load() != k {
		time.Sleep(time.Millisecond)
	}
	for range k {
		b.mu.Lock() // as put does, its wake deferred
		b.in = append(b.in, &Received{})
		b.mu.Unlock()
	}
	b.Wake()
	wg.Wait()
	if len(got) != k {
		t.Fatalf("%d of %d Receives got a message", len(got), k)
	}
}
