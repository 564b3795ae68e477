// Package socket is JXTA's socket layer on p2pmsg: reliable, ordered,
// flow-controlled, bidirectional byte streams (net.Conn and net.Listener)
// named by pipe advertisements, as JXTA's JxtaSocket and JxtaServerSocket.
//
// It builds on package pipe, which finds where a pipe is bound, and on the
// node's libp2p host, which carries the bytes. Pipes know nothing of it.
//
// # How a socket maps onto libp2p
//
// Listen announces the pipe to the pipe service's binding resolution in
// role Role, so Dial finds the listening peer exactly as an output pipe
// finds its input (a given peer, a query to connected peers, the DHT).
// Dial then opens one libp2p stream to that peer with protocol Protocol
// and writes a handshake: uvarint(len(key)) key, where key is
// pipe.Key(pipe ID). The listener answers with one byte (Accepted, or why
// not) and from then on the stream is the connection: bytes written on one
// side are read on the other, with nothing added. JXTA sockets ran their
// own windowed acknowledgement protocol over pipe messages (4,999 bytes on
// the wire for one payload byte); here reliability, ordering and flow
// control are the stream multiplexer's (yamux over TCP, or QUIC's own
// streams), so a socket costs what a raw libp2p stream costs. CloseWrite
// is the stream's half-close: the other side reads io.EOF after the last
// byte. Deadlines are the stream's.
//
// Connections are secured by the node's libp2p connection (TLS 1.3 or
// Noise, or QUIC), end to end even through a circuit relay; for a
// JxtaUnicastSecure pipe both sides also refuse any connection that is
// not.
//
// # JXTA sockets
//
// When the pipe service's endpoint is also a JXTA peer
// (endpoint.WithJXTA), Listen on a unicast pipe also accepts JXSE 2.7's
// JxtaSockets, and Dial with pipe.ToJXTAPeers opens one to a JXSE
// JxtaServerSocket: JXTA's own protocol, a pair of pipes carrying the
// blocks and acknowledgements of JXTA's reliable layer (package jxtarel),
// behind the same Conn (jxta.go).
package socket

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// Protocol is the libp2p protocol of socket streams.
const Protocol protocol.ID = "/p2pmsg/socket/1.0.0"

// Role is the role a listening socket announces to binding resolution.
const Role = "socket"

// Handshake answers.
const (
	Accepted   byte = 0
	NoListener byte = 1
	Backlog    byte = 2
	Insecure   byte = 3
	// PeerBacklog: the dialling peer already holds its share of the
	// listener's backlog (see WithBacklog).
	PeerBacklog byte = 4
)

// Errors. Errors from this package wrap one of these; use errors.Is.
var (
	ErrClosed    = fmt.Errorf("socket: %w", net.ErrClosed) // also matches net.ErrClosed
	ErrRefused   = errors.New("socket: connection refused")
	ErrBound     = errors.New("socket: pipe already has a listener on this peer")
	ErrBadOption = errors.New("socket: invalid option")
	ErrInsecure  = errors.New("socket: connection is not authenticated and encrypted")
)

// handshakeTimeout bounds how long either side waits for the handshake.
const handshakeTimeout = 10 * time.Second

type options struct {
	backlog        int
	jxtaBlock      int
	jxtaUnreliable bool
	jxtaProbe      time.Duration
}

// Option configures a Service.
type Option func(*options) error

// WithBacklog sets how many connections a listener holds before Accept
// takes them; more are refused (default 64, 1 to 4096). One peer may hold
// at most a quarter of them (at least one), so a peer that dials and
// waits cannot lock every other peer out until the application accepts;
// a client opening a pool of connections at once still gets 16 of the
// default 64.
func WithBacklog(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 4096 {
			return fmt.Errorf("%w: backlog %d out of [1, 4096]", ErrBadOption, n)
		}
		o.backlog = n
		return nil
	}
}

// DefaultJXTABlockSize is the default largest block a JXTA socket sends
// (see WithJXTABlockSize).
const DefaultJXTABlockSize = 256 << 10

// maxJXTABlock bounds a block a JXTA socket accepts: four times what
// p2pmsg sends by default, sixteen times JXSE's.
const maxJXTABlock = 1 << 20

// WithJXTABlockSize sets the largest block of JXTA's reliable layer a JXTA
// socket sends (default DefaultJXTABlockSize; 1 KiB to 1 MiB). JXSE's own
// sockets send at most 64 KiB (its messenger's MTU) and receive blocks of
// any size. Every block costs a signature at each end when signing is on
// (the block's CBJX trailer, then its acknowledgement, RSA both), so
// larger blocks move more bytes per signature; 64 KiB sends exactly as
// JXSE does.
func WithJXTABlockSize(n int) Option {
	return func(o *options) error {
		if n < 1<<10 || n > maxJXTABlock {
			return fmt.Errorf("%w: JXTA block size %d out of [1 KiB, 1 MiB]", ErrBadOption, n)
		}
		o.jxtaBlock = n
		return nil
	}
}

// DefaultJXTAIdleProbe is WithJXTAIdleProbe's default.
const DefaultJXTAIdleProbe = 15 * time.Second

// WithJXTAIdleProbe sets how long a Read on a reliable JXTA socket waits
// with nothing from the peer before it checks that the peer can still be
// reached (default DefaultJXTAIdleProbe, Go's TCP keep-alive period; 0:
// never). JXTA's transport has no keep-alives, so a sender that dies
// mid-stream leaves its connection closed and nothing else: the check
// sends the socket's acknowledgement again, and when that cannot be sent
// three times a second apart, Read fails with jxtarel.ErrUnreachable (a
// JXSE reader, without a timeout, waits forever). A peer that keeps its
// connection open and sends nothing is merely idle: set a read deadline.
func WithJXTAIdleProbe(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: JXTA idle probe %v", ErrBadOption, d)
		}
		o.jxtaProbe = d
		return nil
	}
}

// WithJXTAUnreliable makes Dial open unreliable JxtaSockets with JXTA
// peers (JXSE's stream=false): each block is one pipe message, never
// acknowledged or resent, so what is lost stays lost, and what arrives
// faster than it is read beyond 64 blocks or 8 MiB is dropped (counted in
// Conn.ReliableStats). Listen accepts both kinds whatever this says.
func WithJXTAUnreliable() Option {
	return func(o *options) error {
		o.jxtaUnreliable = true
		return nil
	}
}

// Service is a node's socket service.
type Service struct {
	pipes *pipe.Service
	host  host.Host
	opts  options

	mu        sync.Mutex
	listeners map[string]*Listener
	closed    bool

	refused      [PeerBacklog + 1]atomic.Uint64 // by answer
	malformed    atomic.Uint64
	jxtaRefused  atomic.Uint64
	jxtaRepeated atomic.Uint64
	jxtaConns    map[string]*jxtaStream // accepted, by client peer and pipe
	wg           sync.WaitGroup         // JXTA handshakes in progress
}

// New starts the socket service over the pipe service ps.
func New(ps *pipe.Service, opts ...Option) (*Service, error) {
	o := options{backlog: 64, jxtaBlock: DefaultJXTABlockSize, jxtaProbe: DefaultJXTAIdleProbe}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Service{pipes: ps, host: ps.Node().Host(), opts: o, listeners: map[string]*Listener{}, jxtaConns: map[string]*jxtaStream{}}
	s.host.SetStreamHandler(Protocol, s.handle)
	return s, nil
}

// Stats counts the connections the service refused to libp2p peers (see
// JXTAStats for JXTA sockets).
type Stats struct {
	Malformed   uint64 // handshakes that were not one
	NoListener  uint64 // for a pipe with no listener here
	Insecure    uint64 // for a secure pipe over an unencrypted connection
	BacklogFull uint64 // the listener's backlog was full
	PeerBacklog uint64 // the peer already held its share of the backlog
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	return Stats{
		Malformed:   s.malformed.Load(),
		NoListener:  s.refused[NoListener].Load(),
		Insecure:    s.refused[Insecure].Load(),
		BacklogFull: s.refused[Backlog].Load(),
		PeerBacklog: s.refused[PeerBacklog].Load(),
	}
}

// Close closes every listener and stops accepting connections.
// Connections already made stay open.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ls := make([]*Listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	s.host.RemoveStreamHandler(Protocol)
	for _, l := range ls {
		l.Close()
	}
	s.wg.Wait()
	return nil
}

// Listener accepts socket connections on a pipe.
type Listener struct {
	svc     *Service
	adv     *adv.PipeAdvertisement
	key     string
	conns   chan *Conn
	slots   chan struct{} // one per connection not yet accepted
	release func()

	mu      sync.Mutex // orders enqueueing against Close
	closed  bool
	done    chan struct{}
	pending map[peer.ID]int // libp2p connections not yet accepted, by peer
}

var _ net.Listener = (*Listener)(nil)

// Listen binds a on this peer and accepts connections to it. The pipe
// must be unicast or secure.
func (s *Service) Listen(a *adv.PipeAdvertisement) (*Listener, error) {
	if a != nil && a.Type == adv.Propagate {
		return nil, fmt.Errorf("%w: sockets need a unicast or secure pipe, not %s", pipe.ErrWrongType, a.Type)
	}
	release, err := s.pipes.Announce(a, Role)
	if err != nil {
		return nil, err
	}
	l := &Listener{svc: s, adv: a, key: pipe.Key(a.ID), conns: make(chan *Conn, s.opts.backlog), slots: make(chan struct{}, s.opts.backlog), done: make(chan struct{}), release: release, pending: map[peer.ID]int{}}
	if s.pipes.JXTAPeerAdv() != nil && a.Type == adv.Unicast {
		// JXSE peers' JxtaSocket connect requests come to the pipe itself.
		unbind, err := s.listenJXTA(l)
		if err != nil {
			release()
			return nil, err
		}
		l.release = func() { unbind(); release() }
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		l.release()
		return nil, ErrClosed
	}
	if _, ok := s.listeners[l.key]; ok {
		l.release()
		return nil, fmt.Errorf("%w: %s", ErrBound, a.ID)
	}
	s.listeners[l.key] = l
	return l, nil
}

// Accept waits for the next connection. It implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptContext(context.Background())
	if err != nil {
		return nil, err // not a typed nil *Conn in the interface
	}
	return c, nil
}

// AcceptContext is Accept bounded by ctx.
func (l *Listener) AcceptContext(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.conns:
		l.taken(c)
		return c, nil
	default:
	}
	select {
	case c := <-l.conns:
		l.taken(c)
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: Network, Addr: l.Addr(), Err: ErrClosed}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// taken frees the backlog place of c, which Accept took.
func (l *Listener) taken(c *Conn) {
	if p := c.remote.Peer; p != "" {
		l.mu.Lock()
		l.unpend(p)
		l.mu.Unlock()
	}
	<-l.slots
}

// unpend forgets one of p's connections waiting for Accept; l.mu held.
func (l *Listener) unpend(p peer.ID) {
	if l.pending[p]--; l.pending[p] <= 0 {
		delete(l.pending, p)
	}
}

// peerShare is how many connections one peer may have waiting for Accept.
func (l *Listener) peerShare() int { return max(1, cap(l.slots)/4) }

// Close stops listening; connections not yet accepted are reset.
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
	l.svc.mu.Lock()
	if l.svc.listeners[l.key] == l {
		delete(l.svc.listeners, l.key)
	}
	l.svc.mu.Unlock()
	for {
		select {
		case c := <-l.conns:
			c.st.Reset()
		default:
			return nil
		}
	}
}

// enqueue hands an accepted connection to Accept; false if the listener
// closed meanwhile.
func (l *Listener) enqueue(c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns <- c // never blocks: a place is reserved
	return true
}

// pend reserves one of p's places in the backlog; false if p holds its
// share already.
func (l *Listener) pend(p peer.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[p] >= l.peerShare() {
		return false
	}
	l.pending[p]++
	return true
}

// enqueueFrom is enqueue for a connection pend reserved; it gives the
// reservation back when the listener closed.
func (l *Listener) enqueueFrom(p peer.ID, c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.unpend(p)
		return false
	}
	l.conns <- c // never blocks: a place is reserved
	return true
}

// Addr returns the listener's address: this peer and the pipe.
func (l *Listener) Addr() net.Addr { return Addr{Peer: l.svc.host.ID(), Pipe: l.adv.ID} }

// handle runs the listening side of the handshake.
func (s *Service) handle(st network.Stream) {
	st.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(st, 64)
	key, err := readHandshake(br)
	if err != nil {
		s.malformed.Add(1)
		st.Reset()
		return
	}
	s.mu.Lock()
	l := s.listeners[key]
	s.mu.Unlock()
	refuse := func(why byte) {
		s.refused[why].Add(1)
		st.Write([]byte{why})
		st.Close()
	}
	switch {
	case l == nil:
		refuse(NoListener)
		return
	case l.adv.Type == adv.UnicastSecure && endpoint.ConnSecurity(st.Conn()) == "":
		refuse(Insecure)
		return
	}
	// Reserve a place in the backlog before saying yes, so that two
	// handshakes cannot both be promised the last one; the peer's share
	// first, so that a peer beyond it takes no place from others.
	p := st.Conn().RemotePeer()
	if !l.pend(p) {
		refuse(PeerBacklog)
		return
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.mu.Lock()
		l.unpend(p)
		l.mu.Unlock()
		refuse(Backlog)
		return
	}
	giveBack := func() {
		l.mu.Lock()
		l.unpend(p)
		l.mu.Unlock()
		<-l.slots
		st.Reset()
	}
	if _, err := st.Write([]byte{Accepted}); err != nil {
		giveBack()
		return
	}
	st.SetDeadline(time.Time{})
	if !l.enqueueFrom(p, newConn(st, l.adv, br)) {
		<-l.slots
		st.Reset()
	}
}

// maxKey bounds the pipe key in a handshake; pipe.Key makes 20 bytes.
const maxKey = 64

// ErrHandshake reports a malformed handshake.
var ErrHandshake = errors.New("socket: malformed handshake")

// readHandshake reads the dialler's handshake: uvarint(len(key)) key.
func readHandshake(r io.ByteReader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if n > maxKey {
		return "", fmt.Errorf("%w: key of %d bytes", ErrHandshake, n)
	}
	key := make([]byte, n)
	for i := range key {
		if key[i], err = r.ReadByte(); err != nil {
			return "", fmt.Errorf("%w: %v", ErrHandshake, err)
		}
	}
	return string(key), nil
}

// Dial connects to the listener of a, found as output pipes find their
// input (see pipe.ToPeers for naming the peer). It fails with
// pipe.ErrNotResolved when no listener is found and ErrRefused when the
// peer refuses.
func (s *Service) Dial(ctx context.Context, a *adv.PipeAdvertisement, opts ...pipe.ResolveOption) (*Conn, error) {
	if a != nil && a.Type == adv.Propagate {
		return nil, fmt.Errorf("%w: sockets need a unicast or secure pipe, not %s", pipe.ErrWrongType, a.Type)
	}
	if targets, err := pipe.JXTATargets(opts...); err != nil {
		return nil, err
	} else if len(targets) > 0 && a != nil {
		return s.dialJXTA(ctx, a, targets)
	}
	p, err := s.pipes.Resolve(ctx, a, Role, opts...)
	if err != nil {
		return nil, err
	}
	st, err := s.host.NewStream(network.WithAllowLimitedConn(ctx, "socket"), p, Protocol)
	if err != nil {
		return nil, fmt.Errorf("socket: connecting to %s: %w", p, err)
	}
	if a.Type == adv.UnicastSecure && endpoint.ConnSecurity(st.Conn()) == "" {
		st.Reset()
		return nil, fmt.Errorf("%w: to %s", ErrInsecure, p)
	}
	dl := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	st.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	key := pipe.Key(a.ID)
	hs := binary.AppendUvarint(make([]byte, 0, 1+len(key)), uint64(len(key)))
	if _, err := st.Write(append(hs, key...)); err != nil {
		stop()
		st.Reset()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("socket: handshake with %s: %w", p, err)
	}
	var ans [1]byte
	_, err = io.ReadFull(st, ans[:])
	if !stop() { // ctx ended: the stream is being reset
		return nil, ctx.Err()
	}
	if err != nil {
		st.Reset()
		return nil, fmt.Errorf("socket: handshake with %s: %w", p, err)
	}
	if ans[0] != Accepted {
		st.Reset()
		why := map[byte]string{NoListener: "no listener", Backlog: "backlog full", Insecure: "insecure connection",
			PeerBacklog: "this peer's share of the backlog is full"}[ans[0]]
		return nil, fmt.Errorf("%w by %s: %s", ErrRefused, p, why)
	}
	st.SetDeadline(time.Time{})
	return newConn(st, a, nil), nil
}

// Network is the network name of socket addresses.
const Network = "p2pmsg"

// Addr is a socket address: a peer and a pipe.
type Addr struct {
	Peer peer.ID
	Pipe id.ID
	// JXTAPeer is the peer's JXTA peer ID, for a JXTA socket (Peer is
	// then empty).
	JXTAPeer id.ID
}

// Network implements net.Addr.
func (Addr) Network() string { return Network }

// String is the endpoint address of the pipe at the peer.
func (a Addr) String() string {
	if !a.JXTAPeer.IsZero() {
		return endpoint.Address{Protocol: endpoint.ProtocolJXTA, Addr: strings.TrimPrefix(a.JXTAPeer.String(), "urn:jxta:"),
			Service: Role, Param: a.Pipe.String()}.String()
	}
	return endpoint.PeerAddress(a.Peer, Role, a.Pipe.String()).String()
}
