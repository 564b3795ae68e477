package pipe

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Received messages wait for Receive in a queue bounded twice: in
// messages (WithQueueLen) and in bytes (WithQueueBytes), both kept by one
// gate. A message from the endpoint also stays on its sender's endpoint
// memory budget (endpoint.Delivery.Hold) until it is received or its
// pipe is closed, so what one peer can make a node hold across all its
// pipes is that budget, whatever the queues' sizes. A JXTA peer's message
// is budgeted by JXTA's transport only until the listener returns: once
// queued, the queue's bounds are what hold it.

// gate bounds the messages and bytes in a queue. A message that does not
// fit waits, which stalls its sender, until Receive takes enough out; an
// empty queue admits any message, so one larger than the byte bound still
// gets through. Count and bytes share one word, so that admitting a
// message is one atomic operation.
type gate struct {
	maxCount int64
	maxBytes int64
	used     atomic.Int64 // count<<countShift | bytes
	// waiting is set while someone waits for room; freed is closed when
	// room is made while someone waits. Both change under mu.
	mu      sync.Mutex
	waiting atomic.Bool
	freed   chan struct{}
}

// countShift places the message count above the bytes in gate.used: a
// queue holds at most 64 GiB (WithQueueBytes) plus one message of at
// most 1 GiB (endpoint.WithMaxMessageSize), below 1 TiB, and at most
// 65,536 messages (WithQueueLen): together within 63 bits.
const countShift = 40

// tryAcquire admits a message of n bytes if it fits.
func (g *gate) tryAcquire(n int64) bool {
	for {
		u := g.used.Load()
		if u != 0 && (u>>countShift >= g.maxCount || u&(1<<countShift-1)+n > g.maxBytes) {
			return false
		}
		if g.used.CompareAndSwap(u, u+1<<countShift+n) {
			return true
		}
	}
}

// acquire admits a message of n bytes, waiting while it does not fit,
// until done closes (false) or ctx ends (its error).
func (g *gate) acquire(ctx context.Context, n int64, done <-chan struct{}) (bool, error) {
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

// release takes a message of n bytes out.
func (g *gate) release(n int64) {
	g.used.Add(-(1<<countShift + n))
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
// in its queue's gate and, until its queue is closed, on its sender's
// endpoint budget.
type queued struct {
	size int64
	held *endpoint.Delivery // holding the sender's endpoint budget, nil for messages not from the endpoint or once unheld
}

// sizeOf is what a message counts for in a queue: its size as the
// endpoint charged it, or for messages that did not come through the
// endpoint, every element's bytes (signature elements too) plus a fixed
// overhead each.
func sizeOf(m *message.Message, d *endpoint.Delivery) int64 {
	if d != nil {
		return d.Size()
	}
	n := int64(256)
	for _, e := range m.Elements() {
		n += elementSize(&e)
	}
	return n
}

func elementSize(e *message.Element) int64 {
	n := int64(len(e.Data)+len(e.Name)+len(e.Namespace)+len(e.MIME)) + 128
	if e.Signature != nil {
		n += elementSize(e.Signature)
	}
	return n
}

// inbox is the queue of an input pipe or Bidi: received messages wait
// there for Receive, bounded by gate.
//
// Senders append to in; Receive takes all of in at once into out and
// returns out's messages one by one, and close finds every queued
// message to take it off its sender's budget. A message from
// the endpoint wakes a waiting Receive once its reader has handed over
// everything it read (endpoint.Delivery.WakeLater), so a burst costs one
// wake-up. A message's room in the gate is given back as it is received:
// a reader waiting for room must get it as soon as the application takes
// a message, which may be all the application does before it waits for
// another pipe's message queued behind that reader.
type inbox struct {
	gate gate

	mu     sync.Mutex
	in     []*Received
	closed bool // close ran: queued messages no longer hold their senders' budgets

	// Receive's side, under rmu (taken before mu).
	rmu sync.Mutex
	out []*Received
	pos int

	// signal wakes one waiting Receive; waiters counts them. A put does
	// not wake by itself: its reader's deferred wake does.
	signal  chan struct{}
	waiters atomic.Int32
}

func newInbox(n int, bytes int64) *inbox {
	return &inbox{gate: gate{maxCount: int64(n), maxBytes: bytes}, signal: make(chan struct{}, 1)}
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
// waits in the queue. It fails when done closes or ctx ends before there
// is room; the caller then refuses d. With d, the waiting Receive is
// woken when d's reader is done with its burst; without, at once.
func (b *inbox) put(ctx context.Context, done <-chan struct{}, r *Received, d *endpoint.Delivery) (bool, error) {
	size := sizeOf(r.Message, d)
	if !b.gate.tryAcquire(size) {
		b.wakeNow(d) // Receive makes the room
		ok, err := b.gate.acquire(ctx, size, done)
		if !ok {
			return false, err
		}
	}
	return b.admitted(r, size, d), nil
}

// tryPut admits r if the gate has room now, without waiting: for
// propagate messages, which gossipsub does not hold back for a reader
// that waits (what waits in its buffer instead is held for nobody).
func (b *inbox) tryPut(r *Received) bool {
	size := sizeOf(r.Message, nil)
	if !b.gate.tryAcquire(size) {
		b.Wake()
		return false
	}
	return b.admitted(r, size, nil)
}

// keep queues r past the gate: for a message already acknowledged to
// its sender (a JXTA BiDi pipe's block) when the Bidi ended before there
// was room; it stays receivable. It happens once per Bidi.
func (b *inbox) keep(r *Received) {
	r.queued = queued{}
	b.mu.Lock()
	b.in = append(b.in, r)
	b.mu.Unlock()
	b.Wake()
}

// admitted queues r, for which the gate admitted size bytes.
func (b *inbox) admitted(r *Received, size int64, d *endpoint.Delivery) bool {
	r.queued = queued{size: size}
	if d != nil {
		d.Hold() // the listener's call, before it returns
	}
	b.mu.Lock()
	closed := b.closed
	if d != nil && !closed {
		r.queued.held = d
	}
	b.in = append(b.in, r)
	b.mu.Unlock()
	if d == nil {
		b.Wake()
		return true
	}
	if closed {
		d.Unhold() // receivable, but no longer held
	}
	// Never before the message is in the queue, or Receive could look,
	// find nothing and wait again.
	d.WakeLater(b)
	return true
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
	b.rmu.Lock()
	for {
		if r := b.next(); r != nil {
			more := b.pos < len(b.out)
			b.rmu.Unlock()
			if more {
				b.Wake() // pass a burst's one wake-up on to another Receive
			}
			return r, nil
		}
		b.waiters.Add(1)
		// Look again now that a put's wake will find us.
		if r := b.next(); r != nil {
			b.waiters.Add(-1)
			b.rmu.Unlock()
			return r, nil
		}
		b.rmu.Unlock()
		select {
		case <-b.signal:
			b.waiters.Add(-1)
		case <-done:
			b.waiters.Add(-1)
			b.rmu.Lock()
			r := b.next()
			b.rmu.Unlock()
			if r == nil {
				return nil, closed()
			}
			return r, nil
		case <-ctx.Done():
			b.waiters.Add(-1)
			return nil, ctx.Err()
		}
		b.rmu.Lock()
	}
}

// next returns the next queued message, nil if there is none, and
// releases what it held. Called under rmu.
func (b *inbox) next() *Received {
	if b.pos == len(b.out) {
		b.mu.Lock()
		b.in, b.out, b.pos = b.out[:0], b.in, 0
		b.mu.Unlock()
		if len(b.out) == 0 {
			return nil
		}
	}
	r := b.out[b.pos]
	b.out[b.pos] = nil
	b.pos++
	if d := r.queued.held; d != nil {
		d.Unhold()
	}
	b.gate.release(r.queued.size)
	r.queued = queued{}
	return r
}

// close ends the holds of the messages queued: they can still be
// received, but no longer stall their senders. A put that races with
// close unholds its message itself.
func (b *inbox) close() {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, q := range [][]*Received{b.out[b.pos:], b.in} {
		for _, r := range q {
			if d := r.queued.held; d != nil {
				r.queued.held = nil
				d.Unhold()
			}
		}
	}
}

// len reports how many messages are queued.
func (b *inbox) len() int {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.out) - b.pos + len(b.in)
}
