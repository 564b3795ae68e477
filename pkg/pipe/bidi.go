package pipe

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Bidirectional pipes live on the endpoint service BidiService; the
// endpoint parameter says what a message is:
//
//	c/<pipe key>/<conn>  connect (client to listener)
//	a/<conn>             accepted (listener to client)
//	r/<conn>             refused
//	d/<conn>             a message of the connection, either way
//	x/<conn>             closed, either way
//
// <conn> is 22 random URL-safe base64 characters chosen by the client; a
// connection is known by its remote peer and <conn>, so no peer can
// inject into another's connection. The listener answers a/ from Accept,
// on the accepting goroutine, so nothing the application then sends can
// overtake the answer; it answers r/ through a small bounded queue, and
// drops refusals when a peer floods it (the dialler's handshake then
// times out). The x/ of an end whose Send failed is sent on a goroutine
// of its own (tellClosed), not through that queue, which a flooding peer
// keeps full.
const (
	opConnect = 'c'
	opAccept  = 'a'
	opRefuse  = 'r'
	opData    = 'd'
	opClose   = 'x'
)

// closeTimeout bounds how long Close waits for the other side to have
// everything.
const closeTimeout = 5 * time.Second

type connKey struct {
	peer peer.ID
	conn string
}

// Listener is a bidirectional pipe listener (JXTA's JxtaServerPipe): it
// accepts connections from peers that Connect to its pipe.
type Listener struct {
	svc     *Service
	adv     *adv.PipeAdvertisement
	key     string
	accept  chan *Bidi
	release func()

	mu     sync.Mutex // orders enqueueing against Close
	closed bool
	// opening counts JXTA opens being set up for the accept queue: with
	// the queued ones, at most its capacity (reserve).
	opening int
	// waiting and hosts count the libp2p connections in the accept
	// queue by peer and by remote host, each held to share.
	waiting map[peer.ID]int
	hosts   map[netip.Prefix]int
	done    chan struct{}
}

// share is the places of the accept queue one peer or one host may hold.
func (l *Listener) share() int { return max(1, cap(l.accept)/4) }

// Listen binds a as a bidirectional pipe listener on this peer. The pipe
// must be unicast or secure (ErrWrongType); a secure listener accepts
// only over authenticated, encrypted connections. Connecting to a
// listener on the same node is not supported.
func (s *Service) Listen(a *adv.PipeAdvertisement) (*Listener, error) {
	if err := checkAdv(a); err != nil {
		return nil, err
	}
	if a.Type == adv.Propagate {
		return nil, fmt.Errorf("%w: bidirectional pipes are unicast or secure, not %s", ErrWrongType, a.Type)
	}
	l := &Listener{svc: s, adv: a, key: Key(a.ID), accept: make(chan *Bidi, s.opts.backlog), done: make(chan struct{}),
		waiting: map[peer.ID]int{}, hosts: map[netip.Prefix]int{}}
	release, err := bindLocal(s, s.servers, l.key, RoleBidi, l, a.ID, "bidirectional pipe")
	if err != nil {
		return nil, err
	}
	l.release = release
	if s.jxta != nil && a.Type == adv.Unicast {
		// JXSE peers' JxtaBiDiPipe opens come to the pipe itself.
		unbind, err := s.listenJXTABidi(l)
		if err != nil {
			release()
			return nil, err
		}
		l.release = func() { unbind(); release() }
	}
	return l, nil
}

// Adv returns the pipe's advertisement.
func (l *Listener) Adv() *adv.PipeAdvertisement { return l.adv }

// Accept waits for the next connection and tells the connecting peer it
// is accepted; the peer's Connect returns then. Connections whose peer
// gave up waiting are skipped.
func (l *Listener) Accept(ctx context.Context) (*Bidi, error) {
	for {
		var b *Bidi
		select {
		case b = <-l.accept:
		default:
			select {
			case b = <-l.accept:
			case <-l.done:
				return nil, fmt.Errorf("%w: listener of %s", ErrClosed, l.adv.ID)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		l.taken(b)
		if b.Err() != nil {
			b.drop() // the peer closed while waiting in the backlog
			continue
		}
		if err := l.answer(ctx, b); err != nil {
			b.fail(err)
			b.drop()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		return b, nil
	}
}

// answer tells b's peer it is accepted. The answer waits for room in the
// endpoint's queue to that peer, which a peer that does not read keeps
// full: it is bounded by what a connecting peer waits for it (the
// resolve timeout) and by the listener's Close, so that such a peer
// holds Accept up for no longer than it would wait itself.
func (l *Listener) answer(ctx context.Context, b *Bidi) error {
	ctx, cancel := context.WithTimeout(ctx, l.svc.opts.resolveTimeout)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if b.jx != nil {
		return b.answerJXTA(ctx)
	}
	err := l.svc.ep.Send(ctx, b.control(opAccept), message.New())
	if errors.Is(err, endpoint.ErrPeerGone) && ctx.Err() == nil {
		// The stream it went to was the one of the peer's connection
		// before (the peer restarted, and connects again): nothing was
		// sent, and the next Send opens a new stream.
		err = l.svc.ep.Send(ctx, b.control(opAccept), message.New())
	}
	return err
}

// drop lets go of a connection Accept skipped: a JXTA one's reliable
// layer, pipe and table entries live until it is closed, and any one's
// refusal notes.
func (b *Bidi) drop() {
	if b.jx != nil {
		b.closeJXTA()
		return
	}
	b.svc.forgetNotes(b)
}

// enqueue offers b to Accept; false if the listener is closed or its
// backlog is full.
// reserve holds a place in the accept queue for a connection being set
// up, so that a peer sending opens faster than Accept takes them costs at
// most the backlog, not a session and a goroutine each; unreserve gives
// the place back once the connection is queued or dropped.
func (l *Listener) reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.opening+len(l.accept) >= cap(l.accept) {
		return false
	}
	l.opening++
	return true
}

func (l *Listener) unreserve() {
	l.mu.Lock()
	l.opening--
	l.mu.Unlock()
}

func (l *Listener) enqueue(b *Bidi) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	libp2p := b.jx == nil
	if libp2p && (l.waiting[b.remote] >= l.share() || l.hosts[b.host] >= l.share()) {
		l.svc.bidisRefused.Add(1)
		return false
	}
	select {
	case l.accept <- b:
	default:
		if libp2p { // a JXTA peer's is counted in JXTARefused
			l.svc.backlogFull.Add(1)
		}
		return false
	}
	if libp2p {
		l.waiting[b.remote]++
		l.hosts[b.host]++
	}
	return true
}

// taken gives back the share of the accept queue b held.
func (l *Listener) taken(b *Bidi) {
	if b.jx != nil {
		return
	}
	l.mu.Lock()
	if l.waiting[b.remote]--; l.waiting[b.remote] <= 0 {
		delete(l.waiting, b.remote)
	}
	if l.hosts[b.host]--; l.hosts[b.host] <= 0 {
		delete(l.hosts, b.host)
	}
	l.mu.Unlock()
}

// Close stops listening; connections not yet accepted are closed.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	l.release()
	var wg sync.WaitGroup
	for drained := false; !drained; {
		select {
		case b := <-l.accept:
			wg.Add(1)
			go func() { defer wg.Done(); b.Close() }()
		default:
			drained = true
		}
	}
	wg.Wait()
	return nil
}

// Bidi is one end of a bidirectional pipe connection (JXTA's
// JxtaBiDiPipe): it sends to and receives from the peer at the other end,
// in order. It is safe for concurrent use.
type Bidi struct {
	svc    *Service
	adv    *adv.PipeAdvertisement
	remote peer.ID
	rjxta  id.ID
	conn   string
	dst    endpoint.Address
	box    *inbox

	// incoming: the remote peer opened it (a connect request), from
	// host; it counts against the peer's WithBidisPerPeer and the
	// listener's backlog shares.
	incoming bool
	host     netip.Prefix

	answer chan byte // the listener's answer, for the connecting side
	jx     *jxtaBidi // a JxtaBiDiPipe with a JXTA peer (jxtabidi.go)
	// grp carries the connection's messages, so that Close releases a
	// Send waiting for a slow receiver.
	grp *endpoint.SendGroup

	mu   sync.Mutex
	err  error // why the connection ended; io.EOF when the remote closed
	done chan struct{}
	// refused counts its messages the other end refused that another
	// Flush learnt of (the endpoint reports a peer's refusals to whoever
	// flushes first), for its own next Flush or Close.
	refused atomic.Int64
	// sent says a message of the application's was sent: without one,
	// neither a refusal nor a loss can be this Bidi's to report.
	sent atomic.Bool
	// lost is a possible loss of its messages that another Flush learnt
	// of, for its own next Flush or Close (loss.go).
	lost atomic.Pointer[endpoint.LostError]
	// putting counts the other end's messages waiting for room in box;
	// eofPending says its close came, to end the connection (io.EOF)
	// once none waits (deliverBidi).
	putting    atomic.Int32
	eofPending atomic.Bool
}

func (s *Service) newBidi(a *adv.PipeAdvertisement, remote peer.ID, conn string) *Bidi {
	return &Bidi{
		svc: s, adv: a, remote: remote, rjxta: s.jxtaID(remote), conn: conn,
		dst: endpoint.PeerAddress(remote, BidiService, string(opData)+"/"+conn),
		box: newInbox(s.opts.queue, s.opts.queueBytes), done: make(chan struct{}),
		grp: s.ep.NewSendGroup(),
	}
}

// register adds b to the service's connections unless one with the same
// key exists.
func (s *Service) register(b *Bidi) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	k := connKey{b.remote, b.conn}
	if _, ok := s.conns[k]; ok {
		return fmt.Errorf("%w: duplicate connection %s from %s", ErrRefused, b.conn, b.remote)
	}
	if b.incoming && s.peerIncoming[b.remote] >= s.opts.bidisPerPeer {
		s.bidisRefused.Add(1)
		return fmt.Errorf("%w: %s holds %d connections here (WithBidisPerPeer)", ErrRefused, b.remote, s.opts.bidisPerPeer)
	}
	s.conns[k] = b
	s.peerBidis[b.remote]++
	if b.incoming {
		s.peerIncoming[b.remote]++
	}
	s.bidiNotes[k] = b
	s.host.ConnManager().Protect(b.remote, "pipe-bidi")
	return nil
}

// forgetNotes stops keeping b's refusals for it: it is closed.
func (s *Service) forgetNotes(b *Bidi) {
	s.mu.Lock()
	k := connKey{b.remote, b.conn}
	if s.bidiNotes[k] == b {
		delete(s.bidiNotes, k)
	}
	s.mu.Unlock()
}

func (s *Service) unregister(b *Bidi) {
	s.mu.Lock()
	k := connKey{b.remote, b.conn}
	if s.conns[k] != b {
		s.mu.Unlock()
		return
	}
	delete(s.conns, k)
	if b.incoming {
		if s.peerIncoming[b.remote]--; s.peerIncoming[b.remote] <= 0 {
			delete(s.peerIncoming, b.remote)
		}
	}
	s.peerBidis[b.remote]--
	still := s.peerBidis[b.remote] > 0
	if !still {
		delete(s.peerBidis, b.remote)
	}
	s.mu.Unlock()
	if !still {
		s.host.ConnManager().Unprotect(b.remote, "pipe-bidi")
	}
}

// Connect opens a connection to the listener of a, found as output pipes
// find their input. It fails with ErrNotResolved when no listener is
// found and ErrRefused when the listener refuses (it closed, or its
// backlog is full) or does not accept within the resolve timeout
// (WithResolveTimeout; the error then also matches
// context.DeadlineExceeded), and ErrPeerGone when the listener's peer went
// away as the request was sent.
func (s *Service) Connect(ctx context.Context, a *adv.PipeAdvertisement, opts ...ResolveOption) (*Bidi, error) {
	if err := checkAdv(a); err != nil {
		return nil, err
	}
	if a.Type == adv.Propagate {
		return nil, fmt.Errorf("%w: bidirectional pipes are unicast or secure, not %s", ErrWrongType, a.Type)
	}
	if err := s.closedErr("connecting to " + a.ID.String()); err != nil {
		return nil, err
	}
	var rc resolveConfig
	for _, o := range opts {
		if err := o(&rc); err != nil {
			return nil, err
		}
	}
	if len(rc.jxtaPeers) > 0 {
		if s.jxta == nil {
			return nil, fmt.Errorf("%w: JXTA peers given, but the endpoint is not a JXTA peer (endpoint.WithJXTA)", ErrBadOption)
		}
		if a.Type != adv.Unicast {
			return nil, fmt.Errorf("%w: only unicast pipes are shared with JXTA peers (their transport does not encrypt)", ErrWrongType)
		}
		return s.connectJXTA(ctx, a, rc.jxtaPeers)
	}
	p, err := s.resolve(ctx, a, RoleBidi, rc.peers)
	if err != nil {
		return nil, err
	}
	if a.Type == adv.UnicastSecure {
		if err := s.checkSecure(p); err != nil {
			return nil, err
		}
	}
	var raw [16]byte
	rand.Read(raw[:])
	b := s.newBidi(a, p, base64.RawURLEncoding.EncodeToString(raw[:]))
	b.answer = make(chan byte, 1)
	if err := s.register(b); err != nil {
		return nil, err
	}
	handed := false // to the application, which then closes it
	defer func() {
		if !handed {
			s.forgetNotes(b)
		}
	}()
	// The listener answers when its application accepts; wait for that
	// at most the resolve timeout.
	hctx, cancel := context.WithTimeout(ctx, s.opts.resolveTimeout)
	defer cancel()
	req := endpoint.PeerAddress(p, BidiService, string(opConnect)+"/"+Key(a.ID)+"/"+b.conn)
	if err := s.ep.Send(hctx, req, message.New()); err != nil {
		b.fail(err)
		return nil, fmt.Errorf("pipe %s: connecting to %s: %w", a.ID, p, belowErr(err))
	}
	select {
	case op := <-b.answer:
		if op == opAccept {
			handed = true
			return b, nil
		}
		b.fail(ErrRefused)
		return nil, fmt.Errorf("%w: by %s for %s", ErrRefused, p, a.ID)
	case <-b.done:
		// An accepted connection may end at once (the listener sent and
		// closed): the answer came first, on the same stream.
		select {
		case op := <-b.answer:
			if op == opAccept {
				handed = true
				return b, nil
			}
		default:
		}
		return nil, fmt.Errorf("%w: connecting to %s for %s: %w", ErrRefused, p, a.ID, b.Err())
	case <-hctx.Done():
		b.Close()
		if err := ctx.Err(); err != nil {
			// Leads with the cause, as a stopped resolution does, and
			// says what was waited for.
			return nil, fmt.Errorf("%w: pipe %s: connecting to %s: no answer from its listener yet", err, a.ID, p)
		}
		return nil, fmt.Errorf("%w: %s did not accept within %v: %w", ErrRefused, p, s.opts.resolveTimeout, hctx.Err())
	}
}

// deliverBidi handles everything that arrives on BidiService.
func (s *Service) deliverBidi(ctx context.Context, d *endpoint.Delivery) {
	op, key, conn, ok := parseBidiParam(d.Param)
	if !ok {
		return
	}
	if op == opConnect {
		s.incoming(d, key, conn)
		return
	}
	s.mu.Lock()
	b := s.conns[connKey{d.Source, conn}]
	s.mu.Unlock()
	if b == nil {
		if op == opData {
			d.Refuse("no such bidirectional pipe connection")
		}
		return
	}
	switch op {
	case opAccept, opRefuse:
		if b.answer != nil {
			select {
			case b.answer <- op:
			default:
			}
		}
	case opData:
		if b.adv.Type == adv.UnicastSecure && d.Security == "" {
			d.Refuse("secure pipe: the connection is not encrypted")
			return
		}
		select {
		case <-b.done:
			d.Refuse("bidirectional pipe connection closed")
			return
		default:
		}
		r := received(d, b.adv.ID)
		b.putting.Add(1)
		ok, _ := b.box.put(ctx, b.done, r, d)
		if b.putting.Add(-1) == 0 && b.eofPending.Load() {
			b.end(io.EOF)
		}
		if !ok {
			r.recycle() // nobody saw it
			d.Refuse("bidirectional pipe connection closed")
		}
	case opClose:
		// The other end's messages sent before its close are received
		// before io.EOF. Those on the same stream are read first; but
		// after a Send failed part-way the close comes on another stream,
		// and may overtake a message that arrived on the old one and
		// waits for room: the end waits for that (putting).
		b.eofPending.Store(true)
		if b.putting.Load() == 0 {
			b.end(io.EOF)
		}
	}
}

// maxConnID bounds a connection ID; Connect makes 22 bytes.
const maxConnID = 64

// parseBidiParam splits a BidiService parameter into its operation, the
// pipe key (connect only) and the connection ID.
func parseBidiParam(param string) (op byte, key, conn string, ok bool) {
	if len(param) < 3 || param[1] != '/' {
		return 0, "", "", false
	}
	op, rest := param[0], param[2:]
	switch op {
	case opConnect:
		key, conn, ok = strings.Cut(rest, "/")
		if !ok || key == "" {
			return 0, "", "", false
		}
	case opAccept, opRefuse, opData, opClose:
		conn = rest
	default:
		return 0, "", "", false
	}
	if conn == "" || len(conn) > maxConnID || strings.Contains(conn, "/") {
		return 0, "", "", false
	}
	return op, key, conn, true
}

// incoming handles a connect request for the listener with key.
func (s *Service) incoming(d *endpoint.Delivery, key, conn string) {
	s.mu.Lock()
	l := s.servers[key]
	s.mu.Unlock()
	if l == nil || (l.adv.Type == adv.UnicastSecure && d.Security == "") {
		s.refuse(d.Source, conn)
		return
	}
	b := s.newBidi(l.adv, d.Source, conn)
	b.incoming, b.host = true, d.RemoteHost
	if err := s.register(b); err != nil {
		s.refuse(d.Source, conn)
		return
	}
	if !l.enqueue(b) {
		s.unregister(b)
		s.forgetNotes(b)
		s.refuse(d.Source, conn)
	}
}

// Bounds on the refusals waiting to be sent. Each peer's are sent in
// order by a goroutine of its own while it has any, so that a peer that
// stops reading delays only its own refusals; a flood's beyond these are
// dropped, counted (Stats.BidiRefusalsDropped), and their diallers fail
// only at the resolve timeout.
const (
	// maxRefusalsPerPeer is more than the connect requests an
	// application has in flight to one listener at once.
	maxRefusalsPerPeer = 16
	// maxRefusalPeers bounds the goroutines sending refusals: far more
	// peers than are refused at once by a listener that is merely full.
	maxRefusalPeers = 256
)

// refuse queues the refusal (r/) of to's connection conn, starting to's
// sender if it has none; dropped, and counted, beyond the bounds above.
func (s *Service) refuse(to peer.ID, conn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	q, busy := s.refusals[to]
	if (busy && len(q) >= maxRefusalsPerPeer) || (!busy && len(s.refusals) >= s.refusalPeers) {
		s.refusalsDropped.Add(1)
		return
	}
	s.refusals[to] = append(q, conn)
	if !busy {
		s.wg.Add(1)
		go s.sendRefusals(to)
	}
}

// sendRefusals sends to's queued refusals until none is left. A send
// that fails (to does not read, or is gone) drops the rest, counted with
// the one that failed: the next refusal starts afresh.
func (s *Service) sendRefusals(to peer.ID) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		q := s.refusals[to]
		if len(q) == 0 {
			delete(s.refusals, to)
			s.mu.Unlock()
			return
		}
		conn := q[0]
		s.refusals[to] = q[1:]
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.ctx, closeTimeout)
		err := s.ep.Send(ctx, endpoint.PeerAddress(to, BidiService, string(opRefuse)+"/"+conn), message.New())
		cancel()
		if err != nil {
			s.mu.Lock()
			s.refusalsDropped.Add(uint64(len(s.refusals[to])) + 1) // with conn's
			delete(s.refusals, to)
			s.mu.Unlock()
			return
		}
	}
}

// Adv returns the pipe's advertisement.
func (b *Bidi) Adv() *adv.PipeAdvertisement { return b.adv }

// RemotePeer returns the peer at the other end, proven by its key.
func (b *Bidi) RemotePeer() peer.ID { return b.remote }

// RemoteJXTAPeerID returns the JXTA peer ID of the other end.
func (b *Bidi) RemoteJXTAPeerID() id.ID { return b.rjxta }

// Send sends m to the other end. A failed Send ends the connection,
// because what reached the other end is then unknown, and tells the other
// end, which receives io.EOF after what arrived; but a Send that
// sends nothing leaves it open: one whose ctx is already done, and one of
// a message that cannot be encoded (wire.ErrUnencodable: nil, an invalid
// MIME type, a name too long) or that is over the other end's limit (an
// *endpoint.LimitError, endpoint.ErrTooLarge). A Send that this peer's
// Close cuts short fails with ErrClosed, one whose other end's peer went
// away under it with ErrPeerGone, as an output pipe's. As with net.Conn,
// a Send waiting for a slow receiver returns when this end's Close comes,
// failing with ErrClosed, its message not sent.
func (b *Bidi) Send(ctx context.Context, m *message.Message) error {
	select {
	case <-b.done:
		return fmt.Errorf("pipe %s: send on an ended connection: %w", b.adv.ID, b.Err())
	default:
	}
	if err := ctx.Err(); err != nil { // nothing tried: the connection stays
		return fmt.Errorf("pipe %s: %w", b.adv.ID, err)
	}
	if b.jx != nil {
		if err := b.jx.send(ctx, m); err != nil {
			if notSent(err) {
				return fmt.Errorf("pipe %s: %w", b.adv.ID, err)
			}
			b.fail(err)
			return fmt.Errorf("pipe %s: %w", b.adv.ID, err)
		}
		return nil
	}
	if b.adv.Type == adv.UnicastSecure {
		if err := b.svc.checkSecure(b.remote); err != nil {
			b.fail(err)
			return err
		}
	}
	if !b.sent.Load() { // once: Send is a hot path, the flag read-mostly
		b.sent.Store(true) // from here on it may be on its way
	}
	if err := b.grp.Send(ctx, b.dst, m); err != nil {
		if errors.Is(err, endpoint.ErrGroupClosed) { // ended under it
			return fmt.Errorf("pipe %s: send on an ended connection: %w (%w)", b.adv.ID, b.Err(), err)
		}
		if notSent(err) {
			return fmt.Errorf("pipe %s: %w", b.adv.ID, err)
		}
		err = belowErr(fmt.Errorf("pipe %s: %w", b.adv.ID, err))
		b.abort(err)
		return err
	}
	return nil
}

// Receive returns the next message from the other end; io.EOF once the
// other end has closed and every message it sent has been received.
func (b *Bidi) Receive(ctx context.Context) (*message.Message, error) {
	r, err := b.ReceiveFrom(ctx)
	if err != nil {
		return nil, err
	}
	m := r.Message
	r.recycle() // the caller has the message, and nothing else of r
	return m, nil
}

// ReceiveFrom is Receive with the message's provenance.
func (b *Bidi) ReceiveFrom(ctx context.Context) (*Received, error) {
	r, err := b.box.get(ctx, b.done, b.Err)
	if err != nil && b.jx != nil && b.jx.rel != nil && ctx.Err() == nil {
		// Ended: the JXTA pump may still be queueing a block it took
		// (acknowledged) before the end; it stops at once.
		b.jx.pump.Wait()
		return b.box.get(ctx, b.done, b.Err)
	}
	return r, err
}

// Err returns why the connection ended: nil while it is open, io.EOF if
// the other end closed it, ErrClosed if this end did, or the failure.
func (b *Bidi) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// flush waits until the other end has handled everything sent to it
// (ep.Flush), and reports the refusals and possible losses of b's
// messages: those it learns of, and those other Flushes learnt of for
// it. Those of other destinations go to whoever sent them (sortRefusal,
// sortLoss).
func (b *Bidi) flush(ctx context.Context) error {
	var rest []error
	var own *endpoint.RefusedError
	if err := b.svc.flushPeer(ctx, b.remote, func(err error) error {
		for _, e := range joinerr.Split(err) {
			var re *endpoint.RefusedError
			if loss, mine := b.svc.sortLoss(e, b); loss {
				if mine {
					rest = append(rest, e)
				}
			} else if errors.As(e, &re) && re.Service == BidiService && re.Param == b.dst.Param {
				own = re
			} else if e != nil && !b.svc.sortRefusal(e) {
				rest = append(rest, e)
			}
		}
		return nil
	}); err != nil {
		rest = append(rest, err) // ctx ended waiting for another Flush of the peer
	}
	if le := b.lost.Swap(nil); le != nil && !errors.Is(joinerr.Join(rest...), endpoint.ErrMaybeLost) {
		rest = append(rest, le)
	}
	if n := int(b.refused.Swap(0)); n > 0 {
		if own == nil {
			own = &endpoint.RefusedError{Peer: b.remote, Service: BidiService, Param: b.dst.Param, Code: endpoint.RefusedByListener}
		}
		own.Count += n
	}
	if own != nil {
		rest = append([]error{own}, rest...)
	}
	return joinerr.Join(rest...)
}

// sortRefusal hands a refusal the endpoint reported to a Flush that is
// not its sender's to the output pipe or Bidi that sent what was refused
// (to report at its own next Flush), or counts it as stray; false if e is
// not a refusal.
func (s *Service) sortRefusal(e error) bool {
	var re *endpoint.RefusedError
	if !errors.As(e, &re) {
		return false
	}
	switch {
	case re.Service == DataService:
		s.noteUndelivered(re.Peer, re.Param, re.Count)
	case re.Service == BidiService && strings.HasPrefix(re.Param, string(opData)+"/"):
		s.mu.Lock()
		b := s.bidiNotes[connKey{re.Peer, strings.TrimPrefix(re.Param, string(opData)+"/")}]
		s.mu.Unlock()
		if b == nil {
			s.strayRefusals.Add(1)
			return true
		}
		b.refused.Add(int64(re.Count))
	default:
		return false
	}
	return true
}

// Flush waits until the other end has received every message sent so
// far, or ctx ends. Messages the other end refused (it closed meanwhile)
// are reported as an *endpoint.RefusedError with their count. If the
// stream they went on was reset (the peer went away, or ctx ended while
// Flush was ending the stream), Flush fails with an *endpoint.LostError
// (endpoint.ErrMaybeLost): some may not have arrived.
func (b *Bidi) Flush(ctx context.Context) error {
	if b.jx != nil {
		if b.jx.rel == nil {
			return nil // unreliable: nothing to wait for
		}
		if err := b.jx.rel.Drain(ctx); err != nil {
			return fmt.Errorf("pipe %s: %w", b.adv.ID, err)
		}
		return nil
	}
	if err := b.flush(ctx); err != nil {
		err = fmt.Errorf("pipe %s: %w", b.adv.ID, err)
		if cerr := closedBelow(err); cerr != nil {
			return cerr
		}
		if errors.Is(err, endpoint.ErrMaybeLost) && b.Err() == ErrClosed {
			// This end's Close cut a large Send short, which reset the
			// stream under what it flushed.
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return err
	}
	return nil
}

// Close ends the connection: it tells the other end, which receives
// io.EOF after the messages already sent, and waits (a few seconds at
// most) until the other end has them all.
func (b *Bidi) Close() error {
	if b.jx != nil {
		return b.closeJXTA()
	}
	ctx, cancel := context.WithTimeout(b.svc.ctx, closeTimeout)
	defer cancel()
	defer b.svc.forgetNotes(b)
	if !b.end(ErrClosed) {
		if !errors.Is(b.Err(), io.EOF) || !b.sent.Load() {
			return nil // closed here before, failed (Send said so), or sent nothing
		}
		// The other end closed first: what it refused before is still to
		// be reported.
		if err := b.flush(ctx); err != nil {
			return fmt.Errorf("pipe %s: closing: %w", b.adv.ID, err)
		}
		return nil
	}
	if err := b.svc.ep.Send(ctx, b.control(opClose), message.New()); err != nil {
		return fmt.Errorf("pipe %s: closing: %w", b.adv.ID, err)
	}
	if err := b.flush(ctx); err != nil {
		return fmt.Errorf("pipe %s: closing: %w", b.adv.ID, err)
	}
	return nil
}

// control is the address of a control message about b.
func (b *Bidi) control(op byte) endpoint.Address {
	return endpoint.PeerAddress(b.remote, BidiService, string(op)+"/"+b.conn)
}

func (b *Bidi) fail(err error) { b.end(err) }

// abort ends the connection after a Send failed part-way (its ctx ended
// mid-write, the stream broke), and tells the other end as Close does:
// otherwise it would wait for messages until its peer went away, never
// learning that this end is gone. It then receives io.EOF after what
// arrived; what was lost, the failed Send and Flush report here. A peer
// that is gone is not told.
func (b *Bidi) abort(err error) {
	if b.end(err) && !errors.Is(err, ErrPeerGone) {
		b.svc.tellClosed(b)
	}
}

// tellClosed sends the x/ of b, whose Send failed, as Close would, on a
// goroutine of its own bounded by closeTimeout: one per Bidi, once, so
// bounded by the connections the application holds. Through the refusal
// queue it was dropped whenever a peer kept that queue full (connect
// requests for a pipe bound nowhere, their refusals not read), and the
// other end waited for messages until its peer went away.
func (s *Service) tellClosed(b *Bidi) {
	s.background(closeTimeout, func(ctx context.Context) { s.ep.Send(ctx, b.control(opClose), message.New()) })
}

// end records why the connection ended, once; it reports whether this
// call ended it.
func (b *Bidi) end(err error) bool {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return false
	}
	b.err = err
	close(b.done)
	b.mu.Unlock()
	if err == ErrClosed && b.grp != nil {
		// This end's Close: a Send waiting for room or in a stalled
		// write returns. (When the other end closes, a waiting Send goes
		// on: the other end's peer reads on, or goes away.)
		b.grp.Close()
	}
	b.box.close() // what is queued stays receivable, off its sender's budget
	if b.jx == nil {
		b.svc.unregister(b)
	}
	return true
}
