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

// inbox is the queue of an input pipe or Bidi: received messages wait
// there for Receive, bounded in count by q's capacity and in bytes by
// gate. A message from the endpoint wakes a waiting Receive once its
// reader has handed over everything it read (endpoint.Delivery.WakeLater),
// so a burst of small messages costs one wake-up, not one each.
type inbox struct {
	q    chan *Received
	gate byteGate
	// signal wakes one waiting Receive; waiters counts them. Receive
	// waits on signal, not on q, so that a message put in q does not
	// wake it by itself.
	signal  chan struct{}
	waiters atomic.Int32
}

func newInbox(n int, bytes int64) *inbox {
	return &inbox{q: make(chan *Received, n), gate: byteGate{limit: bytes}, signal: make(chan struct{}, 1)}
}

// Wake wakes a waiting Receive, if any (endpoint.Waker).
func (b *inbox) Wake() {
	if b.waiters.Load() > 0 {
		select {
		case b.signal <- struct{}{}:
		default:
		}
	}
}

// put admits r within the gate, holding d's endpoint budget while it
// waits in the queue. It fails when done closes or ctx ends; the caller
// then refuses d. With d, the waiting Receive is woken when d's reader
// is done with its burst; without, at once.
func (b *inbox) put(ctx context.Context, done <-chan struct{}, r *Received, d *endpoint.Delivery) (bool, error) {
	size := sizeOf(r.Message, d)
	if !b.gate.tryAcquire(size) {
		b.wakeNow(d) // Receive frees the room
		ok, err := b.gate.acquire(ctx, size, done)
		if !ok {
			return false, err
		}
	}
	r.queued = queued{gate: &b.gate, size: size}
	if d != nil {
		// Before the message is visible to Receive, which releases it.
		d.Hold()
		r.queued.held = d
	}
	select {
	case b.q <- r:
		b.wakeLater(d)
		return true, nil
	default:
	}
	b.wakeNow(d)
	var err error
	select {
	case b.q <- r:
		b.wakeLater(d)
		return true, nil
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.dequeued()
	return false, err
}

// wakeLater wakes Receive for a message now in the queue: once d's
// reader is done with its burst, or at once. Never before the message is
// in the queue, or Receive could look, find nothing and wait again.
func (b *inbox) wakeLater(d *endpoint.Delivery) {
	if d != nil {
		d.WakeLater(b)
		return
	}
	b.Wake()
}

// wakeNow wakes Receive before put waits: at once, and through d's
// reader whatever else it deferred.
func (b *inbox) wakeNow(d *endpoint.Delivery) {
	if d != nil {
		d.WakeNow()
	}
	b.Wake()
}

// get returns the next message, waiting until one comes, done closes
// (then the messages still queued, then closed()) or ctx ends.
func (b *inbox) get(ctx context.Context, done <-chan struct{}, closed func() error) (*Received, error) {
	for {
		select {
		case r := <-b.q:
			return b.taken(r), nil
		default:
		}
		b.waiters.Add(1)
		// Look again now that a put's wake will find us.
		select {
		case r := <-b.q:
			b.waiters.Add(-1)
			return b.taken(r), nil
		default:
		}
		select {
		case <-b.signal:
			b.waiters.Add(-1)
		case <-done:
			b.waiters.Add(-1)
			select {
			case r := <-b.q:
				return b.taken(r), nil
			default:
				return nil, closed()
			}
		case <-ctx.Done():
			b.waiters.Add(-1)
			return nil, ctx.Err()
		}
	}
}

// taken releases what r held while queued and, if more messages wait and
// so do other Receives, passes the wake on: a wake-up for a burst wakes
// one Receive.
func (b *inbox) taken(r *Received) *Received {
	r.dequeued()
	if len(b.q) > 0 && b.waiters.Load() > 0 {
		b.Wake()
	}
	return r
}
