package pipe

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Received messages wait for Receive in a queue bounded twice: in
// messages by its channel's capacity (WithQueueLen) and in bytes by a
// byteGate (WithQueueBytes). A message from the endpoint also stays on
// its sender's endpoint memory budget (endpoint.Delivery.Hold) until it
// is received, so what one peer can make a node hold across all its pipes
// is that budget, whatever the queues' sizes.

// byteGate bounds the bytes of the messages in a queue. A message that
// does not fit waits, which stalls its sender, until Receive takes enough
// out; an empty queue admits any message, so one larger than the bound
// still gets through.
type byteGate struct {
	limit int64
	used  atomic.Int64
	// waiting is set while someone waits for room; freed is closed when
	// bytes are taken out while someone waits. Both change under mu.
	mu      sync.Mutex
	waiting atomic.Bool
	freed   chan struct{}
}

// tryAcquire admits n bytes if they fit.
func (g *byteGate) tryAcquire(n int64) bool {
	for {
		u := g.used.Load()
		if u != 0 && u+n > g.limit {
			return false
		}
		if g.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// acquire admits n bytes, waiting while they do not fit, until done
// closes (false) or ctx ends (its error).
func (g *byteGate) acquire(ctx context.Context, n int64, done <-chan struct{}) (bool, error) {
	for {
		if g.tryAcquire(n) {
			return true, nil
		}
		g.mu.Lock()
		if g.freed == nil {
			g.freed = make(chan struct{})
		}
		freed := g.freed
		g.waiting.Store(true)
		g.mu.Unlock()
		// Try again now that a release will wake us.
		if g.tryAcquire(n) {
			return true, nil
		}
		select {
		case <-freed:
		case <-done:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// release takes n bytes out.
func (g *byteGate) release(n int64) {
	g.used.Add(-n)
	if g.waiting.Load() {
		g.mu.Lock()
		if g.freed != nil {
			close(g.freed)
			g.freed = nil
		}
		g.waiting.Store(false)
		g.mu.Unlock()
	}
}

// queued is what a queued Received holds until it is received: its bytes
// in the queue's gate and on its sender's endpoint budget.
type queued struct {
	gate *byteGate
	size int64
	held *endpoint.Delivery // holding the sender's endpoint budget, nil for messages not from the endpoint
}

// dequeued releases what r held while queued.
func (r *Received) dequeued() {
	q := r.queued
	if q.gate == nil {
		return
	}
	r.queued = queued{}
	q.gate.release(q.size)
	if q.held != nil {
		q.held.Unhold()
	}
}

// sizeOf is what a message counts for in a queue: its size as the
// endpoint charged it, or for messages that did not come through the
// endpoint, its data plus a fixed overhead.
func sizeOf(m *message.Message, d *endpoint.Delivery) int64 {
	if d != nil {
		return d.Size()
	}
	n := int64(256)
	for _, e := range m.Elements() {
		n += int64(len(e.Data)) + 128
	}
	return n
}

// enqueue admits r to q within g, holding d's endpoint budget while it
// waits there. It fails when done closes or ctx ends; the caller then
// refuses d.
func enqueue(ctx context.Context, q chan *Received, g *byteGate, done <-chan struct{}, r *Received, d *endpoint.Delivery) (bool, error) {
	size := sizeOf(r.Message, d)
	ok, err := g.acquire(ctx, size, done)
	if !ok {
		return false, err
	}
	r.queued = queued{gate: g, size: size}
	if d != nil {
		// Before the message is visible to Receive, which releases it.
		d.Hold()
		r.queued.held = d
	}
	select {
	case q <- r:
		return true, nil
	default:
	}
	select {
	case q <- r:
		return true, nil
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.dequeued()
	return false, err
}
