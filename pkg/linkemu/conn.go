package linkemu

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
)

// Option configures a wrapped connection.
type Option func(*config)

type config struct {
	seed uint64
	sw   *Switch
}

// WithSeed seeds the jitter generator (default 1), so that runs repeat.
func WithSeed(seed uint64) Option { return func(c *config) { c.seed = seed } }

// WithSwitch makes the connection take its link from sw, packet by
// packet, instead of the link it was made with (which still sets the
// queue limits): the link can then change while the connection runs.
func WithSwitch(sw *Switch) Option { return func(c *config) { c.sw = sw } }

// Switch holds a link that can change while connections made with
// WithSwitch run, as when a laptop moves from its office LAN to a DSL
// line: every packet queued after Set crosses the new link (packets
// already queued keep their schedule, and none overtakes another). It is
// safe for concurrent use.
type Switch struct {
	mu   sync.RWMutex
	link Link
}

// NewSwitch returns a switch holding l.
func NewSwitch(l Link) (*Switch, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Switch{link: l}, nil
}

// Set changes the link.
func (s *Switch) Set(l Link) error {
	if err := l.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.link = l
	s.mu.Unlock()
	return nil
}

// Link returns the current link.
func (s *Switch) Link() Link {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.link
}

// Conn wraps c: what is written crosses l.Up, what is read crosses l.Down.
// Deadlines, Close and addresses behave as on a net.Conn. Close delivers
// what was already written (as TCP does) for at most the time the link
// needs for it plus two seconds, then closes c.
func Conn(c net.Conn, l Link, opts ...Option) (net.Conn, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	cfg := config{seed: 1}
	for _, o := range opts {
		o(&cfg)
	}
	sc := &shapedConn{under: c, abort: make(chan struct{}), egressPumped: make(chan struct{})}
	sc.wApp, sc.wPump = net.Pipe()
	sc.rFeed, sc.rApp = net.Pipe()
	sc.egress = newDirection(l.Up, cfg.seed)
	sc.ingress = newDirection(l.Down, cfg.seed^0x9e3779b97f4a7c15)
	rtt := l.RTT()
	sc.egress.rttOf = func() time.Duration { return rtt }
	sc.ingress.rttOf = sc.egress.rttOf
	if cfg.sw != nil {
		sc.egress.shapeOf = func() Shape { return cfg.sw.Link().Up }
		sc.ingress.shapeOf = func() Shape { return cfg.sw.Link().Down }
		sc.egress.rttOf = func() time.Duration { return cfg.sw.Link().RTT() }
		sc.ingress.rttOf = sc.egress.rttOf
	}
	sc.wg.Add(4)
	go func() { sc.pump(sc.wPump, sc.egress); close(sc.egressPumped) }() // app writes -> egress queue
	go sc.deliver(sc.egress, c, sc.egressDone())                         // egress queue -> c
	go sc.pump(c, sc.ingress)                                            // c -> ingress queue
	go sc.deliver(sc.ingress, sc.rFeed, sc.ingressDone())                // ingress queue -> app reads
	return sc, nil
}

type shapedConn struct {
	under         net.Conn
	wApp, wPump   net.Conn // the app writes wApp; pump reads wPump
	rFeed, rApp   net.Conn // deliver writes rFeed; the app reads rApp
	egress        *direction
	ingress       *direction
	abort         chan struct{}
	abortOnce     sync.Once
	closeOnce     sync.Once
	egressFlushed chan struct{}
	egressPumped  chan struct{} // the pump has queued all the app wrote
	wg            sync.WaitGroup
}

var _ net.Conn = (*shapedConn)(nil)

func (c *shapedConn) egressDone() func() {
	c.egressFlushed = make(chan struct{})
	return func() { close(c.egressFlushed) }
}

func (c *shapedConn) ingressDone() func() {
	return func() { c.rFeed.Close() } // the app reads EOF (or the error) after the last byte
}

func (c *shapedConn) Read(p []byte) (int, error)  { return c.rApp.Read(p) }
func (c *shapedConn) Write(p []byte) (int, error) { return c.wApp.Write(p) }
func (c *shapedConn) LocalAddr() net.Addr         { return c.under.LocalAddr() }
func (c *shapedConn) RemoteAddr() net.Addr        { return c.under.RemoteAddr() }

func (c *shapedConn) SetDeadline(t time.Time) error {
	return joinerr.Join(c.rApp.SetReadDeadline(t), c.wApp.SetWriteDeadline(t))
}
func (c *shapedConn) SetReadDeadline(t time.Time) error  { return c.rApp.SetReadDeadline(t) }
func (c *shapedConn) SetWriteDeadline(t time.Time) error { return c.wApp.SetWriteDeadline(t) }

// Close stops writes, lets the egress queue drain for a bounded time,
// closes the underlying connection and waits for every goroutine.
func (c *shapedConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.wApp.Close() // pump sees EOF and closes the egress queue
		c.rApp.Close() // further deliveries to the app are dropped
		// A Write returns once the pump has read its bytes, a moment
		// before it queues them: wait for that too. Everything written
		// is then queued bytes plus at most one packet in hand.
		t := time.NewTimer(c.egress.drainTime() + c.egress.cur().TransferTime(c.egress.packetSize()) + 2*time.Second)
		select {
		case <-c.egressPumped:
			select {
			case <-c.egressFlushed:
			case <-t.C:
			}
		case <-t.C:
		}
		t.Stop()
		c.abortOnce.Do(func() { close(c.abort) })
		err = c.under.Close()
		c.egress.close(nil)
		c.ingress.close(nil)
		c.wg.Wait()
	})
	return err
}

// pump reads src in packets and queues them on d until src ends.
func (c *shapedConn) pump(src io.Reader, d *direction) {
	defer c.wg.Done()
	buf := make([]byte, d.packetSize())
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if perr := d.push(buf[:n:n], c.abort); perr != nil {
				d.close(perr)
				if src == c.wPump {
					c.wPump.Close() // the app's next Write fails
				}
				return
			}
			buf = make([]byte, d.packetSize())
		}
		if err != nil {
			if err == io.EOF || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) {
				err = nil
			}
			d.close(err)
			return
		}
	}
}

// deliver writes each packet to dst at its arrival time.
func (c *shapedConn) deliver(d *direction, dst io.Writer, done func()) {
	defer c.wg.Done()
	defer done()
	for {
		p, ok := d.next(c.abort)
		if !ok {
			return
		}
		if _, err := dst.Write(p.data); err != nil {
			d.close(err)
			d.discard()
			if dst == c.under {
				c.wPump.Close()
			}
			return
		}
		d.delivered(len(p.data))
	}
}

type packet struct {
	data []byte
	at   time.Time
	// lost is 1 + the index of the packet's first lost segment (0: none
	// lost); retries how many of its retransmissions are lost again;
	// sent when it left the link, rtt and latency the path's then.
	lost, retries int
	sent          time.Time
	rtt, latency  time.Duration
}

// segments is how many segments of MSS bytes n bytes make.
func segments(n int) int { return (n + MSS - 1) / MSS }

// direction is one side's bottleneck: its queue and schedule.
type direction struct {
	shape   Shape
	shapeOf func() Shape         // the current shape, when a Switch sets it
	rttOf   func() time.Duration // the link's round trip (both latencies)
	limit   int

	mu          sync.Mutex
	cond        *sync.Cond
	rng         *rand.Rand
	queue       []packet
	pending     int // bytes queued or being delivered
	linkFree    time.Time
	lastArrival time.Time
	// lastRepair is the latest a lost packet queued can arrive repaired
	// (repaired's timeout path, every retransmission lost): Close waits
	// for it too.
	lastRepair time.Time
	closed     bool
	err        error
}

func newDirection(s Shape, seed uint64) *direction {
	d := &direction{shape: s, limit: s.queueLimit(), rng: rand.New(rand.NewPCG(seed, 0x6c696e6b))}
	d.cond = sync.NewCond(&d.mu)
	return d
}

// cur is the shape packets queued now cross.
func (d *direction) cur() Shape {
	if d.shapeOf != nil {
		return d.shapeOf()
	}
	return d.shape
}

// packetSize is about a millisecond of the link, between an Ethernet
// frame and 64 KiB.
func (d *direction) packetSize() int {
	s := d.cur()
	if s.Bandwidth <= 0 {
		return 64 << 10
	}
	return min(max(int(s.Bandwidth/1000), 1460), 64<<10)
}

func (d *direction) push(data []byte, abort <-chan struct{}) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.pending > 0 && d.pending+len(data) > d.limit && !d.closed {
		d.cond.Wait()
	}
	if d.closed {
		if d.err != nil {
			return d.err
		}
		return net.ErrClosed
	}
	shape := d.cur()
	now := time.Now()
	start := now
	if d.linkFree.After(start) {
		start = d.linkFree
	}
	d.linkFree = start.Add(shape.SerializationTime(len(data)))
	p := packet{data: data}
	if shape.Loss > 0 {
		for i := range segments(len(data)) {
			if d.rng.Float64() < shape.Loss {
				p.lost = i + 1
				break
			}
		}
		if p.lost > 0 {
			for p.retries < maxRetries && d.rng.Float64() < shape.Loss {
				p.retries++
			}
			p.sent, p.latency = d.linkFree, shape.Latency
			if d.rttOf != nil {
				p.rtt = d.rttOf()
			}
			worst := p.sent.Add(RTO(p.rtt) + p.latency + shape.Jitter)
			for k := 1; k <= p.retries; k++ {
				worst = worst.Add(RTO(p.rtt) << k)
			}
			if worst.After(d.lastRepair) {
				d.lastRepair = worst
			}
			// The retransmissions cross the link too.
			d.linkFree = d.linkFree.Add(time.Duration(1+p.retries) * shape.SerializationTime(min(MSS, len(data))))
		}
	}
	at := p.sent
	if p.lost == 0 {
		at = d.linkFree
	}
	at = at.Add(shape.Latency)
	if shape.Jitter > 0 {
		at = at.Add(time.Duration(d.rng.Int64N(int64(shape.Jitter))))
	}
	if at.Before(d.lastArrival) {
		at = d.lastArrival // FIFO: no overtaking
	}
	d.lastArrival = at
	p.at = at
	d.queue = append(d.queue, p)
	d.pending += len(data)
	d.cond.Broadcast()
	return nil
}

// next waits for the head packet's arrival time and returns it; false once
// the direction is closed and empty, or on abort.
func (d *direction) next(abort <-chan struct{}) (packet, bool) {
	d.mu.Lock()
	for len(d.queue) == 0 && !d.closed {
		d.cond.Wait()
	}
	if len(d.queue) == 0 {
		d.mu.Unlock()
		return packet{}, false
	}
	p := d.queue[0]
	d.queue[0] = packet{}
	d.queue = d.queue[1:]
	d.mu.Unlock()
	if !sleepUntil(p.at, abort) {
		return packet{}, false
	}
	if p.lost > 0 && !sleepUntil(d.repaired(p), abort) {
		return packet{}, false
	}
	return p, true
}

// repaired is when p, which has a lost segment and would have arrived
// now (p.at), arrives repaired (package doc, Loss): by fast retransmit
// one RTT after the third segment that follows the lost one arrives,
// when three follow it in p and the packets queued behind it; else by
// timeout, RTO after p was sent and one latency for the retransmission.
// Each lost retransmission adds RTO again, doubled each time.
func (d *direction) repaired(p packet) time.Time {
	rto := RTO(p.rtt)
	var at time.Time
	if after := segments(len(p.data)) - p.lost; after >= dupAckCount {
		at = p.at.Add(p.rtt)
	} else {
		d.mu.Lock()
		for _, q := range d.queue {
			if after += segments(len(q.data)); after >= dupAckCount {
				at = q.at.Add(p.rtt)
				break
			}
		}
		d.mu.Unlock()
	}
	if timeout := p.sent.Add(rto + p.latency); at.IsZero() || at.After(timeout) {
		at = timeout
	}
	for k := 1; k <= p.retries; k++ {
		at = at.Add(rto << k)
	}
	return at
}

// Go's timers fire up to about a millisecond late when the process is
// otherwise idle (the runtime's poller sleeps in whole milliseconds),
// which would add that much to every packet of a fast link: a LAN's
// 0.1 ms one-way latency became 1.1 ms. So the last stretch of a wait is
// slept precisely (nanosleep on Linux, then a short spin).
const (
	timerSlack = 2 * time.Millisecond   // what a timer may overshoot, with margin
	spinFinal  = 150 * time.Microsecond // what a precise sleep may overshoot
	maxSpin    = 4096                   // yields, well beyond spinFinal
)

// sleepUntil waits until at, or returns false when abort closes first
// (checked at least every timerSlack).
func sleepUntil(at time.Time, abort <-chan struct{}) bool {
	if wait := time.Until(at) - timerSlack; wait > 0 && !timerWait(wait, abort) {
		return false
	}
	if wait := time.Until(at) - spinFinal; wait > 0 {
		preciseSleep(wait)
	}
	// The spin is bounded: under testing/synctest the clock stands still
	// while goroutines run, and only a timer moves it on.
	for i := 0; time.Now().Before(at); i++ {
		if i == maxSpin {
			if !timerWait(time.Until(at), abort) {
				return false
			}
			break
		}
		runtime.Gosched()
	}
	select {
	case <-abort:
		return false
	default:
		return true
	}
}

// timerWait waits d on a runtime timer, or returns false when abort
// closes first.
func timerWait(d time.Duration, abort <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-abort:
		return false
	}
}

func (d *direction) delivered(n int) {
	d.mu.Lock()
	d.pending -= n
	d.cond.Broadcast()
	d.mu.Unlock()
}

func (d *direction) discard() {
	d.mu.Lock()
	d.queue, d.pending = nil, 0
	d.cond.Broadcast()
	d.mu.Unlock()
}

func (d *direction) close(err error) {
	d.mu.Lock()
	if !d.closed {
		d.closed, d.err = true, err
	}
	d.cond.Broadcast()
	d.mu.Unlock()
}

// drainTime estimates how long the queued bytes need to be delivered.
func (d *direction) drainTime() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	last := d.lastArrival
	if d.lastRepair.After(last) {
		last = d.lastRepair
	}
	return max(0, time.Until(last)) + d.cur().SerializationTime(d.pending)
}
