package endpoint

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Memory and time budgets.
//
// Every frame a peer sends is charged to that peer's budget and to the
// service's before its body is read: its length, plus frameOverhead, plus
// elementOverhead per element once decoded (the structures the decoded
// message needs beyond its bytes). The charge lasts until the listener
// returns, or, if the listener called Delivery.Hold, until it calls the
// release function Hold returned: a queue that keeps messages for later
// (a pipe's) keeps them on the peer's budget. A frame that does not fit
// waits, without reading its body, until charges are released; the
// stream's flow-control window then fills and the sender blocks, exactly
// as when a listener is slow. Nothing accepted is dropped.
//
// So what one peer makes the service hold is its budget (default twice the
// maximum message size, so a full-size message can be read while another is
// held), plus the bytes its connection's flow-control windows buffer (at
// most 32 MiB a connection under package node's resource limits), plus,
// transiently, the element structures of the messages being decoded.
//
// A frame that has started must keep arriving: one that advances by less
// than minProgress bytes in a frame timeout (WithFrameTimeout, default
// DefaultFrameTimeout) is reset and counted in Stats.FramesTimedOut. Time
// spent waiting for budget or in a listener does not count: those stalls
// are the receiver's.
//
// A frame holds its whole length from its first byte, at the peer's pace:
// a peer trickling just over minProgress into maximum-size frames would
// hold its budget, or with a few identities the service's, for days while
// every other frame waits. So while frames wait, the budget sheds frames
// that hold it cheaply: a frame whose body has been arriving for a frame
// timeout and, at its rate so far, would not end within another is reset
// and counted in Stats.FramesShed — any such frame while the service's
// budget is what others wait for, and its own peer's while that peer's
// frames wait for its budget. Holding a budget then costs a peer as much
// bandwidth as filling it twice per frame timeout; a frame that ends
// within two frame timeouts, or any frame while nothing waits, is never
// cut. (The same rule as package jxtatcp's.)
const (
	// DefaultFrameTimeout is WithFrameTimeout's default: long enough for a
	// link that drops for a few seconds and for the slowest emulated links
	// (a dial-up uplink carries a 16 KiB yamux frame in about 4 s), short
	// enough that a stalled frame does not hold its budget for minutes.
	DefaultFrameTimeout = 20 * time.Second
	// minProgress is the least a frame must advance per frame timeout,
	// so a peer trickling a byte now and then counts as stalled. On TCP
	// the stream shows progress only as whole yamux frames arrive: over
	// TLS a sending endpoint writes frames of at most 16 KiB
	// (node.WriteChunk), so an honest sender needs its link to carry
	// about 16 KiB per frame timeout (820 B/s at 20 s), not 1 KiB, to
	// keep its frame; over Noise, and from a sender that writes larger
	// frames (p2pmsg's endpoint did before), up to go-yamux's 64 KiB
	// (3.3 KB/s). A link slower than that needs a longer
	// WithFrameTimeout.
	minProgress = 1 << 10
	// frameOverhead is charged per frame on top of its length: the
	// Delivery, the message and their bookkeeping, so that empty frames
	// are not free.
	frameOverhead = 256
	// elementOverhead is charged per decoded element: the Element
	// structure (three strings, a slice, a pointer: 80 bytes on 64-bit
	// platforms) and its slot in the message, rounded up to the
	// allocator's size class.
	elementOverhead = 128
)

// WithMemoryBudget bounds the bytes the service holds for one peer and for
// all peers together: frames being read, decoded messages being delivered,
// and messages listeners keep with Delivery.Hold. When a budget is full the
// service stops reading from the peers that need more until bytes are
// released, which stalls those senders (backpressure); nothing is dropped.
// perPeer must hold a message of the maximum size (WithMaxMessageSize) with
// its overhead, and total at least perPeer; at most 64 GiB. Default:
// perPeer twice the maximum message size plus 1 MiB (129 MiB), total 1 GiB.
func WithMemoryBudget(perPeer, total int64) Option {
	return func(o *options) error {
		if perPeer < 1 || total < perPeer || total > 64<<30 {
			return fmt.Errorf("%w: memory budget %d per peer, %d in all: want 0 < per peer ≤ total ≤ 64 GiB",
				ErrBadOption, perPeer, total)
		}
		o.peerBudget, o.allBudget = perPeer, total
		return nil
	}
}

// WithFrameTimeout sets how long a frame that has started arriving may go
// without advancing by 1 KiB before its stream is reset (default
// DefaultFrameTimeout, 100 ms to 1 hour). On TCP the stream advances by
// whole yamux frames, which a sending endpoint keeps to 16 KiB over TLS
// (the default security) and to 64 KiB over Noise: at the default, a
// sender's link below about 820 B/s (6.5 kbit/s) has its messages over
// 16 KiB reset over TLS, and one below 3.3 KB/s (26 kbit/s) its messages
// over 64 KiB over Noise; raise it for such links.
func WithFrameTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond || d > time.Hour {
			return fmt.Errorf("%w: frame timeout %v out of range [100ms, 1h]", ErrBadOption, d)
		}
		o.frameTimeout = d
		return nil
	}
}

// defaultTotalBudget is the service-wide default: eight peers' default
// budgets, so that a handful of peers sending at full size at once never
// wait for each other, while a node's message memory stays bounded.
const defaultTotalBudget = 1 << 30

// budgetSlack is added to the default per-peer budget so that two
// maximum-size messages fit with their overheads (frameOverhead each, and
// elementOverhead for up to 4096 elements, which is more than a real
// message of that size has).
const budgetSlack = 1 << 20

// resolveBudget fills in and checks the budget defaults.
func (o *options) resolveBudget() error {
	least := o.maxMessage + frameOverhead
	if o.peerBudget == 0 {
		o.peerBudget = 2*o.maxMessage + budgetSlack
		o.allBudget = max(defaultTotalBudget, o.peerBudget)
	}
	if o.peerBudget < least {
		return fmt.Errorf("%w: memory budget %d per peer cannot hold a message of the maximum size %d",
			ErrBadOption, o.peerBudget, o.maxMessage)
	}
	if o.frameTimeout == 0 {
		o.frameTimeout = DefaultFrameTimeout
	}
	return nil
}

// budget is the service-wide side of the charges.
type budget struct {
	held    atomic.Int64 // bytes charged, all peers
	waiters atomic.Int32 // readers waiting for bytes to be released
	// totalWaiting counts those the service-wide budget held up first.
	totalWaiting atomic.Int32
	mu           sync.Mutex
	freed        chan struct{} // closed and replaced when bytes are released while someone waits
}

// tryCharge charges n bytes to pi and the service if both budgets allow.
func (s *Service) tryCharge(pi *peerIn, n int64) bool {
	if pi.held.Add(n) > s.opts.peerBudget {
		pi.held.Add(-n)
		return false
	}
	if s.budget.held.Add(n) > s.opts.allBudget {
		s.budget.held.Add(-n)
		pi.held.Add(-n)
		return false
	}
	return true
}

// charge charges n bytes to pi and the service, waiting while a budget is
// full. It fails only when the service closes.
func (s *Service) charge(pi *peerIn, n int64) error {
	if s.tryCharge(pi, n) {
		return nil
	}
	s.stats.budgetWaits.Add(1)
	b := &s.budget
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	// Which budget it waits for, for the watchdog's shedding: the one that
	// refused it first.
	if pi.held.Load()+n > s.opts.peerBudget {
		pi.waiting.Add(1)
		defer pi.waiting.Add(-1)
	} else {
		b.totalWaiting.Add(1)
		defer b.totalWaiting.Add(-1)
	}
	for {
		// Take the channel before trying, so a release between the try
		// and the wait still wakes us.
		b.mu.Lock()
		freed := b.freed
		b.mu.Unlock()
		if s.tryCharge(pi, n) {
			return nil
		}
		select {
		case <-freed:
		case <-s.ctx.Done():
			return ErrClosed
		}
	}
}

// forceCharge charges n bytes without waiting: for the element structures
// of a message already decoded, which exist whether or not they fit.
func (s *Service) forceCharge(pi *peerIn, n int64) {
	pi.held.Add(n)
	s.budget.held.Add(n)
}

// discharge releases n bytes charged to pi.
func (s *Service) discharge(pi *peerIn, n int64) {
	left := pi.held.Add(-n)
	s.budget.held.Add(-n)
	if b := &s.budget; b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
	if left == 0 && pi.streams.Load() == 0 {
		s.forget(pi)
	}
}

// Hold keeps the message's bytes charged to its sender's memory budget
// after the listener returns, until Unhold is called; the listener calls
// it when it keeps the message for later (a queue) rather than consuming
// it. Without Hold, the charge ends when the listener returns. Unhold or
// Release ends a held charge; forgetting both keeps the bytes charged,
// which eventually stalls the peer. Call Hold only from the listener,
// before it returns; later calls do nothing. A JXTA peer's message
// (TransportJXTA) stays charged to the JXTA transport's memory budget
// and its host's share (jxtatcp.Incoming.Hold).
func (d *Delivery) Hold() {
	if d.jxta != nil {
		d.unholdJXTA = d.jxta.Hold()
		d.held.Store(d.size)
		return
	}
	if d.charged > 0 {
		d.held.Store(d.charged)
		d.charged = 0
	}
}

// Unhold ends the charge Hold kept. It may be called from any goroutine,
// and more than once: only the first call counts.
func (d *Delivery) Unhold() {
	if n := d.held.Swap(0); n > 0 {
		if d.unholdJXTA != nil {
			d.unholdJXTA()
			return
		}
		d.svc.discharge(d.peer, n)
	}
}

// Size returns the bytes the message is charged for against its sender's
// memory budget: its encoded length plus the service's estimate of the
// structures decoding it made. A JXTA peer's message (TransportJXTA) is
// reckoned the same way, though JXTA's transport charges its budget the
// frame's length.
func (d *Delivery) Size() int64 { return d.size }

// watchFrames resets streams whose current frame stopped advancing. It
// runs for the service's lifetime, looking four times per frame timeout,
// so a stalled frame is reset between one and one and a quarter timeouts
// after it stopped.
func (s *Service) watchFrames() {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.frameTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			total := s.budget.totalWaiting.Load() > 0
			s.inMu.Lock()
			for in := range s.streams {
				in.checkProgress(now, s.opts.frameTimeout, total || in.peer.waiting.Load() > 0)
			}
			s.inMu.Unlock()
		}
	}
}

// Frame progress, kept by the reader with atomics (no clock in the hot
// path) and judged by watchFrames.
type progress struct {
	read    atomic.Int64  // bytes read from the stream
	frames  atomic.Uint64 // frames started
	reading atomic.Bool   // in a frame, waiting for the peer's bytes
	body    atomic.Int64  // the length of the frame whose body is being read, charged; 0 when none
	// The watchdog's marks, under Service.inMu.
	markFrame uint64
	markRead  int64
	markTime  time.Time
	bodyFrame uint64    // the frame whose body it saw being read first at bodySeen,
	bodySeen  time.Time // when bodyRead bytes had been read from the stream
	bodyRead  int64
	timedOut  atomic.Bool
}

// checkProgress resets in's stream when its frame advanced by less than
// minProgress bytes over timeout, or, when shed, when its frame's body
// holds the budget too cheaply (see the package's budget rules).
func (in *inStream) checkProgress(now time.Time, timeout time.Duration, shed bool) {
	p := &in.prog
	read, frame, body := p.read.Load(), p.frames.Load(), p.body.Load()
	switch {
	case body == 0:
		p.bodySeen = time.Time{}
	case frame != p.bodyFrame || p.bodySeen.IsZero():
		p.bodyFrame, p.bodySeen, p.bodyRead = frame, now, read
	case shed && now.Sub(p.bodySeen) >= timeout:
		got, age := float64(read-p.bodyRead), now.Sub(p.bodySeen).Seconds()
		if got <= 0 || (float64(body)-got)*age/got > timeout.Seconds() {
			if !p.timedOut.Swap(true) {
				in.svc.stats.shed.Add(1)
				in.st.Reset()
			}
			return
		}
	}
	if !p.reading.Load() || frame != p.markFrame || read-p.markRead >= minProgress || p.markTime.IsZero() {
		p.markFrame, p.markRead, p.markTime = frame, read, now
		return
	}
	if now.Sub(p.markTime) >= timeout && !p.timedOut.Swap(true) {
		in.svc.stats.timedOut.Add(1)
		in.st.Reset()
	}
}

// countingReader counts the bytes read from the stream for the watchdog.
type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
