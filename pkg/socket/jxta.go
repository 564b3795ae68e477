package socket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// JxtaSocket with JXSE 2.7 peers. When the pipe service's endpoint is a
// JXTA peer (endpoint.WithJXTA), Listen on a unicast pipe also accepts
// JXSE's JxtaSocket connections, and Dial with pipe.ToJXTAPeers connects
// to a JXSE JxtaServerSocket. The client binds an ephemeral pipe and sends
// a connect request to the server's pipe (namespace JXTASOC: reqPipe,
// remPeer, stream = true); the request waits in the listener's backlog
// until Accept takes it, then the server binds its own pipe and answers
// on the client's (remPipe, remPeer, stream, encrypt = false), as JXSE's
// JxtaServerSocket.accept does. The bytes then
// travel as blocks of JXTA's reliable layer (package jxtarel; at most
// WithJXTABlockSize each), acknowledged as the reader reads them.
// Closing: once every block written is acknowledged, the closer sends
// JXTASOC:close = close; the other side answers closeACK once its own
// blocks are acknowledged, and reads io.EOF. Unreliable sockets (stream = false; WithJXTAUnreliable
// to dial one) send each block as a message with element JXTASOC:data,
// unacknowledged; their close is not answered (JXSE never answers it).

const (
	sockNS       = "JXTASOC"
	sockReqPipe  = "reqPipe"
	sockRemPipe  = "remPipe"
	sockStream   = "stream"
	sockEncrypt  = "encrypt"
	sockClose    = "close"
	sockData     = "data"
	closeMsg     = "close"
	closeACKMsg  = "closeACK"
	jxtaDrain    = 20 * time.Second // JXSE's closer waits so long for its blocks' acknowledgements
	jxtaCloseACK = 5 * time.Second  // and we so long for the closeACK after them
)

// JXTAStats counts JXTA socket connect requests that did not end in a
// connection Accept returned.
type JXTAStats struct {
	// Refused counts connect requests dropped on arrival: malformed,
	// naming another peer than the sender, beyond the listener's backlog
	// or its peer's or host's share of it (see WithBacklog), or for a
	// listener closing. JXTA has no refusal to send: the client's connect
	// times out.
	Refused uint64
	// HostBacklog counts those of Refused whose host already held its
	// share of the backlog: however many JXTA peer IDs its requests
	// claimed, they came on connections from one host.
	HostBacklog uint64
	// Repeated counts connect requests a client sent again (JXSE may send
	// two): one still in the backlog is answered once, by Accept; one for
	// a connection already made is answered again, with the same
	// connection, unless the answer to an earlier one is still being sent.
	Repeated uint64
	// Unanswered counts connect requests that entered the backlog and left
	// it without an answer: they waited longer than a connecting JXSE peer
	// waits by default (15 s), the listener closed, or the answer could
	// not be sent before then (the peer did not take it: its connection
	// stalled). Accept does not wait on such an answer: it goes on to
	// other hosts' requests and connections meanwhile. The peer's connect
	// times out.
	Unanswered uint64
	// Abandoned counts connections whose answer was sent while Accept
	// returned another (their answer was slower, or its Accept had
	// returned) and that the listener's Close reset before an Accept took
	// them.
	Abandoned uint64
}

// JXTAStats returns the service's JXTA socket counters.
func (s *Service) JXTAStats() JXTAStats {
	return JXTAStats{Refused: s.jxtaRefused.Load(), HostBacklog: s.jxtaHostFull.Load(), Repeated: s.jxtaRepeated.Load(),
		Unanswered: s.jxtaUnanswered.Load(), Abandoned: s.jxtaAbandoned.Load()}
}

// jxtaAnswerWait is how long a JXTA connect request waits in the backlog
// for Accept: JxtaSocket's default connect timeout, which also covers the
// 10 s our own Dial waits. A later answer would reach no one, and would
// hand Accept a connection whose peer has gone.
const jxtaAnswerWait = 15 * time.Second

// jxtaRequest is a JXTA connect request waiting in a listener's backlog:
// only what the answer needs, whatever else the request carried.
type jxtaRequest struct {
	peer, pipe id.ID // the client and its pipe
	reliable   bool
	key        string    // in Service.jxtaPending, then Service.jxtaConns
	deadline   time.Time // when the client stops waiting for the answer
}

// jxtaStream is a JXTA socket's byte stream: a reliable connection over a
// pipe pair.
type jxtaStream struct {
	x        *pipe.JXTASession
	rel      carrier
	reliable bool
	block    int // the largest block Write sends

	answers chan *pipe.Received // the connect response, for Dial
	resp    *message.Message    // the connect response, for a listener
	// reanswering is set while resp is being sent again to a repeated
	// connect request.
	reanswering atomic.Bool
	forget      func()                      // removes an accepted stream from its service's table
	unwatch     atomic.Pointer[func() bool] // stops the teardown when the pipes close

	rmu  sync.Mutex
	rbuf []byte     // the rest of the last block read
	wmu  sync.Mutex // one Write at a time

	// Bytes written wait in pending for the writer goroutine.
	pmu         sync.Mutex
	pending     []byte
	inBlock     bool          // the writer is sending a block
	werr        error         // why the writer stopped
	drained     chan struct{} // closed and replaced when pending or inBlock change
	kick        chan struct{}
	startWriter sync.Once

	dlMu   sync.Mutex
	rdl    time.Time
	wdl    time.Time
	dlWake chan struct{} // closed and replaced when a deadline changes

	closeSent   atomic.Bool
	remoteClose chan struct{} // the other side sent close
	gotACK      chan struct{} // the other side sent closeACK
	rcOnce      sync.Once
	ackOnce     sync.Once
	down        sync.Once
	wg          sync.WaitGroup // the writer
	ackWG       sync.WaitGroup // the closeACK answer
	drainErr    error          // why it was not sent, read after ackWG.Wait
	ctx         context.Context
	cancel      context.CancelFunc
}

func newJXTAStream(ps *pipe.Service, name string, block int, reliable bool, probe time.Duration) (*jxtaStream, error) {
	js := &jxtaStream{block: block, reliable: reliable, answers: make(chan *pipe.Received, 1), dlWake: make(chan struct{}),
		drained: make(chan struct{}), kick: make(chan struct{}, 1),
		remoteClose: make(chan struct{}), gotACK: make(chan struct{})}
	js.ctx, js.cancel = context.WithCancel(context.Background())
	// The carrier sends only once the session exists: nothing arrives on
	// a pipe before the handshake names it.
	send := func(ctx context.Context, m *message.Message) error { return js.x.Send(ctx, m) }
	if reliable {
		// 20 blocks in flight, JXSE's own socket window, within the
		// receive buffer of a peer like this one.
		rel, err := jxtarel.New(send, jxtarel.WithWindow(20, min(20*int64(block), jxtarel.DefaultReceiveBytes)), jxtarel.WithMaxBlock(maxJXTABlock), jxtarel.WithIdleProbe(probe))
		if err != nil {
			return nil, err
		}
		js.rel = rel
	} else {
		js.rel = newPlainCarrier(send)
	}
	var err error
	if js.x, err = ps.NewJXTASession(name, js.handle); err != nil {
		js.rel.Close()
		return nil, err
	}
	// The pipe service closing under it (a Peer's Close or Shutdown,
	// after the sockets) ends the stream: nothing can cross it any more,
	// and its goroutines would otherwise wait for the application's Close.
	stop := js.x.AfterServiceClose(js.teardown)
	js.unwatch.Store(&stop)
	return js, nil
}

// carrier moves a JXTA socket's bytes: JXTA's reliable layer
// (*jxtarel.Conn) or, for an unreliable socket, plainCarrier.
type carrier interface {
	Handle(*message.Message) bool
	Stats() jxtarel.Stats
	Send(context.Context, []byte) error
	Receive(context.Context) ([]byte, error)
	Drain(context.Context) error
	SetEOF(error)
	Close() error
}

// plainCarrier is an unreliable JxtaSocket's: each block is one message
// with element JXTASOC:data, nothing is acknowledged or resent, and a
// block that arrives while the reader is behind (plainQueueBlocks blocks
// or plainQueueBytes bytes waiting) is dropped, as is one larger than
// maxJXTABlock: what a peer can make an unread socket hold is bounded
// as the reliable layer's receive buffer is.
type plainCarrier struct {
	send      func(context.Context, *message.Message) error
	q         chan []byte
	queued    atomic.Int64 // bytes in q
	sent      atomic.Uint64
	got       atomic.Uint64
	dropped   atomic.Uint64
	oversized atomic.Uint64
	mu        sync.Mutex
	eof       error
	eofCh     chan struct{}
	done      chan struct{}
	once      sync.Once
}

// An unreliable socket's receive queue. Its byte bound is the reliable
// layer's default receive buffer, so neither kind of socket lets a peer
// make it hold more; its block bound, three times the reliable window of
// 20 blocks, lets a reader that keeps up absorb a sender's burst of small
// blocks without drops.
const (
	plainQueueBlocks = 64
	plainQueueBytes  = 8 << 20
)

func newPlainCarrier(send func(context.Context, *message.Message) error) *plainCarrier {
	return &plainCarrier{send: send, q: make(chan []byte, plainQueueBlocks), eofCh: make(chan struct{}), done: make(chan struct{})}
}

func (c *plainCarrier) Handle(m *message.Message) bool {
	e, ok := m.Get(sockNS, sockData)
	if !ok {
		return false
	}
	c.got.Add(1)
	n := int64(len(e.Data))
	if n > maxJXTABlock {
		c.oversized.Add(1)
		return true
	}
	if !c.reserve(n) {
		c.dropped.Add(1)
		return true
	}
	select {
	case <-c.eofCh:
		c.queued.Add(-n)
		c.dropped.Add(1)
	case c.q <- e.Data:
	default:
		c.queued.Add(-n)
		c.dropped.Add(1)
	}
	return true
}

func (c *plainCarrier) Send(ctx context.Context, p []byte) error {
	c.sent.Add(1)
	return c.send(ctx, message.New(message.Element{Namespace: sockNS, Name: sockData, Data: p}))
}

// Stats reports what an unreliable socket counts: blocks sent, blocks
// received, and those dropped because the reader was behind.
func (c *plainCarrier) Stats() jxtarel.Stats {
	return jxtarel.Stats{BlocksSent: c.sent.Load(), BlocksReceived: c.got.Load(), DroppedFull: c.dropped.Load(), Oversized: c.oversized.Load()}
}

// reserve counts n more bytes queued if they fit; an empty queue takes
// any block that is not oversized.
func (c *plainCarrier) reserve(n int64) bool {
	for {
		q := c.queued.Load()
		if q > 0 && q+n > plainQueueBytes {
			return false
		}
		if c.queued.CompareAndSwap(q, q+n) {
			return true
		}
	}
}

// take hands a queued block to the reader.
func (c *plainCarrier) take(p []byte) []byte {
	c.queued.Add(-int64(len(p)))
	return p
}

func (c *plainCarrier) Receive(ctx context.Context) ([]byte, error) {
	select {
	case p := <-c.q:
		return c.take(p), nil
	default:
	}
	select {
	case p := <-c.q:
		return c.take(p), nil
	case <-c.eofCh:
		select {
		case p := <-c.q:
			return c.take(p), nil
		default:
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return nil, c.eof
	case <-c.done:
		return nil, jxtarel.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *plainCarrier) Drain(context.Context) error { return nil }

func (c *plainCarrier) SetEOF(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.eof == nil {
		c.eof = err
		close(c.eofCh)
	}
}

func (c *plainCarrier) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

// handle takes a message on the socket's pipe; it runs on the
// connection's reader.
func (js *jxtaStream) handle(r *pipe.Received) {
	if js.ctx.Err() != nil {
		return // torn down; the session's handler may run once more
	}
	if js.rel.Handle(r.Message) {
		return
	}
	if e, ok := r.Message.Get(sockNS, sockClose); ok {
		switch string(e.Data) {
		case closeMsg:
			js.rcOnce.Do(func() {
				// Answer once our own blocks are acknowledged, off the
				// reader; Close waits for the answer to be sent (Reset
				// does not), so the goroutine is counted before Close
				// can see the remote close.
				js.ackWG.Add(1)
				close(js.remoteClose)
				js.rel.SetEOF(io.EOF)
				go func() {
					defer js.ackWG.Done()
					ctx, cancel := context.WithTimeout(js.ctx, jxtaDrain)
					defer cancel()
					if js.drainErr = js.rel.Drain(ctx); js.drainErr == nil {
						js.x.Send(ctx, message.New(message.Text(sockNS, sockClose, closeACKMsg)))
					}
				}()
			})
		case closeACKMsg:
			js.ackOnce.Do(func() { close(js.gotACK) })
		}
		return
	}
	if _, ok := r.Message.Get(sockNS, sockRemPipe); ok {
		select {
		case js.answers <- r:
		default:
		}
	}
}

// deadlineCtx is a context ending at the deadline *dl (re-read whenever a
// deadline changes) or when the stream is torn down.
func (js *jxtaStream) deadlineCtx(dl *time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(js.ctx)
	go func() {
		for {
			js.dlMu.Lock()
			d, wake := *dl, js.dlWake
			js.dlMu.Unlock()
			var expired <-chan time.Time
			if !d.IsZero() {
				t := time.NewTimer(time.Until(d))
				expired = t.C
				defer t.Stop()
			}
			select {
			case <-expired:
				cancel()
				return
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, cancel
}

func (js *jxtaStream) Read(b []byte) (int, error) {
	js.rmu.Lock()
	defer js.rmu.Unlock()
	if len(js.rbuf) == 0 {
		ctx, cancel := js.deadlineCtx(&js.rdl)
		p, err := js.rel.Receive(ctx)
		cancel()
		if err != nil {
			return 0, js.mapErr(err, ctx)
		}
		js.rbuf = p
	}
	n := copy(b, js.rbuf)
	js.rbuf = js.rbuf[n:]
	return n, nil
}

// mapErr turns a reliable-layer error into what net.Conn callers expect.
func (js *jxtaStream) mapErr(err error, ctx context.Context) error {
	switch {
	case errors.Is(err, jxtarel.ErrIncomplete), errors.Is(err, jxtarel.ErrUnreachable):
		return fmt.Errorf("%w: %w", ErrReset, err) // the peer is gone, as a reset says
	case errors.Is(err, io.EOF):
		return io.EOF
	case errors.Is(err, context.Canceled) && js.ctx.Err() != nil, errors.Is(err, jxtarel.ErrClosed):
		return ErrClosed
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return timeoutError{errDeadline}
	}
	return err
}

var errDeadline = errors.New("i/o timeout")

// Write queues b's bytes for the stream's writer goroutine, waiting while
// a block's worth is already queued. The writer sends what is queued as
// one block whenever the reliable layer takes one, so small writes made
// while a block is being signed and sent go out together, and a lone
// write goes out at once.
func (js *jxtaStream) Write(b []byte) (int, error) {
	js.wmu.Lock()
	defer js.wmu.Unlock()
	select {
	case <-js.remoteClose:
		return 0, fmt.Errorf("%w: the JXTA peer closed the socket", io.ErrClosedPipe)
	default:
	}
	if js.closeSent.Load() {
		return 0, ErrClosed
	}
	js.startWriter.Do(func() {
		js.wg.Add(1)
		go js.writer()
	})
	var ctx context.Context
	n := 0
	for n < len(b) {
		js.pmu.Lock()
		if js.werr != nil {
			err := js.werr
			js.pmu.Unlock()
			return n, js.mapErr(err, js.ctx)
		}
		if room := js.block - len(js.pending); room > 0 {
			k := min(room, len(b)-n)
			js.pending = append(js.pending, b[n:n+k]...)
			n += k
			js.pmu.Unlock()
			js.kickWriter()
			continue
		}
		drained := js.drained
		js.pmu.Unlock()
		if ctx == nil {
			var cancel context.CancelFunc
			ctx, cancel = js.deadlineCtx(&js.wdl)
			defer cancel()
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return n, js.mapErr(ctx.Err(), ctx)
		}
	}
	return n, nil
}

func (js *jxtaStream) kickWriter() {
	select {
	case js.kick <- struct{}{}:
	default:
	}
}

// writer sends the queued bytes as blocks.
func (js *jxtaStream) writer() {
	defer js.wg.Done()
	for {
		js.pmu.Lock()
		blk := js.pending
		js.pending = nil
		if blk != nil {
			js.inBlock = true
			close(js.drained)
			js.drained = make(chan struct{})
		}
		js.pmu.Unlock()
		if blk == nil {
			select {
			case <-js.kick:
				continue
			case <-js.ctx.Done():
				return
			}
		}
		// The reliable layer keeps blk until it is acknowledged.
		err := js.rel.Send(js.ctx, blk)
		js.pmu.Lock()
		js.inBlock = false
		if err != nil && js.werr == nil {
			js.werr = err
		}
		close(js.drained)
		js.drained = make(chan struct{})
		js.pmu.Unlock()
		if err != nil {
			return
		}
	}
}

// flushWrites waits until the writer has handed every queued byte to the
// reliable layer.
func (js *jxtaStream) flushWrites(ctx context.Context) error {
	for {
		js.pmu.Lock()
		idle, err, drained := len(js.pending) == 0 && !js.inBlock, js.werr, js.drained
		js.pmu.Unlock()
		if err != nil {
			return err
		}
		if idle {
			return nil
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CloseWrite waits (20 s at most, or until the write deadline) until
// every block written is acknowledged, then tells the other side, which
// reads io.EOF, and waits a few seconds for its closeACK. It fails if
// blocks stayed unacknowledged: they may not have arrived. JXTA's close
// has no half-close: the other side can write no more (JXSE closes its
// socket; ours fails its Writes), so Reads here return what arrived
// before its closeACK, which it sends once everything it wrote is
// acknowledged, then errNoHalfClose.
func (js *jxtaStream) CloseWrite() error { return js.closeWrite(context.Background()) }

// closeWrite is CloseWrite, its waits cut short when ctx ends too.
func (js *jxtaStream) closeWrite(outer context.Context) error {
	if js.closeSent.Swap(true) {
		return nil
	}
	dl := time.Now().Add(jxtaDrain)
	js.dlMu.Lock()
	if !js.wdl.IsZero() && js.wdl.Before(dl) {
		dl = js.wdl // a write deadline bounds the wait too
	}
	js.dlMu.Unlock()
	ctx, cancel := context.WithDeadline(js.ctx, dl)
	defer cancel()
	defer context.AfterFunc(outer, cancel)()
	if err := js.flushWrites(ctx); err != nil {
		return err
	}
	if err := js.rel.Drain(ctx); err != nil {
		return err
	}
	select {
	case <-js.remoteClose:
		return nil // it closed first and has everything
	default:
	}
	if err := js.x.Send(ctx, message.New(message.Text(sockNS, sockClose, closeMsg))); err != nil {
		return err
	}
	if !js.reliable {
		js.rel.SetEOF(errNoHalfClose)
		return nil // JXSE never answers an unreliable socket's close
	}
	t := time.NewTimer(jxtaCloseACK)
	defer t.Stop()
	select {
	case <-js.gotACK:
	case <-js.remoteClose:
	case <-t.C: // everything was acknowledged: only the courtesy is missing
	case <-ctx.Done():
	}
	js.rel.SetEOF(errNoHalfClose) // after the other side's io.EOF, if it closed too
	return nil
}

// errNoHalfClose is what Read returns, after the bytes that arrived,
// once CloseWrite has closed a JXTA socket: nothing more comes, yet the
// other side did not end its writing (it may have had more to send),
// so this is not io.EOF.
var errNoHalfClose = fmt.Errorf("%w (a JXTA socket has no half-close: CloseWrite ended reading too)", ErrClosed)

// CloseRead is a no-op: the reliable layer stops the other side when
// nothing is read.
func (js *jxtaStream) CloseRead() error { return nil }

// Close closes the write side (CloseWrite) if the other side has not
// closed, or else waits until its close is answered, then tears the
// stream down.
func (js *jxtaStream) Close() error {
	var err error
	select {
	case <-js.remoteClose:
		js.ackWG.Wait()   // the closeACK is sent (bounded by jxtaDrain)
		err = js.drainErr // or not, and what was written may not have arrived
	default:
		err = js.CloseWrite()
	}
	js.teardown()
	return err
}

// Reset tears the stream down at once.
func (js *jxtaStream) Reset() error {
	js.teardown()
	return nil
}

func (js *jxtaStream) teardown() {
	js.down.Do(func() {
		if stop := js.unwatch.Load(); stop != nil {
			(*stop)()
		}
		if js.forget != nil {
			js.forget()
		}
		js.cancel()
		js.rel.Close()
		js.x.Close()
		js.ackWG.Wait()
		js.wg.Wait()
	})
}

func (js *jxtaStream) setDeadline(dl *time.Time, t time.Time) {
	js.dlMu.Lock()
	*dl = t
	close(js.dlWake)
	js.dlWake = make(chan struct{})
	js.dlMu.Unlock()
}

func (js *jxtaStream) SetDeadline(t time.Time) error {
	js.setDeadline(&js.rdl, t)
	js.setDeadline(&js.wdl, t)
	return nil
}

func (js *jxtaStream) SetReadDeadline(t time.Time) error {
	js.setDeadline(&js.rdl, t)
	return nil
}

func (js *jxtaStream) SetWriteDeadline(t time.Time) error {
	js.setDeadline(&js.wdl, t)
	return nil
}

// jxtaConn makes the Conn of a JXTA stream whose remote is set.
func (s *Service) jxtaConn(js *jxtaStream, a *adv.PipeAdvertisement, self id.ID) *Conn {
	remote, _ := js.x.Remote()
	return &Conn{st: js, adv: a,
		local:  Addr{Peer: s.host.ID(), Pipe: a.ID, JXTAPeer: self},
		remote: Addr{Pipe: a.ID, JXTAPeer: remote},
		wlock:  make(chan struct{}, 1), closed: make(chan struct{})}
}

// listenJXTA takes JXSE peers' connect requests for l into its backlog;
// Accept answers them (answerJXTA), as JXSE's JxtaServerSocket does, so a
// peer cannot make a listener hold sockets, and their receive buffers,
// that the application never accepted.
func (s *Service) listenJXTA(l *Listener) (func(), error) {
	return s.pipes.ListenJXTA(l.adv, func(r *pipe.Received) {
		h, err := pipe.ParseJXTAHandshake(r.Message, sockNS, sockReqPipe, sockStream)
		if err != nil || !r.FromJXTA.IsZero() && h.Peer != r.FromJXTA {
			s.jxtaRefused.Add(1)
			return
		}
		req := &jxtaRequest{peer: h.Peer, pipe: h.Pipe.ID, reliable: h.Reliable,
			key: h.Peer.String() + " " + h.Pipe.ID.String(), deadline: time.Now().Add(s.opts.jxtaWait)}
		// The peer ID is the request's claim, the host that of the
		// connection that carried it: only the host costs a machine.
		b := backlogged{req: req, at: place{who: "jxta:" + h.Peer.String(), host: r.RemoteHost}}
		s.mu.Lock()
		js, pending := s.jxtaConns[req.key], s.jxtaPending[req.key]
		queued, why := false, Accepted
		if js == nil && !pending {
			if why, queued = l.reserve(b.at); queued {
				s.jxtaPending[req.key] = true
			}
		}
		s.mu.Unlock()
		switch {
		case js != nil:
			s.jxtaRepeated.Add(1)
			s.reanswer(js)
		case pending:
			s.jxtaRepeated.Add(1) // Accept answers the one queued
		case !queued:
			if why == HostBacklog {
				s.jxtaHostFull.Add(1)
			}
			s.jxtaRefused.Add(1) // backlog or the peer's or host's share full: the JXSE client times out
		case !l.enqueue(b):
			l.unreserve(b.at)
			s.forgetRequest(req)
			s.jxtaRefused.Add(1)
		}
	})
}

// reanswer sends js's connect response again: JXSE may send a request
// twice (two resolutions of the server pipe racing), and the first answer
// may have been lost. One answer at a time: a peer that repeats its
// request while it does not read would otherwise get a goroutine per
// repeat, each waiting to write for handshakeTimeout.
func (s *Service) reanswer(js *jxtaStream) {
	if js.resp == nil || !js.reanswering.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer js.reanswering.Store(false)
		ctx, cancel := context.WithTimeout(js.ctx, handshakeTimeout)
		defer cancel()
		js.x.Send(ctx, js.resp)
	}()
}

// forgetRequest removes a request that leaves the backlog unanswered.
func (s *Service) forgetRequest(req *jxtaRequest) {
	s.mu.Lock()
	delete(s.jxtaPending, req.key)
	s.mu.Unlock()
}

// dropRequest lets go of a request from the backlog without answering it.
func (s *Service) dropRequest(req *jxtaRequest) {
	s.forgetRequest(req)
	s.jxtaUnanswered.Add(1)
}

// errExpired reports a connect request whose client stopped waiting.
var errExpired = errors.New("socket: JXTA connect request expired")

// answerJXTA answers a connect request taken from l's backlog and returns
// the connection. The answer is bounded by what the client waits for it
// and by l's Close; a request it cannot answer is dropped and counted
// (Unanswered).
func (s *Service) answerJXTA(l *Listener, req *jxtaRequest) (*Conn, error) {
	if !time.Now().Before(req.deadline) {
		s.dropRequest(req)
		return nil, errExpired
	}
	js, err := newJXTAStream(s.pipes, l.adv.Name, s.opts.jxtaBlock, req.reliable, s.opts.jxtaProbe)
	if err != nil {
		s.dropRequest(req)
		return nil, err
	}
	js.x.SetRemote(req.peer, req.pipe)
	resp, err := s.pipes.JXTAHandshakeMessage(sockNS, sockRemPipe, js.x,
		message.Text(sockNS, sockStream, strconv.FormatBool(req.reliable)), message.Text(sockNS, sockEncrypt, "false"))
	if err != nil {
		js.teardown()
		s.dropRequest(req)
		return nil, err
	}
	// A repeat of the request while this answer is sent is not answered
	// again (reanswer): that would send the same answer twice at once.
	js.reanswering.Store(true)
	defer js.reanswering.Store(false)
	s.mu.Lock()
	delete(s.jxtaPending, req.key)
	if s.closed {
		s.mu.Unlock()
		js.teardown()
		s.jxtaUnanswered.Add(1)
		return nil, ErrClosed
	}
	js.resp = resp
	s.jxtaConns[req.key] = js
	s.mu.Unlock()
	js.forget = func() {
		s.mu.Lock()
		if s.jxtaConns[req.key] == js {
			delete(s.jxtaConns, req.key)
		}
		s.mu.Unlock()
	}
	actx, cancel := context.WithDeadline(context.Background(), req.deadline)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-actx.Done():
		}
	}()
	if err := js.x.Send(actx, resp); err != nil {
		js.teardown()
		s.jxtaUnanswered.Add(1)
		return nil, err
	}
	self, _ := pipe.ParseJXTAPeerAdv(s.pipes.JXTAPeerAdv())
	return s.jxtaConn(js, l.adv, self), nil
}

// dialJXTA connects to a JXSE JxtaServerSocket on a among the JXTA peers
// at addrs.
func (s *Service) dialJXTA(ctx context.Context, a *adv.PipeAdvertisement, addrs []string) (*Conn, error) {
	if a.Type != adv.Unicast {
		return nil, fmt.Errorf("%w: only unicast pipes are shared with JXTA peers (their transport does not encrypt)", pipe.ErrWrongType)
	}
	server, err := s.pipes.ResolveJXTA(ctx, a, addrs...)
	if err != nil {
		return nil, err
	}
	js, err := newJXTAStream(s.pipes, a.Name+".remote", s.opts.jxtaBlock, !s.opts.jxtaUnreliable, s.opts.jxtaProbe)
	if err != nil {
		return nil, err
	}
	js.x.SetRemote(server, id.ID{}) // only the server may answer
	req, err := s.pipes.JXTAHandshakeMessage(sockNS, sockReqPipe, js.x, message.Text(sockNS, sockStream, strconv.FormatBool(js.reliable)))
	if err != nil {
		js.teardown()
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := s.pipes.SendJXTA(hctx, server, a.ID, req); err != nil {
		js.teardown()
		return nil, fmt.Errorf("socket: connecting to JXTA peer %s: %w", server, err)
	}
	for {
		select {
		case r := <-js.answers:
			h, err := pipe.ParseJXTAHandshake(r.Message, sockNS, sockRemPipe, sockStream)
			if err != nil || h.Peer != server || h.Reliable != js.reliable {
				s.jxtaRefused.Add(1)
				continue
			}
			js.x.SetRemote(server, h.Pipe.ID)
			self, _ := pipe.ParseJXTAPeerAdv(s.pipes.JXTAPeerAdv())
			return s.jxtaConn(js, a, self), nil
		case <-hctx.Done():
			js.teardown()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: JXTA peer %s did not answer within %v", ErrRefused, server, handshakeTimeout)
		}
	}
}
