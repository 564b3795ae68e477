package jxtatcp

import (
	"context"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// Routes: where jxta:// sends to a peer go.
//
// A welcome names a peer ID nothing authenticates, and a CBJX signature
// carries no nonce, so any peer can claim to be H on a connection it
// opens, and back the claim with a frame H signed (for it) replayed. An
// address this end dialled and found H at cannot be had that way: it is
// H's route, and jxta://H is sent over a connection dialled there
// (connToRoute), or, if nothing listens there, over another connection
// the application sent to whose welcome names H (H moved, and it sent to
// H's new address), never over one a claimant opened. A route is given
// (AddRoute) or learned from the application's tcp:// sends
// (learnRoute): the first address it sent to and found H at while no
// other connection served H; a later address answering as H does not
// replace it (one of them lies, and the first was found before anyone
// else claimed H). A peer with no route is exposed to a claimant that
// connects while it has no connection here (package doc).

// maxRoutes bounds the routes remembered.
const maxRoutes = 4096

// AddRoute tells the transport that peer is reached at addr,
// tcp://host:port (JXSE's RouteController.addRoute): jxta:// sends to it
// go to a connection dialled there, never to one opened by a peer that
// claims its identity (see connToRoute). It replaces the peer's route,
// given or learned from sends to tcp:// addresses.
func (t *Transport) AddRoute(peer id.ID, addr string) error {
	proto, hostport, _, _, err := splitAddress(addr)
	if err != nil || proto != "tcp" {
		return fmt.Errorf("%w: route %q: want tcp://host:port", ErrAddress, addr)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setRouteLocked(peer, hostport, true)
	return nil
}

// setRouteLocked sets p's route to hostport. With maxRoutes remembered, a route for
// a new peer is dropped unless it is given (given): then another, any,
// makes room. Learned routes are never what makes room for one another:
// a flood of them (the application's sends to addresses that answer as
// new peers each time) would otherwise unpin the peers learned first.
func (t *Transport) setRouteLocked(p id.ID, hostport string, given bool) {
	if _, routed := t.routes[p]; !routed && len(t.routes) >= maxRoutes {
		if !given {
			return
		}
		for q := range t.routes {
			delete(t.routes, q)
			break
		}
	}
	t.routes[p] = hostport
}

// learnRoute learns from c, a connection the application's tcp:// send
// is to go over: the address c was dialled at becomes the route of the
// peer p its welcome names if p has no route and no other connection
// serves it. Not when another connection already serves p: a welcome
// claiming an identity already talking to this end is that peer's word
// against the other's (TestDialledWelcomeKeepsTheRoute). Dials this
// transport makes itself (to a route) teach nothing: a peer can have it
// make them.
func (t *Transport) learnRoute(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := c.claimed
	if _, open := t.conns[c]; !open || c.hostport == "" {
		return
	}
	c.asked = true
	if p.IsZero() {
		return
	}
	if _, routed := t.routes[p]; routed {
		return
	}
	if served := t.byPeer[p]; served == nil || served == c {
		// Another peer's route to this address is stale: it answers as
		// p now (as connToRoute finds on that peer's next send). A peer
		// restarted on its port with a new identity, as JXSE's are
		// unless configured otherwise, so leaves one route, not one per
		// identity it had.
		for q, r := range t.routes {
			if r == c.hostport {
				delete(t.routes, q)
			}
		}
		t.setRouteLocked(p, c.hostport, false)
		t.bindPeerLocked(c, p)
	}
}

// rankLocked is how well c serves p, for bindPeer: 2 when c was dialled
// at p's route and its welcome names p, 1 when only its welcome names p,
// 0 when p signed frames on it but its welcome named someone else.
func (t *Transport) rankLocked(c *conn, p id.ID) int {
	if c.claimed != p {
		return 0
	}
	if r, ok := t.routes[p]; ok && c.hostport != "" && c.hostport == r {
		return 2
	}
	return 1
}

// connToRoute returns the connection for a jxta:// send (to) to p, whose
// route is addr: one dialled there (dialling if needed) if it answers as
// p; if nothing listens there (the dial refused: p moved), another that
// the application sent to and whose welcome names p (it sent to p's new
// address); never one a claimant of p opened, which may be a peer that
// replayed p's frames while p is away. Otherwise the send fails
// (ErrNoRoute, naming addr): a dial that fails any other way (this end's
// slots full, p's full, a timeout) may be a hostile peer's doing, and p
// still there. If the peer at addr names another peer in its welcome,
// the route is stale (p moved away, another is there): it is dropped,
// and the send goes where it would have without it.
func (t *Transport) connToRoute(ctx context.Context, p id.ID, addr, to string) (*conn, error) {
	rc, err := t.connTo(ctx, addr)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if c := t.askedClaimantLocked(p); c != nil && refused(err) {
			return c, nil
		}
		return nil, fmt.Errorf("%w: %s at tcp://%s, its route: %w", ErrNoRoute, to, addr, err)
	}
	if rc.claimed.IsZero() || rc.claimed == p {
		t.bindPeerLocked(rc, p)
		return rc, nil
	}
	if t.routes[p] == addr {
		delete(t.routes, p)
	}
	if c := t.byPeer[p]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: %s (tcp://%s, its route, now answers as %s)", ErrNoRoute, to, addr, rc.claimed)
}

// askedClaimantLocked returns an open connection the application sent
// to by tcp:// whose welcome names p, preferring the one serving p, or
// nil.
func (t *Transport) askedClaimantLocked(p id.ID) *conn {
	if c := t.byPeer[p]; c != nil && c.asked && c.claimed == p {
		return c
	}
	for c := range t.conns {
		if c.asked && c.claimed == p {
			return c
		}
	}
	return nil
}
