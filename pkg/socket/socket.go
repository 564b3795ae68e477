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
// own windowed acknowledgement protocol over pipe messages (a 913-byte
// message for one payload byte, in the layer study of JXTA 2.3); here
// reliability, ordering and flow control are the stream multiplexer's
// (yamux over TCP, or QUIC's own streams), so a socket costs what a raw
// libp2p stream costs. CloseWrite
// is the stream's half-close: the other side reads io.EOF after the last
// byte. Deadlines are the stream's, and Conn checks them itself before
// each Read and Write too: past its deadline, one fails with a timeout
// even while bytes wait to be read, as on TCP.
//
// Until Accept takes them, connections wait in the listener's backlog
// (WithBacklog), where one peer and one remote host (an IPv4 address or
// IPv6 /64, whatever identities it dials as) each hold at most a quarter
// of the places; a dialler beyond them is answered why (PeerBacklog,
// HostBacklog, Backlog) and counted (Stats).
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
// behind the same Conn (jxta.go). A JXTA peer's connect request waits in
// the listener's backlog, unanswered, until Accept answers it, as JXSE's
// JxtaServerSocket does, counted under the peer ID it claims and the
// host of the connection that carried it (endpoint.Delivery.RemoteHost),
// which, unlike the claim, costs a machine to change. Until then the
// peer has no socket to send to, so a backlog holds no receive buffers,
// only requests, each dropped (JXTAStats.Unanswered) once its peer has
// stopped waiting. Accept answers one request at a time per host and
// waits on none: a peer that does not take its answer holds up its own
// host's requests, not the listener (see AcceptContext).
package socket

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
	"github.com/p2pmsg/p2pmsg/internal/joinerr"
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
	// HostBacklog: the host the dialling peer connects from already holds
	// its share of the listener's backlog (see WithBacklog). A dialler
	// that predates it reads it, as any answer but Accepted, as a
	// refusal.
	HostBacklog byte = 5
)

// Errors. Errors from this package wrap one of these; use errors.Is.
var (
	ErrClosed    = fmt.Errorf("socket: %w", net.ErrClosed) // also matches net.ErrClosed
	ErrRefused   = errors.New("socket: connection refused")
	ErrBound     = errors.New("socket: pipe already has a listener on this peer")
	ErrBadOption = errors.New("socket: invalid option")
	ErrInsecure  = errors.New("socket: connection is not authenticated and encrypted")
	// ErrReset is what a Conn's Read and Write fail with once its stream
	// ended without a clean close: the other side reset it (Conn.Reset),
	// its peer went away, the connection to it was lost, or a JXTA peer
	// closed with a block it sent missing (jxtarel.ErrIncomplete). Unlike after
	// io.EOF, what was read may be only part of what was sent. It also
	// matches libp2p's network.ErrReset, and never io.EOF.
	ErrReset = errors.New("socket: connection reset")
)

// handshakeTimeout bounds how long either side waits for the handshake.
const handshakeTimeout = 10 * time.Second

type options struct {
	backlog        int
	jxtaBlock      int
	jxtaUnreliable bool
	jxtaProbe      time.Duration
	jxtaWait       time.Duration // jxtaAnswerWait; shorter in tests
}

// Option configures a Service.
type Option func(*options) error

// WithBacklog sets how many connections a listener holds before Accept
// returns them, JXTA connect requests included (Accept answers those); more
// are refused (default 64, 1 to 4096). One peer may hold at most a
// quarter of them (at least one), and so may one remote host, however
// many peers it speaks for, so that a peer that dials and waits cannot
// lock every other peer out until the application accepts, nor can four
// identities made for the purpose (a libp2p key or a claimed JXTA peer
// ID costs nothing) on one machine; it takes four hosts. A client
// opening a pool of connections at once still gets 16 of the default
// 64.
//
// A host is the remote IPv4 address, or IPv6 /64, of the connection a
// dial or JXTA connect request came on (the rule JXTA's TCP transport
// shares its connections by; see endpoint.Delivery.RemoteHost); for a
// connection through a circuit relay, the relay's, whose bytes are the
// ones that arrive. Peers behind one NAT so share a quarter, and so do
// peers reached through one relay: keying a relayed connection by relay
// and peer would let identities made behind one relay take the whole
// backlog again, and one share for all relayed connections would let one
// relay's peers lock out every other relay's. Connections whose address
// shows no IP share one quarter between them.
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
// three times a second apart, Read fails with jxtarel.ErrUnreachable, as
// ErrReset (a JXSE reader, without a timeout, waits forever). A peer that
// keeps its connection open and sends nothing is merely idle: set a read
// deadline.
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

// Service is a node's socket service. Its methods are safe for concurrent
// use.
type Service struct {
	pipes *pipe.Service
	host  host.Host
	opts  options

	mu        sync.Mutex
	listeners map[string]*Listener
	open      map[*Conn]struct{} // sockets handed out and not closed
	closed    bool

	refused        [HostBacklog + 1]atomic.Uint64 // libp2p dials, by answer
	malformed      atomic.Uint64
	jxtaRefused    atomic.Uint64
	jxtaHostFull   atomic.Uint64
	jxtaRepeated   atomic.Uint64
	jxtaUnanswered atomic.Uint64
	jxtaAbandoned  atomic.Uint64
	jxtaPending    map[string]bool        // connect requests in a backlog, by client peer and pipe
	jxtaConns      map[string]*jxtaStream // accepted, by client peer and pipe
	wg             sync.WaitGroup         // repeated JXTA connect responses being sent
}

// New starts the socket service over the pipe service ps.
func New(ps *pipe.Service, opts ...Option) (*Service, error) {
	o := options{backlog: 64, jxtaBlock: DefaultJXTABlockSize, jxtaProbe: DefaultJXTAIdleProbe, jxtaWait: jxtaAnswerWait}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Service{pipes: ps, host: ps.Node().Host(), opts: o, listeners: map[string]*Listener{}, open: map[*Conn]struct{}{},
		jxtaPending: map[string]bool{}, jxtaConns: map[string]*jxtaStream{}}
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
	HostBacklog uint64 // the peer's host already held its share of the backlog
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	return Stats{
		Malformed:   s.malformed.Load(),
		NoListener:  s.refused[NoListener].Load(),
		Insecure:    s.refused[Insecure].Load(),
		BacklogFull: s.refused[Backlog].Load(),
		PeerBacklog: s.refused[PeerBacklog].Load(),
		HostBacklog: s.refused[HostBacklog].Load(),
	}
}

// Close closes every listener and stops accepting connections.
// Connections already made stay open; Listen and Dial fail with ErrClosed
// afterwards.
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

// Shutdown closes the service as Close does, then ends the writing of
// every socket still open, as CloseWrite does, so that the other side
// reads what was written, then io.EOF, even when the connection under it
// closes next (a Peer's Shutdown closes its node then): a stream still
// open for writing is reset by that close, which discards what the other
// side had not read yet. On QUIC, whose connection close discards what a
// stream's reader had not taken, only a reader already waiting gets it
// (as node.Node.Shutdown says); close such sockets first, after reading
// the other side's end. It waits for a Write in progress on each until
// ctx ends, and then leaves that socket as it is, reporting it. The
// libp2p sockets stay open for reading. A JXTA socket's CloseWrite waits
// until the other side has acknowledged every block, and ends its reading
// too (JXTA has no half-close): Shutdown ends them all at once and waits
// for them, until ctx ends, reporting those whose blocks may not have
// arrived.
func (s *Service) Shutdown(ctx context.Context) error {
	s.Close()
	s.mu.Lock()
	open := make([]*Conn, 0, len(s.open))
	for c := range s.open {
		open = append(open, c)
	}
	s.mu.Unlock()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range open {
		wg.Go(func() {
			if err := c.shutdown(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return joinerr.Join(errs...)
}

// handOut records c, a socket handed to the application, as open until
// it is closed or reset, for Shutdown.
func (s *Service) handOut(c *Conn) *Conn {
	c.owner = s
	s.mu.Lock()
	s.open[c] = struct{}{}
	s.mu.Unlock()
	return c
}

// forget drops c from the open sockets.
func (s *Service) forget(c *Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Listener accepts socket connections on a pipe.
type Listener struct {
	svc     *Service
	adv     *adv.PipeAdvertisement
	key     string
	backlog chan backlogged
	slots   chan struct{} // one per connection or request not yet accepted
	release func()

	mu      sync.Mutex // orders enqueueing against Close
	closed  bool
	done    chan struct{}
	pending map[string]int       // places in the backlog, by peer (place.who)
	hosts   map[netip.Prefix]int // places in the backlog, by host (place.host)
	// What Accept took from the backlog and has not returned, each still
	// holding its place (accept.go).
	taken     []*takenEntry
	answering map[netip.Prefix]bool // hosts with a JXTA answer being sent
	changed   chan struct{}         // closed and replaced when taken changes
	answers   sync.WaitGroup        // JXTA answers being sent
}

var _ net.Listener = (*Listener)(nil)

// Listen binds a on this peer and accepts connections to it. The pipe
// must be unicast or secure.
func (s *Service) Listen(a *adv.PipeAdvertisement) (*Listener, error) {
	if a != nil && a.Type == adv.Propagate {
		return nil, fmt.Errorf("%w: sockets need a unicast or secure pipe, not %s", pipe.ErrWrongType, a.Type)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("%w: socket service", ErrClosed)
	}
	release, err := s.pipes.Announce(a, Role)
	if err != nil {
		return nil, err
	}
	l := &Listener{svc: s, adv: a, key: pipe.Key(a.ID), backlog: make(chan backlogged, s.opts.backlog), slots: make(chan struct{}, s.opts.backlog), done: make(chan struct{}), release: release, pending: map[string]int{}, hosts: map[netip.Prefix]int{}}
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

// enqueue hands a connection or request to Accept, whose place in the
// backlog (slots) the caller holds; false if the listener closed
// meanwhile.
func (l *Listener) enqueue(b backlogged) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.backlog <- b // never blocks: a place is reserved
	return true
}

// share is how many places in the backlog one peer, or one host, may
// hold.
func (l *Listener) share() int { return max(1, cap(l.slots)/4) }

// reserve takes a place in the backlog for at, within its peer's share
// and its host's; else why says which bound refused it.
func (l *Listener) reserve(at place) (why byte, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.pending[at.who] >= l.share():
		return PeerBacklog, false
	case l.hosts[at.host] >= l.share():
		return HostBacklog, false
	}
	select {
	case l.slots <- struct{}{}:
	default:
		return Backlog, false
	}
	l.pending[at.who]++
	l.hosts[at.host]++
	return Accepted, true
}

// unreserve gives back a place reserve took.
func (l *Listener) unreserve(at place) {
	l.mu.Lock()
	if l.pending[at.who]--; l.pending[at.who] <= 0 {
		delete(l.pending, at.who)
	}
	if l.hosts[at.host]--; l.hosts[at.host] <= 0 {
		delete(l.hosts, at.host)
	}
	l.mu.Unlock()
	<-l.slots
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
	// handshakes cannot both be promised the last one.
	at := place{who: "p2p:" + st.Conn().RemotePeer().String()}
	at.host, _ = hostkey.FromMultiaddr(st.Conn().RemoteMultiaddr())
	if why, ok := l.reserve(at); !ok {
		refuse(why)
		return
	}
	if _, err := st.Write([]byte{Accepted}); err != nil {
		l.unreserve(at)
		st.Reset()
		return
	}
	st.SetDeadline(time.Time{})
	if !l.enqueue(backlogged{c: newConn(l.svc, st, l.adv, br), at: at}) {
		l.unreserve(at)
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
// input (see pipe.ToPeers for naming the peer); concurrent Dials to the
// same pipe and peers share one resolution (pipe.Service.Resolve). It
// fails with pipe.ErrNotResolved when no listener is found and ErrRefused
// when the peer refuses, which includes resetting the stream before
// answering: the peer's stream limits did, most likely because this peer
// already holds as many socket streams on it as it allows one peer
// (node.MaxSocketStreamsPerPeer; node.WithSocketStreamsPerPeer raises
// it).
func (s *Service) Dial(ctx context.Context, a *adv.PipeAdvertisement, opts ...pipe.ResolveOption) (*Conn, error) {
	if a != nil && a.Type == adv.Propagate {
		return nil, fmt.Errorf("%w: sockets need a unicast or secure pipe, not %s", pipe.ErrWrongType, a.Type)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("%w: socket service", ErrClosed)
	}
	if targets, err := pipe.JXTATargets(opts...); err != nil {
		return nil, err
	} else if len(targets) > 0 && a != nil {
		c, err := s.dialJXTA(ctx, a, targets)
		if err != nil {
			return nil, err
		}
		return s.handOut(c), nil
	}
	p, err := s.pipes.Resolve(ctx, a, Role, opts...)
	if err != nil {
		return nil, err
	}
	st, err := s.host.NewStream(network.WithAllowLimitedConn(ctx, "socket"), p, Protocol)
	if err != nil {
		if r := resetRefusal(p, err); r != nil {
			return nil, r
		}
		if errors.Is(err, network.ErrResourceLimitExceeded) {
			if s.host.Network().Connectedness(p) != network.Connected {
				return nil, fmt.Errorf("socket: connecting to %s: refused by this node's own resource limits: %w", p, err)
			}
			return nil, fmt.Errorf("socket: connecting to %s: refused by this node's own resource limits "+
				"(it probably holds as many socket streams to that peer as they allow; node.WithSocketStreamsPerPeer raises them): %w", p, err)
		}
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
		return nil, handshakeError(p, err)
	}
	var ans [1]byte
	_, err = io.ReadFull(st, ans[:])
	if !stop() { // ctx ended: the stream is being reset
		return nil, ctx.Err()
	}
	if err != nil {
		st.Reset()
		return nil, handshakeError(p, err)
	}
	if ans[0] != Accepted {
		st.Reset()
		why := map[byte]string{NoListener: "no listener", Backlog: "backlog full", Insecure: "insecure connection",
			PeerBacklog: "this peer's share of the backlog is full", HostBacklog: "this host's share of the backlog is full"}[ans[0]]
		return nil, fmt.Errorf("%w by %s: %s", ErrRefused, p, why)
	}
	st.SetDeadline(time.Time{})
	return s.handOut(newConn(s, st, a, nil)), nil
}

// handshakeError reports a failure to write the handshake to p or to
// read its answer.
func handshakeError(p peer.ID, err error) error {
	if r := resetRefusal(p, err); r != nil {
		return r
	}
	return fmt.Errorf("socket: handshake with %s: %w", p, err)
}

// resetRefusal reports p's reset of a socket stream before its answer as
// the refusal it is, or returns nil for any other failure (a timeout, a
// connection that closed, a protocol p does not speak). A listener
// answers every well-formed handshake that arrives in time, so a stream
// p resets before answering was cut by p's stream limits or carried a
// handshake p could not take: go-libp2p's resource manager resets a
// stream over its limits as its protocol is negotiated, with
// network.StreamResourceLimitExceeded (said as such), a listener resets
// a malformed or late handshake without a code, as go-libp2p releases
// before stream error codes reset everything (both said). The node
// bounds the socket streams one peer holds (node.MaxSocketStreamsPerPeer),
// which a client's pool of sockets meets first.
func resetRefusal(p peer.ID, err error) error {
	var se *network.StreamError
	if !errors.As(err, &se) || !se.Remote {
		return nil
	}
	var why string
	switch se.ErrorCode {
	case network.StreamResourceLimitExceeded:
		why = "reset by its resource limits before answering: " +
			"this peer probably holds as many socket streams there as it allows (node.MaxSocketStreamsPerPeer)"
	case network.StreamNoError:
		why = "reset before answering: its stream limits (node.MaxSocketStreamsPerPeer), " +
			"or it found the handshake malformed or late"
	default:
		return nil
	}
	return &refusalError{msg: fmt.Sprintf("%v by %s: %s", ErrRefused, p, why), err: err}
}

// refusalError is a refusal the peer gave by resetting the stream: it
// matches ErrRefused and the stream's error (network.ErrReset,
// *network.StreamError).
type refusalError struct {
	msg string
	err error
}

func (e *refusalError) Error() string   { return e.msg }
func (e *refusalError) Unwrap() []error { return []error{ErrRefused, e.err} }

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
