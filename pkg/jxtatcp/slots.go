package jxtatcp

import (
	"cmp"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
)

// Connection slots.
//
// WithMaxConns bounds the connections open in both directions. A peer's
// welcome names a peer ID nothing authenticates, so connections are
// shared out by the remote host they come from (hostOf): one host opens
// at most a quarter of the slots, and connections accepted take at most
// three quarters, so a quarter is always left for this peer's own
// dials. JXTA has no keep-alives and JXSE never closes an idle
// connection, so slots taken once would be taken for ever: when a new
// connection finds none free, the connection idle longest among those
// that carried no frame for evictIdle is closed for it (Stats.Evicted) —
// one of its own host's when that host is at its share, else one of the
// host holding the most accepted connections, if it holds at least as
// many as the new connection's host then will. A connection in a frame
// (read, handled or written) or in its welcome is never closed for
// another. A connection closed for another is told so (its write side
// is shut) and its reader woken: a frame whose first byte had arrived,
// sent before the peer could know, is read and handled before the
// connection closes, as JXTA unicast has no acknowledgement; bytes
// arriving behind it are counted lost (Stats.EvictedUnread). An evicted
// peer's next send dials again, as JXSE's does; this
// transport remembers where to dial the peer of an evicted connection the
// application had sent to (the address it dialled, as the peer's route;
// routes.go). It does not for an accepted one, nor for the other peers
// that signed frames on a dialled one: the address a welcome announces
// is the peer's word, and a peer that replayed another's signed frame
// (CBJX has no nonce) would have that peer's messages routed to itself
// for good.

// evictIdle is how long a connection must have carried no frame before
// it may be closed to make room for another: twice the idle probe of
// this module's JXTA sockets (socket.DefaultJXTAIdleProbe), so that a
// connection under an open socket whose reader waits is never taken for
// idle; a peer whose connection was closed after half a minute of silence
// is between exchanges, and its next message costs it one dial.
const evictIdle = 30 * time.Second

// evicted is conn.frames once a connection is being closed to make room:
// no frame begins on it after that.
const evicted = -1

// errEvicted: a frame could not begin on a connection that was closed to
// make room for another; nothing of it was written.
var errEvicted = errors.New("jxtatcp: connection closed to make room for another")

// hostOf returns the host a connection's remote address is counted
// under (internal/hostkey: its IPv4 address, or its IPv6 /64), or for an
// address with no IP, the address itself.
func hostOf(a net.Addr) string {
	if p, ok := hostkey.FromNetAddr(a); ok {
		if p.Addr().Is4() {
			return p.Addr().String() // an IPv4 host is named by its address alone
		}
		return p.String()
	}
	if a != nil && a.String() != "" {
		return a.String()
	}
	return "?" // never "": budget.shedFor's "any host"
}

// hostShare is the connections one host may open: a quarter of the
// slots, at least one.
func hostShare(maxConns int) int { return max(1, maxConns/4) }

// inboundShare is the connections all peers together may open: all the
// slots but the quarter kept for this peer's dials.
func inboundShare(maxConns int) int { return maxConns - maxConns/4 }

// roomFor reports whether a new connection, accepted from host or (when
// not inbound) dialled, may open, and the connection to close for it, if
// one must be; that one is already marked evicted. Under t.mu.
func (t *Transport) roomFor(inbound bool, host string) (victim *conn, ok bool) {
	n := t.opts.maxConns
	switch {
	case inbound && t.hostConns[host] >= hostShare(n):
		victim = t.idlest(host, true, 0)
	case inbound && t.inbound >= inboundShare(n):
		// Only from a host holding at least as many as host will: else
		// an attacker keeping its own connections busy, from a few
		// hosts, would have every other host's idle one closed, one
		// after another.
		victim = t.idlest("", true, t.hostConns[host]+1)
	case len(t.conns)+t.pendingDials >= n:
		victim = t.idlest("", false, 0)
	default:
		return nil, true
	}
	return victim, victim != nil
}

// idlest marks evicted, and returns, the connection to close for a new
// one: of host's connections ("": any host's), accepted ones only if
// inboundOnly, of a host holding minHold accepted connections at least,
// one idle for evictIdle at least, of the host holding the most accepted
// connections, idle longest. Nil if there is none. Under t.mu.
func (t *Transport) idlest(host string, inboundOnly bool, minHold int) *conn {
	now := time.Now().UnixNano()
	var cands []*conn
	for c := range t.conns {
		if (host == "" || c.host == host) && (c.inbound || !inboundOnly) && (!c.inbound || t.hostConns[c.host] >= minHold) &&
			c.idle(now) >= t.opts.evictIdle {
			cands = append(cands, c)
		}
	}
	holds := func(c *conn) int {
		if c.inbound {
			return t.hostConns[c.host]
		}
		return 0
	}
	slices.SortFunc(cands, func(a, b *conn) int {
		return cmp.Or(cmp.Compare(holds(b), holds(a)), cmp.Compare(a.last.Load(), b.last.Load()))
	})
	for _, c := range cands {
		// A frame may have begun since idle looked.
		if c.frames.CompareAndSwap(0, evicted) {
			return c
		}
	}
	return nil
}

// add counts c as open. Under t.mu.
func (t *Transport) add(c *conn) {
	t.conns[c] = struct{}{}
	if c.inbound {
		t.inbound++
		t.hostConns[c.host]++
	}
}

// evictLocked takes c, which idlest marked, out of the tables and counts
// it; the caller evicts it once t.mu is released. Until its reader closes
// it, Close finds it in t.evicted. Under t.mu.
func (t *Transport) evictLocked(c *conn) {
	t.stats.evicted.Add(1)
	t.forgetLocked(c, true)
	t.evicted[c] = struct{}{}
}

// evict ends c, which idlest marked (no frame begins on it after that):
// it tells the peer, which closes its end and dials again when it next
// sends, and wakes c's reader, which reads a frame that had begun to
// arrive, then closes c (conn.next). Not under t.mu.
func (c *conn) evict() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.nc.SetReadDeadline(time.Unix(1, 0))
}

// closeEvicted closes c, evicted, after its last frame, counting bytes
// that arrived after it unread (Stats.EvictedUnread). On c's reader.
func (c *conn) closeEvicted() {
	if c.br.Buffered() > 0 || unreadBytes(c.nc) {
		c.lostToEviction()
	}
	c.close(errEvicted)
}

// lostToEviction counts, once, that c was closed to make room with bytes
// of a frame unread.
func (c *conn) lostToEviction() {
	if c.lost.CompareAndSwap(false, true) {
		c.t.stats.evictedUnread.Add(1)
	}
}

// idle returns how long c has carried no frame, at now (UnixNano);
// negative while a frame or the welcome is under way.
func (c *conn) idle(now int64) time.Duration {
	if c.frames.Load() != 0 {
		return -1
	}
	return time.Duration(now - c.last.Load())
}

// begin notes that a frame begins on c; false when c was evicted.
func (c *conn) begin() bool {
	for {
		n := c.frames.Load()
		if n < 0 {
			return false
		}
		if c.frames.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// end notes that a frame (or the welcome) ended on c.
func (c *conn) end() {
	c.last.Store(time.Now().UnixNano())
	c.frames.Add(-1)
}
