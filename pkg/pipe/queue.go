package pipe

import (
	"context"
	"sync"

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
	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed when bytes are taken out while someone waits
}

// acquire admits n bytes, waiting while they do not fit, until done
// closes (false) or ctx ends (its error).
func (g *byteGate) acquire(ctx context.Context, n int64, done <-chan struct{}) (bool, error) {
	for {
		g.mu.Lock()
		if g.used == 0 || g.used+n <= g.limit {
			g.used += n
			g.mu.Unlock()
			return true, nil
		}
		if g.freed == nil {
			g.freed = make(chan struct{})
		}
		freed := g.freed
		g.mu.Unlock()
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
	g.mu.Lock()
	g.used -= n
	if g.freed != nil {
		close(g.freed)
		g.freed = nil
	}
	g.mu.Unlock()
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
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.dequeued()
	return false, err
}
