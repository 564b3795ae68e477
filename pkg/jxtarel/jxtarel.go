// Package jxtarel is JXTA's reliable layer, as JXSE 2.7 runs it under
// JxtaSocket (stream mode) and reliable JxtaBiDiPipe: numbered blocks and
// acknowledgements carried in ordinary pipe messages between two peers.
//
// It does no I/O of its own: a Conn sends through the function it is
// given and is handed every message that arrives for it (Handle). Package
// pipe builds JXTA's bidirectional pipes on it and package socket JXTA's
// sockets.
//
// # On the wire
//
// All elements are in namespace "jxtarel". A data block is an element
// named by its sequence number in decimal ("1", "2", …; per direction,
// starting at 1) of type BlockMIME whose data is the payload. An
// acknowledgement is an element "ack" of type AckMIME: a big-endian u32,
// the highest sequence number received in order, followed by zero or more
// u32 selective acknowledgements of blocks received above it. A
// retransmitted block carries an extra element "retry" = "RETRY", which
// receivers ignore.
//
// # Behaviour
//
// The receiver acknowledges a block when the application has taken it
// (Receive), as JXSE does, so a reader that stops reading stops the
// sender: nothing is acknowledged that the application has not got.
// Acknowledgements are coalesced (one covers everything taken while the
// previous one was being sent), and while a block is missing the receiver
// repeats its acknowledgement, with its selective acknowledgements, once
// a second. Blocks already taken or already queued are dropped and
// counted (Duplicates); one already taken has the acknowledgement sent
// again, at most every MinRTO/5, since the sender's repeating it means the
// acknowledgement was lost (JXSE sends none, and its sender can
// retransmit until it gives up). Blocks too far ahead, or beyond the
// receive buffer's bytes, are dropped and counted (the sender retransmits
// them).
// A peer ends its output (SetEOF) once every block it sent is
// acknowledged, so never with one missing: when it does, Receive fails at
// the gap with ErrIncomplete instead of returning the end, so that a
// reader does not take part of the stream for the whole.
//
// The sender keeps each block until it is acknowledged and has at most the
// window's blocks (and bytes) unacknowledged. A block a selective
// acknowledgement names is not sent again, but stays unacknowledged, in
// the window, until the cumulative acknowledgement covers it: the
// receiver holds it in its buffer until the blocks before it are taken,
// so a window within the receiver's buffer never overflows it. A block unacknowledged for
// its retransmission timeout — twice the smoothed round trip, at least
// MinRTO, doubled at each retransmission, at most MaxRTO — is sent again;
// a block that selective acknowledgements show missing is sent again at
// once, only once (then at its timeouts), no sooner than a round trip
// after it was last sent, and only when an acknowledgement brings news;
// acknowledgements of blocks never sent are counted
// (BadAcks) and ignored. When the oldest unacknowledged block
// has waited WithGiveUp (60 s, JXSE's figure), the connection fails with
// ErrTimeout.
//
// A Conn notices a peer that is gone: when the acknowledgements and
// retransmissions it sends fail three times over two seconds or more,
// with nothing from the peer meanwhile (the peer's connection closed and
// it cannot be reached again), the connection fails with ErrUnreachable.
// So that a reader waiting for a silent peer finds out too, a Receive that
// has heard nothing for WithIdleProbe (15 s) sends its acknowledgement
// again (JXSE ignores a repeated one), then once a second while that
// fails.
// JXSE has no such probe: its reader waits for a dead sender forever
// unless the application set a timeout. A peer that keeps its connection
// open and sends nothing is an idle peer, as with TCP: use a deadline.
package jxtarel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Wire names.
const (
	Namespace  = "jxtarel"
	BlockMIME  = "application/x-jxta-reliable-block"
	AckMIME    = "application/x-jxta-reliable-ack"
	ackElement = "ack"
	retryName  = "retry"
	retryValue = "RETRY"
)

// MaxBlock is the largest block JXSE's sockets send (its messenger's
// MTU); socket writers cut their bytes into blocks of at most this.
const MaxBlock = 64 << 10

// Retransmission timeouts. MinRTO is JXSE's floor; MaxRTO its ceiling.
const (
	MinRTO     = 500 * time.Millisecond
	MaxRTO     = 60 * time.Second
	initialRTO = time.Second // RFC 6298's initial timeout, before any round trip is measured
)

// reAck is how often a receiver missing a block repeats its
// acknowledgement (JXSE: about once a second).
const reAck = time.Second

// probeTries failed sends over two reAcks make a peer unreachable: one
// failed send may be a dial racing the peer's reconnection or the
// transport's connection limit; three over two seconds are not.
const probeTries = 3

// dupAckGap is the least time between acknowledgements repeated for
// duplicate blocks: a fraction of MinRTO, so a sender's retransmission
// timer is answered before it fires again.
const dupAckGap = MinRTO / 5

// maxSACKs bounds the selective acknowledgements read from one ACK and
// written in one; JXSE writes at most its queue's 100.
const maxSACKs = 1024

// Errors.
var (
	ErrClosed    = errors.New("jxtarel: connection closed")
	ErrTimeout   = errors.New("jxtarel: peer stopped acknowledging")
	ErrBadOption = errors.New("jxtarel: invalid option")
	ErrMalformed = errors.New("jxtarel: malformed element")
	// ErrUnacknowledged: blocks sent were not acknowledged (Drain); they
	// may not have arrived.
	ErrUnacknowledged = errors.New("jxtarel: blocks sent were not acknowledged")
	// ErrUnreachable: acknowledgements, probes or retransmissions could
	// not be sent for seconds; the peer is gone (WithIdleProbe).
	ErrUnreachable = errors.New("jxtarel: peer unreachable")
	// ErrIncomplete: the peer ended its output (SetEOF) while a block
	// it sent was missing, so what Receive returned is only part of it.
	ErrIncomplete = errors.New("jxtarel: peer ended with blocks missing")
)

// SendFunc sends one message to the other side. The Conn calls it from
// Send's goroutine (data blocks) and from its own (acknowledgements and
// retransmissions), possibly concurrently.
type SendFunc func(ctx context.Context, m *message.Message) error

type options struct {
	window    int
	windowB   int64
	recvBlk   int
	recvBytes int64
	maxBlock  int
	giveUp    time.Duration
	probe     time.Duration
}

// Option configures a Conn.
type Option func(*options) error

// WithWindow bounds the blocks sent and not yet acknowledged (default 20,
// JXSE's own limit for sockets; 1 to 1024) and their bytes (default 4 MiB;
// a block larger than that still goes out alone). A window of more bytes
// than the peer's receive buffer (DefaultReceiveBytes unless it chose
// otherwise) overruns it: what does not fit is dropped and sent again on
// timeouts, which back off, and a connection can crawl.
func WithWindow(blocks int, bytes int64) Option {
	return func(o *options) error {
		if blocks < 1 || blocks > 1024 || bytes < 1 {
			return fmt.Errorf("%w: window of %d blocks, %d bytes", ErrBadOption, blocks, bytes)
		}
		o.window, o.windowB = blocks, bytes
		return nil
	}
}

// DefaultReceiveBytes is WithReceiveBuffer's default bound on bytes.
const DefaultReceiveBytes = 8 << 20

// WithReceiveBuffer bounds the blocks received and not yet taken by
// Receive (default 100, JXSE's queue; 1 to 4096) and their bytes (default
// DefaultReceiveBytes). The next block in order is always accepted, whatever its size
// and however full the buffer is with blocks after it, so neither one
// large message nor one lost block can stall a connection; the buffer
// then holds at most one block beyond its bytes.
func WithReceiveBuffer(blocks int, bytes int64) Option {
	return func(o *options) error {
		if blocks < 1 || blocks > 4096 || bytes < 1 {
			return fmt.Errorf("%w: receive buffer of %d blocks, %d bytes", ErrBadOption, blocks, bytes)
		}
		o.recvBlk, o.recvBytes = blocks, bytes
		return nil
	}
}

// WithMaxBlock drops, and counts as Oversized, received blocks larger than
// n bytes (default: no limit beyond the transport's message size). JXSE's
// sockets send at most MaxBlock.
func WithMaxBlock(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: maximum block %d", ErrBadOption, n)
		}
		o.maxBlock = n
		return nil
	}
}

// WithGiveUp sets how long the oldest unacknowledged block may wait before
// the connection fails with ErrTimeout (default 60 s; at least 1 s).
func WithGiveUp(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second {
			return fmt.Errorf("%w: give-up time %v", ErrBadOption, d)
		}
		o.giveUp = d
		return nil
	}
}

// WithIdleProbe sets how long a Receive waits with nothing from the peer
// before the Conn probes whether the peer can still be reached (default
// 15 s, Go's TCP keep-alive period). 0 turns probing off, and with it
// the failure of a Conn whose sends keep failing (ErrUnreachable): only
// WithGiveUp then ends a connection. See the package doc.
func WithIdleProbe(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: idle probe %v", ErrBadOption, d)
		}
		o.probe = d
		return nil
	}
}

// Stats counts what a Conn did and refused.
type Stats struct {
	BlocksSent, BlocksReceived uint64
	Retransmitted              uint64
	AcksSent, AcksReceived     uint64
	Duplicates                 uint64 // blocks already taken or queued
	DroppedAhead               uint64 // beyond the receive window
	DroppedFull                uint64 // beyond the receive buffer's bytes
	Oversized                  uint64 // larger than WithMaxBlock
	BadAcks                    uint64 // acknowledging blocks never sent, or malformed
	Malformed                  uint64 // jxtarel elements that are neither block nor ack
	Probes                     uint64 // acknowledgements sent again to an idle peer (WithIdleProbe)
	AfterEOF                   uint64 // blocks not yet taken arriving after the peer's end (SetEOF), dropped
}

type outBlock struct {
	seq   int32
	data  []byte
	first time.Time // first sent
	last  time.Time // last sent: when the SendFunc last returned with it
	rto   time.Duration
	// sending: its first send is still in the SendFunc, which may wait
	// (for the transport's other writes, for room in a connection whose
	// peer reads slowly) far longer than a timeout: none runs until it
	// returns, or the block would be sent again behind itself.
	sending bool
	retries int
	fast    bool // selective acknowledgements show it missing
	// fastDone: it was sent again at once already. A peer that takes one
	// block per acknowledgement (news each time) while naming a block
	// above others as received would otherwise have all of those sent,
	// and signed, again at every acknowledgement.
	fastDone bool
	// sacked: a selective acknowledgement says the peer holds it. It is
	// not sent again, but it stays in the window until the cumulative
	// acknowledgement covers it: the peer keeps it in its receive buffer
	// until the blocks before it arrive, so freeing its room here would
	// let the window outgrow that buffer and the blocks past it be
	// dropped, to crawl back one retransmission timeout at a time.
	sacked bool
}

// Conn is one direction pair of a reliable connection. It is safe for
// concurrent use.
type Conn struct {
	send SendFunc
	o    options

	mu sync.Mutex
	// sender
	next     int32 // next sequence number to send
	unacked  []*outBlock
	inflight int64
	srtt     time.Duration
	rttvar   time.Duration
	hole     bool          // the last acknowledgement had selective ones
	room     chan struct{} // closed and replaced when the window opens
	// receiver
	taken    int32 // highest sequence number taken by Receive
	queued   map[int32][]byte
	qbytes   int64
	arrived  chan struct{} // closed and replaced when block taken+1 arrives
	ackDue   bool
	lastAck  time.Time
	ackSent  int32 // the highest cumulative acknowledgement handed to send without error
	eof      error // Receive's error once everything in order is taken
	err      error // the connection's failure or ErrClosed
	done     chan struct{}
	kick     chan struct{}
	stats    Stats
	stopOnce sync.Once
	wg       sync.WaitGroup
	// liveness (WithIdleProbe)
	waiting   int       // Receives waiting
	lastHeard time.Time // the peer's last block or acknowledgement
	lastProbe time.Time
	fails     int       // consecutive sends of run's that failed, nothing heard since
	failSince time.Time // the first of them
}

// New starts a reliable connection that sends through send. Close it.
func New(send SendFunc, opts ...Option) (*Conn, error) {
	o := options{window: 20, windowB: 4 << 20, recvBlk: 100, recvBytes: DefaultReceiveBytes, giveUp: 60 * time.Second, probe: 15 * time.Second}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	c := &Conn{
		send: send, o: o, next: 1, queued: map[int32][]byte{},
		room: make(chan struct{}), arrived: make(chan struct{}),
		done: make(chan struct{}), kick: make(chan struct{}, 1), lastHeard: time.Now(),
	}
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// blockMessage builds the message carrying block b.
func blockMessage(b *outBlock, retry bool) *message.Message {
	m := message.New(message.Element{Namespace: Namespace, Name: strconv.FormatInt(int64(b.seq), 10), MIME: BlockMIME, Data: b.data})
	if retry {
		m.Add(message.Text(Namespace, retryName, retryValue))
	}
	return m
}

// Send sends payload as the next block, waiting while the window is full.
// It returns once the block is handed to the SendFunc; the Conn keeps
// payload until it is acknowledged, so the caller must not modify it.
func (c *Conn) Send(ctx context.Context, payload []byte) error {
	c.mu.Lock()
	for c.err == nil && len(c.unacked) > 0 &&
		(len(c.unacked) >= c.o.window || c.inflight+int64(len(payload)) > c.o.windowB) {
		room := c.room
		c.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if c.next == 1<<31-1 {
		c.mu.Unlock()
		c.fail(fmt.Errorf("jxtarel: sequence numbers exhausted"))
		return c.Err()
	}
	now := time.Now()
	b := &outBlock{seq: c.next, data: payload, first: now, last: now, rto: c.rtoLocked(), sending: true}
	c.next++
	c.unacked = append(c.unacked, b)
	c.inflight += int64(len(payload))
	c.stats.BlocksSent++
	c.mu.Unlock()
	err := c.send(ctx, blockMessage(b, false))
	// Its retransmission timeout runs from here.
	c.mu.Lock()
	b.sending, b.last = false, time.Now()
	c.mu.Unlock()
	if err != nil {
		// The block stays queued: a later retransmission may still
		// deliver it, and Drain reports if it never is.
		return fmt.Errorf("jxtarel: sending block %d: %w", b.seq, err)
	}
	return nil
}

// rtoLocked is the retransmission timeout for a new block.
func (c *Conn) rtoLocked() time.Duration {
	if c.srtt == 0 {
		return initialRTO
	}
	return min(max(2*c.srtt, c.srtt+4*c.rttvar, MinRTO), MaxRTO)
}

// Drain waits until every block sent is acknowledged.
func (c *Conn) Drain(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, err, room := len(c.unacked), c.err, c.room
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %d of them: %w", ErrUnacknowledged, n, err)
		}
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("%w: %d of them: %w", ErrUnacknowledged, n, ctx.Err())
		}
	}
}

// Handle takes a message that arrived for this connection and reports
// whether it held reliable-layer elements (blocks or acknowledgements).
// It never blocks; m's block data is kept until taken by Receive.
func (c *Conn) Handle(m *message.Message) bool {
	seen := false
	for e := range m.Namespace(Namespace) {
		seen = true
		switch {
		case e.Name == ackElement:
			c.handleAck(e.Data)
		case e.Name == retryName:
		default:
			seq, err := strconv.ParseInt(e.Name, 10, 32)
			if err != nil || seq < 1 {
				c.count(func(s *Stats) { s.Malformed++ })
				continue
			}
			c.handleBlock(int32(seq), e.Data)
		}
	}
	return seen
}

func (c *Conn) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// ParseAck reads an acknowledgement element's data: the cumulative
// sequence number and the selective ones above it (at most 1024 are
// read; those at or below it, which say nothing, are skipped).
func ParseAck(b []byte) (cum int32, sacks []int32, err error) {
	if len(b) < 4 || len(b)%4 != 0 {
		return 0, nil, fmt.Errorf("%w: ack of %d bytes", ErrMalformed, len(b))
	}
	cum = int32(binary.BigEndian.Uint32(b))
	if cum < 0 {
		return 0, nil, fmt.Errorf("%w: ack %d", ErrMalformed, cum)
	}
	for b = b[4:]; len(b) >= 4 && len(sacks) < maxSACKs; b = b[4:] {
		s := int32(binary.BigEndian.Uint32(b))
		if s > cum {
			sacks = append(sacks, s)
		}
	}
	return cum, sacks, nil
}

// AppendAck appends an acknowledgement's data.
func AppendAck(dst []byte, cum int32, sacks []int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(cum))
	for _, s := range sacks {
		dst = binary.BigEndian.AppendUint32(dst, uint32(s))
	}
	return dst
}

func (c *Conn) handleAck(data []byte) {
	cum, sacks, err := ParseAck(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heard()
	if err != nil || cum >= c.next || len(sacks) > 0 && slices.Max(sacks) >= c.next {
		// Acknowledging what was never sent: a forgery, which would
		// otherwise have every block below it resent.
		c.stats.BadAcks++
		return
	}
	c.stats.AcksReceived++
	now := time.Now()
	freed := false
	// A receiver acknowledges what its application has taken, so blocks
	// behind a missing one wait there: only an acknowledgement that
	// follows no hole and covers no retransmitted block measures the
	// round trip (Karn's rule, widened to head-of-line waits).
	clean := !c.hole
	var last *outBlock
	i := 0
	for ; i < len(c.unacked) && c.unacked[i].seq <= cum; i++ {
		b := c.unacked[i]
		clean = clean && b.retries == 0
		last = b
		c.inflight -= int64(len(b.data))
		c.unacked[i] = nil
		freed = true
	}
	if clean && last != nil {
		c.sample(now.Sub(last.first))
	}
	c.unacked = c.unacked[i:]
	c.hole = len(sacks) > 0
	if len(sacks) > 0 {
		set := make(map[int32]bool, len(sacks))
		highest := sacks[0]
		for _, s := range sacks {
			set[s] = true
			highest = max(highest, s)
		}
		news := freed
		for _, b := range c.unacked {
			if set[b.seq] && !b.sacked {
				b.sacked, b.fast, news = true, false, true
			}
		}
		// A block below one acknowledged is missing; resend it at
		// once, but only once, a round trip after it was last sent, and
		// only when this acknowledgement brings news: the same one
		// repeated (a receiver waiting for the block, or a peer replaying
		// one ack to have the window signed and sent again and again),
		// or new ones claiming it missing again, leave the block to its
		// retransmission timeout, which backs off.
		hole := false
		for _, b := range c.unacked {
			if news && !b.sacked && !b.fastDone && !b.sending && b.seq < highest && now.Sub(b.last) >= max(c.srtt, 10*time.Millisecond) {
				b.fast, hole = true, true
			}
		}
		if hole {
			c.signal()
		}
	}
	if freed {
		close(c.room)
		c.room = make(chan struct{})
	}
}

// heard notes, under the lock, that the peer sent something.
func (c *Conn) heard() {
	c.lastHeard, c.fails = time.Now(), 0
}

// sample folds a round-trip sample into the estimate (RFC 6298).
func (c *Conn) sample(r time.Duration) {
	if c.srtt == 0 {
		c.srtt, c.rttvar = r, r/2
		return
	}
	d := c.srtt - r
	if d < 0 {
		d = -d
	}
	c.rttvar = (3*c.rttvar + d) / 4
	c.srtt = (7*c.srtt + r) / 8
}

func (c *Conn) handleBlock(seq int32, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heard()
	c.stats.BlocksReceived++
	switch {
	case c.err != nil:
		return
	case c.eof != nil:
		// The peer said its output had ended: a block it has not sent
		// before means its end came too soon (Receive reports it).
		if _, ok := c.queued[seq]; !ok && seq > c.taken {
			c.stats.AfterEOF++
		}
		return
	case c.o.maxBlock > 0 && len(data) > c.o.maxBlock:
		c.stats.Oversized++
		return
	case seq <= c.taken:
		// Our acknowledgement may have been lost: repeat it, at most
		// every dupAckGap, so that a peer repeating blocks cannot make
		// us send (and sign) one per block. JXSE repeats nothing here,
		// which can leave a sender whose last acknowledgement was lost
		// retransmitting until it gives up.
		c.stats.Duplicates++
		if !c.ackDue && time.Since(c.lastAck) >= dupAckGap {
			c.ackDue = true
			c.signal()
		}
		return
	case seq > c.taken+int32(c.o.recvBlk):
		c.stats.DroppedAhead++
		return
	}
	if _, ok := c.queued[seq]; ok {
		c.stats.Duplicates++ // acknowledged when taken
		return
	}
	if c.qbytes+int64(len(data)) > c.o.recvBytes && seq != c.taken+1 {
		// The next block in order is always taken, however full the
		// buffer is with blocks after it (at most one block beyond its
		// bytes): Receive frees them only once it has that one.
		c.stats.DroppedFull++
		return
	}
	c.queued[seq] = data
	c.qbytes += int64(len(data))
	if seq == c.taken+1 {
		close(c.arrived)
		c.arrived = make(chan struct{})
	} else if len(c.queued) == 1 {
		c.ackDue = true // tell the sender about the hole now
		c.signal()
	}
}

// Receive returns the next block's payload in order, and acknowledges it.
// Once the other side's end is known (SetEOF) and every block before it is
// taken, it returns that error; but if a block was missing then, with
// later blocks held or arriving after the end, it returns ErrIncomplete:
// what it returned is only part of what the peer sent (a peer ends its
// output once every block is acknowledged, so never with a gap).
func (c *Conn) Receive(ctx context.Context) ([]byte, error) {
	c.mu.Lock()
	for {
		if data, ok := c.queued[c.taken+1]; ok {
			delete(c.queued, c.taken+1)
			c.taken++
			c.qbytes -= int64(len(data))
			if !c.ackDue {
				c.ackDue = true
				c.signal()
			}
			c.mu.Unlock()
			return data, nil
		}
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return nil, err
		}
		if c.eof != nil {
			c.checkGapLocked()
			err := c.eof
			c.mu.Unlock()
			return nil, err
		}
		arrived := c.arrived
		c.waiting++
		c.mu.Unlock()
		select {
		case <-arrived:
		case <-c.done:
		case <-ctx.Done():
			c.mu.Lock()
			c.waiting--
			c.mu.Unlock()
			return nil, ctx.Err()
		}
		c.mu.Lock()
		c.waiting--
	}
}

// checkGapLocked turns the peer's end into ErrIncomplete when Receive
// reaches it with a block missing, blocks after it held or arrived
// after the end, and lets go of those it held.
func (c *Conn) checkGapLocked() {
	n := uint64(len(c.queued)) + c.stats.AfterEOF
	if n == 0 || errors.Is(c.eof, ErrIncomplete) {
		return
	}
	c.eof = fmt.Errorf("%w: block %d never came, %d after it did", ErrIncomplete, c.taken+1, n)
	clear(c.queued)
	c.qbytes = 0
}

// SetEOF records that the other side has ended its output: Receive
// returns err (io.EOF, typically) once every block before it is taken,
// or ErrIncomplete if one is missing. Blocks arriving later are dropped
// (counted in AfterEOF when not yet taken).
func (c *Conn) SetEOF(err error) {
	c.mu.Lock()
	if c.eof == nil {
		c.eof = err
		close(c.arrived)
		c.arrived = make(chan struct{})
	}
	c.mu.Unlock()
}

// Pending reports how many blocks sent are not yet acknowledged: not yet
// taken by the peer's application, including those it holds behind a
// missing one (selectively acknowledged).
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unacked)
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Err returns why the connection failed, or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops the connection: its timers stop and waiting calls return
// ErrClosed. It does not wait for acknowledgements (see Drain). Blocks
// Receive took that no acknowledgement sent so far covers are
// acknowledged first (within finalAckTimeout), unless the connection
// had failed: a peer that sent them and closes once they are
// acknowledged would otherwise wait for an acknowledgement that Close
// stopped, and report blocks that arrived as unacknowledged.
func (c *Conn) Close() error {
	c.mu.Lock()
	failed := c.err != nil
	c.mu.Unlock()
	c.fail(ErrClosed)
	c.wg.Wait()
	if !failed {
		c.finalAck()
	}
	return nil
}

// finalAckTimeout bounds the acknowledgement Close sends.
const finalAckTimeout = reAck

// finalAck sends, once run has stopped, the acknowledgement of blocks
// taken that none sent covers: one run had due, or was sending when
// Close cancelled it.
func (c *Conn) finalAck() {
	c.mu.Lock()
	owed := c.taken > c.ackSent
	cum := c.taken
	if owed {
		c.ackSent = cum
		c.stats.AcksSent++
	}
	c.mu.Unlock()
	if !owed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), finalAckTimeout)
	defer cancel()
	c.send(ctx, message.New(message.Element{Namespace: Namespace, Name: ackElement, MIME: AckMIME, Data: AppendAck(nil, cum, nil)}))
}

// fail ends the connection with err, once.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.room)
		c.room = make(chan struct{})
	}
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.done) })
}

func (c *Conn) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run sends acknowledgements and retransmissions.
func (c *Conn) run() {
	defer c.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.done
		cancel()
	}()
	for {
		select {
		case <-c.done:
			return
		case <-c.kick:
		case <-tick.C:
		}
		now := time.Now()
		ack, cum, resend, err := c.due(now)
		if err != nil {
			c.fail(err)
			return
		}
		if ack != nil {
			err := c.send(ctx, ack)
			if err == nil {
				c.mu.Lock()
				c.ackSent = max(c.ackSent, cum)
				c.mu.Unlock()
			}
			c.sent(now, err)
		}
		for _, r := range resend {
			err := c.send(ctx, r.m)
			// Its timeout runs again from here, not from before a send
			// that waited.
			c.mu.Lock()
			r.b.last = time.Now()
			c.mu.Unlock()
			c.sent(now, err)
		}
	}
}

// sent records the outcome of a send of run's (an acknowledgement, a
// probe, a retransmission). Sends that keep failing, probeTries of them
// over at least two reAcks with nothing heard from the peer meanwhile,
// make it unreachable (when probing is on).
func (c *Conn) sent(at time.Time, err error) {
	if c.o.probe == 0 {
		return
	}
	c.mu.Lock()
	if err == nil {
		c.fails = 0
		c.mu.Unlock()
		return
	}
	if c.fails == 0 {
		c.failSince = at
	}
	c.fails++
	n, span, idle := c.fails, at.Sub(c.failSince), at.Sub(c.lastHeard)
	c.mu.Unlock()
	if n >= probeTries && span >= 2*reAck {
		c.fail(fmt.Errorf("%w: nothing from it for %v and %d sends to it failed: %w", ErrUnreachable, idle.Round(100*time.Millisecond), n, err))
	}
}

// due works out, under the lock, what run must send now: an
// acknowledgement (sent again as a probe when a reader has heard nothing
// for long) and retransmissions.
func (c *Conn) due(now time.Time) (ack *message.Message, cum int32, resend []resent, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, 0, nil, nil
	}
	probe := false
	if c.o.probe > 0 && c.waiting > 0 && now.Sub(c.lastHeard) >= c.o.probe {
		gap := c.o.probe
		if c.fails > 0 {
			gap = reAck
		}
		if now.Sub(c.lastProbe) >= gap {
			probe = true
			c.lastProbe = now
			c.stats.Probes++
		}
	}
	gap := len(c.queued) > 0 && c.queued[c.taken+1] == nil
	if c.ackDue || probe || gap && now.Sub(c.lastAck) >= reAck {
		c.ackDue = false
		c.lastAck = now
		var sacks []int32
		if gap {
			for s := range c.queued {
				if len(sacks) == maxSACKs {
					break
				}
				sacks = append(sacks, s)
			}
		}
		cum = c.taken
		data := AppendAck(make([]byte, 0, 4+4*len(sacks)), cum, sacks)
		ack = message.New(message.Element{Namespace: Namespace, Name: ackElement, MIME: AckMIME, Data: data})
		c.stats.AcksSent++
	}
	if len(c.unacked) > 0 && now.Sub(c.unacked[0].first) >= c.o.giveUp {
		return nil, 0, nil, fmt.Errorf("%w: block %d unacknowledged for %v", ErrTimeout, c.unacked[0].seq, c.o.giveUp)
	}
	for _, b := range c.unacked {
		if b.sacked || b.sending || !b.fast && now.Sub(b.last) < b.rto {
			continue
		}
		if b.fast {
			b.fastDone = true
		} else {
			b.rto = min(2*b.rto, MaxRTO) // back off
		}
		b.last, b.fast = now, false
		b.retries++
		c.stats.Retransmitted++
		resend = append(resend, resent{b, blockMessage(b, true)})
	}
	return ack, cum, resend, nil
}

// resent is a block due to be sent again, and its message.
type resent struct {
	b *outBlock
	m *message.Message
}
