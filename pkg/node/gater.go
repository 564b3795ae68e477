package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/x/rate"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
)

// MaxHandshakesPerHost bounds the inbound connections one remote host
// (an IPv4 address, an IPv6 /64) may have between accept and the end of
// their security handshake; more are closed at once, counted
// (GateStats.HandshakesRefused). It is go-libp2p's own per-IP connection
// limit, itself the number of dials a go-libp2p host makes to one peer at
// once, so an honest host never has more in progress. Without it a host's
// silent sockets (no handshake, no identity) held every slot of the
// resource manager's transient scope until their handshakes timed out.
//
// Loopback (127.0.0.0/8, ::1) is exempt, as from go-libp2p's per-IP
// limit: processes on the machine itself are not strangers (a lab swarm
// runs dozens of nodes on 127.0.0.1 that dial one another at once, and
// would trip it), and they could do worse than hold sockets.
//
// Hosts together may handshake on every inbound connection slot. When
// the resource manager has none left for a new inbound connection, the
// connection displaces a TCP or WebSocket handshake in progress, closed
// at once and counted (GateStats.HandshakesDisplaced): one whose peer
// has sent nothing yet if there is one (an honest peer speaks at once,
// a silent socket never), else any; of those, the oldest of the host
// with the most in progress, the new connection counted with its
// host's (loopback included). Silent sockets from many hosts then no
// longer keep every other peer out until they time out (15 s), nor
// displace honest peers' handshakes, however many of those one address
// (a NAT) holds. Sockets that send a few bytes and stall are displaced
// by the host rule alone: to displace an honest peer's handshake (one
// in progress from its host), every other host must hold at most one,
// and each displacement takes a socket from a host holding none, so
// the sockets must come from as many hosts as there are slots for
// handshakes (every inbound connection slot when no peer is connected:
// 252 on a 24 GiB machine) and keep coming from fresh ones, a slot's
// worth before the honest handshake ends (a few round trips), while
// go-libp2p's rate limit (connRate, charged once per connection) lets
// one IPv4 address open a connection every 5 s after a burst of 16.
// Nothing waits for it: a displacement happens only when the connection
// would be refused otherwise.
const MaxHandshakesPerHost = 8

// ErrHandshakesPerHost is the resource manager's refusal of a connection
// from a host with MaxHandshakesPerHost handshakes in progress.
var ErrHandshakesPerHost = errors.New("node: too many handshakes in progress from one host")

// GateStats counts connections and streams the node refused to strangers.
type GateStats struct {
	// RelayedRefused: connections relayed to this node (circuit relay
	// STOP) by a peer it holds no reservation with (see Reserve).
	RelayedRefused uint64
	// HandshakesRefused: inbound connections from a host with
	// MaxHandshakesPerHost handshakes in progress.
	HandshakesRefused uint64
	// HandshakesDisplaced: inbound connections closed during their
	// security handshake to let a newer one in, every slot for
	// handshakes being taken (see MaxHandshakesPerHost).
	HandshakesDisplaced uint64
	// ConnsRefused: connections the resource manager refused over its
	// limits (system, transient, go-libp2p's connections and rate per IP
	// address, ErrConnRate, or per peer, this one when the handshake has
	// named the peer), counted once, when refused in the end (not one let
	// in by a displacement).
	ConnsRefused uint64
	// StreamsRefused: streams the resource manager refused over its
	// limits (per peer, per protocol, per service; see limits).
	StreamsRefused uint64
	// MemoryRefused: memory reservations the resource manager refused
	// over its limits (per connection, per peer, per stream, the node's),
	// each counted once, at the scope it was asked of. What a refusal
	// does depends on what asked:
	//   - a yamux stream's first receive window (256 KiB, reserved in its
	//     peer's scope, so against the peer's and the node's limits):
	//     an inbound stream is reset as its first frame is read, before
	//     yamux sees it; for one the node opens, the open fails; either
	//     way the connection and its other streams go on (go-yamux
	//     itself would end the connection for an inbound stream: the
	//     node reserves the window ahead of it, see yamuxspan.go);
	//   - a yamux or QUIC receive window's growth (a stream read fast
	//     doubles its window, up to 16 MiB): the window stays as it is,
	//     the stream goes on at that rate, nothing lost;
	//   - a protocol's buffer in a stream's scope (identify, ping, relay,
	//     hole punching): that protocol resets the stream.
	MemoryRefused uint64
	// FramesReset: yamux streams reset for the data frames they buffer
	// unread: more than their bytes and one receive window would cost
	// beyond those bytes (go-yamux holds each frame apart; see
	// yamuxframes.go). Frames of 32 bytes or more never are.
	FramesReset uint64
}

// GateStats returns what the node has refused so far.
func (n *Node) GateStats() GateStats {
	return GateStats{
		RelayedRefused:      n.gate.relayedRefused.Load(),
		HandshakesRefused:   n.gate.handshakesRefused.Load(),
		HandshakesDisplaced: n.gate.handshakesDisplaced.Load(),
		ConnsRefused:        n.gate.refusals.conns.Load(),
		StreamsRefused:      n.gate.refusals.streams.Load(),
		MemoryRefused:       n.gate.memoryRefused.Load(),
		FramesReset:         n.gate.framesReset.Load(),
	}
}

// Reserve reserves a slot on a circuit relay v2 for this node
// (client.Reserve) and from then on, until the reservation expires,
// accepts connections the relay relays to it. A relayed connection from
// any other peer is refused (GateStats.RelayedRefused): a relay sends
// STOP only for a peer holding a reservation with it, so only a stranger
// sends one otherwise. Call it again before the reservation's Expiration
// to keep it. Until then (at most maxRelayProtection, an hour, per
// Reserve), and while the node stays connected to the relay, the
// connection is protected from the connection manager's trims (tag
// RelayReservationTag): the relay drops a reservation when its holder's
// connection closes, so a trim would leave this node unreachable through
// it until the next Reserve.
func (n *Node) Reserve(ctx context.Context, relay peer.AddrInfo) (*client.Reservation, error) {
	r, err := client.Reserve(ctx, n.host, relay)
	if err != nil {
		return nil, fmt.Errorf("node: reserving on relay %s: %w", relay.ID, err)
	}
	n.gate.reserved(relay.ID, r.Expiration)
	return r, nil
}

// RelayReservationTag is the connection manager's protection tag on the
// relays this node holds a reservation with (see Reserve).
const RelayReservationTag = "p2pmsg-relay-reservation"

// gate is the node's connection gater and counts its refusals.
type gate struct {
	mu     sync.Mutex
	relays map[peer.ID]time.Time // relay → when our reservation on it expires
	now    func() time.Time
	// cm protects the connections to relays while reservations last;
	// expiry unprotects a relay not reserved again (its timer).
	cm     connmgr.ConnManager
	expiry map[peer.ID]protection
	closed bool
	// accepted hands the connections let in to the handshake limiter,
	// which may displace them while they handshake.
	accepted func(manet.Conn)

	relayedRefused      atomic.Uint64
	handshakesRefused   atomic.Uint64
	handshakesDisplaced atomic.Uint64
	memoryRefused       atomic.Uint64
	framesReset         atomic.Uint64
	refusals            refusals
	// yamuxSpans counts the yamux memory spans begun and not ended
	// (yamuxScope), for tests.
	yamuxSpans atomic.Int64
}

func newGate() *gate {
	return &gate{relays: map[peer.ID]time.Time{}, now: time.Now, expiry: map[peer.ID]protection{}}
}

// protection is a relay's protection from trims: its end, and the timer
// that ends it.
type protection struct {
	until time.Time
	timer *time.Timer
}

func (g *gate) reserved(relay peer.ID, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	now := g.now()
	for p, t := range g.relays { // drop expired ones: the map holds live reservations only
		if !t.After(now) {
			delete(g.relays, p)
		}
	}
	g.relays[relay] = until
	if g.cm == nil {
		return
	}
	g.cm.Protect(relay, RelayReservationTag)
	if p, ok := g.expiry[relay]; ok {
		p.timer.Stop()
	}
	d := min(until.Sub(now), maxRelayProtection)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.expiry[relay].timer == t { // not reserved again since
			delete(g.expiry, relay)
			g.cm.Unprotect(relay, RelayReservationTag)
		}
	})
	g.expiry[relay] = protection{until: now.Add(d), timer: t}
}

// maxRelayProtection bounds how long one Reserve protects the connection
// to its relay: go-libp2p's relay grants a reservation for an hour
// (relay.DefaultResources().ReservationTTL) and a client keeps it by
// reserving again before then, so a relay that grants more (its choice:
// a hundred years, say) is not protected for longer between two Reserves.
const maxRelayProtection = time.Hour

// disconnected unprotects relay once this node has no connection to it
// left: the relay dropped the reservation with the connection, so
// nothing is to be kept (a later connection to it is not protected).
func (g *gate) disconnected(relay peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.expiry[relay]; ok {
		p.timer.Stop()
		delete(g.expiry, relay)
		g.cm.Unprotect(relay, RelayReservationTag)
	}
}

// close stops the expiry timers (the node is closing).
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for p, pr := range g.expiry {
		pr.timer.Stop()
		delete(g.expiry, p)
	}
}

func (g *gate) holdsReservation(relay peer.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.relays[relay]
	return ok && t.After(g.now())
}

// relayOf returns the relay of a relayed address (…/p2p/<relay>/p2p-circuit).
func relayOf(a ma.Multiaddr) (peer.ID, bool) {
	var relay peer.ID
	for _, c := range a {
		switch c.Code() {
		case ma.P_P2P:
			id, err := peer.IDFromBytes(c.RawValue())
			if err != nil {
				return "", false
			}
			relay = id
		case ma.P_CIRCUIT:
			return relay, relay != ""
		}
	}
	return "", false
}

func isRelayed(a ma.Multiaddr) bool {
	for _, c := range a {
		if c.Code() == ma.P_CIRCUIT {
			return true
		}
	}
	return false
}

// InterceptAccept refuses a relayed connection unless its relay is one
// this node holds a reservation with. The relay client hands the
// connection a STOP made to the listener, which asks the gater before
// the resource manager opens its transient scope.
func (g *gate) InterceptAccept(c network.ConnMultiaddrs) bool {
	a := c.RemoteMultiaddr()
	if !isRelayed(a) {
		if mc, ok := c.(manet.Conn); ok && g.accepted != nil {
			g.accepted(mc)
		}
		return true
	}
	if relay, ok := relayOf(a); ok && g.holdsReservation(relay) {
		return true
	}
	g.relayedRefused.Add(1)
	return false
}

func (g *gate) InterceptPeerDial(peer.ID) bool               { return true }
func (g *gate) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }
func (g *gate) InterceptSecured(network.Direction, peer.ID, network.ConnMultiaddrs) bool {
	return true
}
func (g *gate) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// handshakeLimiter wraps the resource manager to count the inbound
// connections of each remote host from the moment the resource manager
// sees them (right after accept) until the security handshake names
// their peer or they close, and refuses those beyond
// MaxHandshakesPerHost. Relayed connections are not counted: only
// relays this node holds a reservation with get them past the gater.
//
// When the resource manager refuses an inbound connection over its
// connection limits (the transient scope's, which every handshake holds
// a slot of, or the node's), the connection displaces a handshake in
// progress (see displace) and asks again, so that silent sockets from
// many hosts cannot keep every honest peer out until they time out. It
// counts the connections refused in the end (GateStats.ConnsRefused), so
// that one let in by a displacement is not counted refused.
type handshakeLimiter struct {
	network.ResourceManager
	max           int
	limitLoopback bool // tests only: loopback is exempt otherwise
	// rate charges each connection's address once (connRate); the
	// resource manager charges none.
	rate         *rate.Limiter
	refused      *atomic.Uint64
	displaced    *atomic.Uint64
	connsRefused *atomic.Uint64

	mu         sync.Mutex
	inProgress map[netip.Prefix]int
	// accepted holds the connections the gater let in (InterceptAccept),
	// by remote address, until OpenConnection takes them: the listener
	// calls one right after the other, in the same goroutine, so it
	// holds at most one per listener accepting at that moment.
	accepted map[string][]io.Closer
	// queues holds the displaceable handshakes in progress by host,
	// oldest first: those whose connection the gater handed over.
	queues map[netip.Prefix][]*handshakeScope
	seq    uint64
}

func newHandshakeLimiter(rm network.ResourceManager, r *rate.Limiter, limitLoopback bool, g *gate) *handshakeLimiter {
	return &handshakeLimiter{ResourceManager: rm, max: MaxHandshakesPerHost, limitLoopback: limitLoopback, rate: r,
		refused: &g.handshakesRefused, displaced: &g.handshakesDisplaced, connsRefused: &g.refusals.conns,
		inProgress: map[netip.Prefix]int{}, accepted: map[string][]io.Closer{}, queues: map[netip.Prefix][]*handshakeScope{}}
}

// GetConnLimit passes go-libp2p's check of the connection manager's
// limits against the resource manager's through.
func (l *handshakeLimiter) GetConnLimit() int {
	if g, ok := l.ResourceManager.(interface{ GetConnLimit() int }); ok {
		return g.GetConnLimit()
	}
	return 0
}

// accept records a connection the gater let in, for the OpenConnection
// that follows (a TCP or WebSocket connection: the other transports
// open the scope themselves, and hand the gater no connection of ours to
// close).
func (l *handshakeLimiter) accept(c manet.Conn) {
	k := c.RemoteMultiaddr().String()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accepted[k] = append(l.accepted[k], c)
}

// takeAccepted returns the connection accept recorded from endpoint, or
// nil.
func (l *handshakeLimiter) takeAccepted(endpoint ma.Multiaddr) io.Closer {
	k := endpoint.String()
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.accepted[k]
	if len(cs) == 0 {
		return nil
	}
	if len(cs) == 1 {
		delete(l.accepted, k)
	} else {
		l.accepted[k] = cs[1:]
	}
	return cs[0]
}

func (l *handshakeLimiter) OpenConnection(dir network.Direction, usefd bool, endpoint ma.Multiaddr) (network.ConnManagementScope, error) {
	if dir != network.DirInbound || isRelayed(endpoint) {
		if err := allowConn(l.rate, endpoint); err != nil {
			l.connsRefused.Add(1)
			return nil, err
		}
		s, err := l.ResourceManager.OpenConnection(dir, usefd, endpoint)
		if err != nil {
			l.connsRefused.Add(1)
		}
		return s, err
	}
	conn := l.takeAccepted(endpoint)
	h, ok := hostkey.FromMultiaddr(endpoint)
	limited := ok && (!h.Addr().IsLoopback() || l.limitLoopback)
	if limited {
		l.mu.Lock()
		if l.inProgress[h] >= l.max {
			l.mu.Unlock()
			l.refused.Add(1)
			return nil, fmt.Errorf("%w: %v", ErrHandshakesPerHost, h)
		}
		l.inProgress[h]++
		l.mu.Unlock()
	}
	// Charged once: the second ask after a displacement is the same
	// connection's.
	err := allowConn(l.rate, endpoint)
	var s network.ConnManagementScope
	if err == nil {
		s, err = l.ResourceManager.OpenConnection(dir, usefd, endpoint)
		if errors.Is(err, network.ErrResourceLimitExceeded) && l.displace(h, ok) {
			s, err = l.ResourceManager.OpenConnection(dir, usefd, endpoint)
		}
	}
	hs := &handshakeScope{ConnManagementScope: s, l: l, host: h, conn: conn}
	hs.release = sync.OnceFunc(func() {
		if limited {
			l.release(h)
		}
	})
	if err != nil {
		hs.release()
		l.connsRefused.Add(1)
		return nil, err
	}
	if ok && conn != nil {
		l.mu.Lock()
		l.seq++
		hs.seq, hs.queued = l.seq, true
		l.queues[h] = append(l.queues[h], hs)
		l.mu.Unlock()
	}
	return hs, nil
}

// displace closes a handshake in progress to free its slot for a new
// connection from host (if known): a silent one if any (its peer has
// sent nothing yet), else any; of those, the oldest of the host with the
// most in progress, the new connection counted with its host's (and as
// silent: it has had no time to speak), so that a host at the top
// displaces its own (on a tie, the oldest handshake's host).
//
// An honest peer speaks at once (its multistream header, then its
// security handshake's first message), a silent socket never: while
// silent sockets hold slots, only they are displaced, whatever their
// hosts, so that honest peers handshaking from one address (behind one
// NAT) are not displaced first for holding the most. Once every
// handshake has spoken (an attacker's sockets can send a header too),
// or where it cannot be told (a WebSocket connection, a system other
// than Linux: counted as having spoken), the host rule alone decides:
// to displace an honest peer's handshake (one in progress from its
// host), every other host must hold at most one, and each displacement
// takes a connection from a host holding none: one host's sockets, or a
// few hosts', only displace one another. It reports whether it
// displaced one (none are in progress when established connections fill
// the slots, or only handshakes it cannot close).
func (l *handshakeLimiter) displace(host netip.Prefix, known bool) bool {
	l.mu.Lock()
	victim := l.victim(host, known, true)
	if victim == nil {
		victim = l.victim(host, known, false)
	}
	if victim == nil {
		l.mu.Unlock()
		return false
	}
	l.dequeue(victim)
	victim.displaced = true
	l.mu.Unlock()
	victim.conn.Close()
	// Ends its scope now, rather than when its handshake fails on the
	// closed connection, so the slot is free for the connection asking.
	victim.ConnManagementScope.Done()
	victim.release()
	l.displaced.Add(1)
	return true
}

// victim is the handshake displace closes, among the silent ones only
// if silent, or nil; l.mu is held.
func (l *handshakeLimiter) victim(host netip.Prefix, known, silent bool) *handshakeScope {
	var victim *handshakeScope
	victimHeld := 0
	for h, q := range l.queues {
		held, oldest := 0, (*handshakeScope)(nil)
		for _, hs := range q {
			if silent && hs.spoke() {
				continue
			}
			if held++; oldest == nil {
				oldest = hs
			}
		}
		if oldest == nil {
			continue
		}
		if known && h == host {
			held++
		}
		if victim == nil || held > victimHeld || held == victimHeld && oldest.seq < victim.seq {
			victim, victimHeld = oldest, held
		}
	}
	return victim
}

// dequeue removes s from its host's queue, if there; l.mu is held.
func (l *handshakeLimiter) dequeue(s *handshakeScope) {
	if !s.queued {
		return
	}
	s.queued = false
	q := l.queues[s.host]
	if i := slices.Index(q, s); i >= 0 {
		q = slices.Delete(q, i, i+1) // clears the vacated element
	}
	if len(q) == 0 {
		delete(l.queues, s.host)
	} else {
		l.queues[s.host] = q
	}
}

func (l *handshakeLimiter) release(h netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inProgress[h]--; l.inProgress[h] <= 0 {
		delete(l.inProgress, h)
	}
}

// ErrHandshakeDisplaced fails the end of a handshake that was displaced
// (its connection closed) to let another connection in.
var ErrHandshakeDisplaced = errors.New("node: handshake displaced by a newer connection")

// handshakeScope ends its host's handshake at SetPeer (the handshake
// named the peer) or Done (the connection closed), or when displaced.
type handshakeScope struct {
	network.ConnManagementScope
	l       *handshakeLimiter
	host    netip.Prefix
	conn    io.Closer // nil: not displaceable
	release func()    // ends the handshake for its host's count

	// guarded by l.mu
	seq       uint64
	queued    bool
	displaced bool
	spoken    bool // its peer has sent something, or that cannot be told
}

// spoke reports whether s's peer has sent anything yet, or whether that
// cannot be told; l.mu is held.
func (s *handshakeScope) spoke() bool {
	if !s.spoken {
		sent, known := heard(s.conn)
		s.spoken = sent || !known
	}
	return s.spoken
}

func (s *handshakeScope) SetPeer(p peer.ID) error {
	s.l.mu.Lock()
	s.l.dequeue(s)
	displaced := s.displaced
	s.l.mu.Unlock()
	s.release()
	if displaced {
		return ErrHandshakeDisplaced
	}
	return s.ConnManagementScope.SetPeer(p)
}

func (s *handshakeScope) Done() {
	s.l.mu.Lock()
	s.l.dequeue(s)
	s.l.mu.Unlock()
	s.ConnManagementScope.Done()
	s.release()
}
