package endpoint

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Receive buffers. Every received message gets buffers of its own for its
// elements' data: a listener may keep a message as long as it likes. For
// large messages that allocation is most of what the endpoint costs beyond
// copying the bytes: the runtime zeroes the buffer, the copy into it misses
// the cache, and the garbage collector runs once every few messages. A
// listener that consumes a message and drops it can call
// Delivery.Release, and the service reuses the buffers.

// poolMin is the smallest element buffer the service recycles; smaller ones
// cost less to allocate than to keep track of.
const poolMin = 4 << 10

// bufPool recycles element buffers by capacity: class k holds buffers whose
// capacity is in [2^k, 2^(k+1)). sync.Pool lets the garbage collector
// reclaim what sits unused.
type bufPool struct {
	classes [31]sync.Pool // up to 1 GiB, the largest message
	// rounding is set once a buffer has been released: from then on new
	// buffers are allocated with their class's full capacity, so that
	// same-sized messages reuse them. Until then nothing is wasted on
	// rounding for listeners that never release.
	rounding atomic.Bool
}

// get returns a buffer of length n.
func (p *bufPool) get(n int) []byte {
	if n < poolMin {
		return make([]byte, n)
	}
	k := bits.Len(uint(n - 1)) // the smallest k with 2^k >= n
	if k < len(p.classes) {
		if v := p.classes[k].Get(); v != nil {
			return (*v.(*[]byte))[:n]
		}
		if p.rounding.Load() {
			return make([]byte, n, 1<<k)
		}
	}
	return make([]byte, n)
}

func (p *bufPool) put(b []byte) {
	c := cap(b)
	if c < poolMin {
		return
	}
	k := bits.Len(uint(c)) - 1 // 2^k <= c < 2^(k+1)
	if k >= len(p.classes) {
		return
	}
	p.rounding.Store(true)
	b = b[:0]
	p.classes[k].Put(&b)
}

// recvBufs are the pooled buffers of one delivered message.
type recvBufs struct {
	pool *bufPool
	bufs [][]byte
}

// Release hands the buffers holding the message's larger elements (4 KiB
// and up) back to the service, which reuses them for messages it receives
// later. For a listener that consumes a message and drops it, this saves
// allocating, zeroing and garbage-collecting a buffer per message, which
// from a few KiB up is most of what the endpoint costs beyond copying the
// bytes.
//
// Small messages are recycled whole: the Delivery, its Message and the
// Message's elements are reused for a later message, which spares the
// allocation and garbage collection that otherwise cost a third of the
// receiver's time at a few million messages per second.
//
// Release also ends a Hold: the message no longer counts against its
// sender's memory budget.
//
// Call it only when nothing will use d, the message or its elements' data
// again: not the listener, not a goroutine it passed them to, not a Send in
// progress (once Send returns it holds nothing of the message). Releasing
// is optional; a message never released is garbage collected as usual.
// Call it once: a second call while the listener runs does nothing, but
// one after it returned may release another message, the one now using
// the recycled Delivery. It is a no-op on a Delivery the service did not
// make.
func (d *Delivery) Release() {
	if d.held.Load() > 0 {
		d.Unhold()
	}
	if b := d.bufs; b != nil {
		d.bufs = nil
		for _, buf := range b.bufs {
			b.pool.put(buf)
		}
	}
	if d.blk != nil && !d.state.CompareAndSwap(delivering, released) && d.state.CompareAndSwap(delivered, released) {
		d.recycle() // the listener has returned: nobody else holds d
	}
}
