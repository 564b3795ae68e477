package jxtatcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// claimant is Z's listener, a peer the application sends to: the i-th
// connection dialled to it (from 0) gets a welcome naming name(i), then
// the bytes first(i), if first is set; it is closed at once if hangUp(i)
// is true, and otherwise, with busy set, carries a small signed frame
// every busy, so that it is never idle. What arrives on any connection
// is reported on got (the "study:text" element).
type claimant struct {
	addr string
	got  chan string
	stop func() // closes the listener and its connections
}

type claimantOpts struct {
	name   func(i int) string
	first  func(i int) []byte
	hangUp func(i int) bool
	// hangUpAfterFrame: hang up once a frame has been read (the sender
	// then had the connection, and learnt its route, before the end).
	hangUpAfterFrame bool
	busy             time.Duration
}

func listenClaimant(t *testing.T, o claimantOpts) *claimant {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &claimant{addr: "tcp://" + ln.Addr().String(), got: make(chan string, 64)}
	keep := signedFrame(t, otherIdent, "StudySvc/keepalive", message.Text("study", "k", "."))
	done := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	serve := func(i int, nc net.Conn) {
		defer wg.Done()
		defer nc.Close()
		br := bufio.NewReader(nc)
		if _, err := readWelcome(br); err != nil {
			return
		}
		var wmu sync.Mutex // the welcome and first, then keep-alives
		wmu.Lock()
		w := Welcome{Dest: "tcp://" + nc.RemoteAddr().String(), Public: cl.addr, Peer: o.name(i), Version: "1.1"}
		_, err := nc.Write(w.Append(nil))
		if b := []byte(nil); err == nil && o.first != nil {
			if b = o.first(i); b != nil {
				_, err = nc.Write(b)
			}
		}
		wmu.Unlock()
		if err != nil || o.hangUp != nil && o.hangUp(i) {
			return
		}
		if o.busy > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(o.busy)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					wmu.Lock()
					_, err := nc.Write(keep)
					wmu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		for {
			n, err := readFrameHeader(br, DefaultMaxMessageSize)
			if err != nil {
				return
			}
			b := make([]byte, n)
			if _, err := readFull(br, b); err != nil || o.hangUpAfterFrame {
				return
			}
			m, err := wire.Decode(bytes.NewReader(b))
			if err != nil {
				continue
			}
			if e, ok := m.Get("study", "text"); ok {
				select {
				case cl.got <- string(e.Data):
				default:
				}
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go serve(i, nc)
		}
	}()
	var once sync.Once
	cl.stop = func() {
		once.Do(func() {
			close(done)
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(cl.stop)
	return cl
}

func readFull(br *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := br.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func textOfIn(in *Incoming) string {
	e, _ := in.Message.Get("study", "text")
	return string(e.Data)
}

// waitUnserved waits until tr has no connection serving p.
func waitUnserved(t *testing.T, tr *Transport, h *Transport) {
	t.Helper()
	p := h.ID()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tr.mu.Lock()
		c := tr.byPeer[p]
		tr.mu.Unlock()
		if c == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("still served 10 s after the peer closed")
		}
	}
}

// peerH is H, an answering peer (answering) as ident at addr.
type peerH struct {
	*Transport
	ident *Identity
	addr  string
	got   chan *Incoming
}

// routedPeer starts H, which a sends to at its address: the address
// becomes H's route.
func routedPeer(t *testing.T, ctx context.Context, a *Transport) *peerH {
	t.Helper()
	h := &peerH{ident: mustIdentity(), got: make(chan *Incoming, 16)}
	h.Transport = answering(t, ctx, h.ident, "127.0.0.1", "tcp://127.0.0.1:0", h.got)
	h.addr = h.Addrs()[0]
	sendText(t, ctx, a, h.addr, "routed")
	<-h.got
	return h
}

// restart closes H and, once a no longer serves it, starts it again at
// addr ("" for its own address).
func (h *peerH) restart(t *testing.T, ctx context.Context, a *Transport, addr string) {
	t.Helper()
	h.Close()
	waitUnserved(t, a, h.Transport)
	if addr == "" {
		addr = h.addr
	}
	h.Transport = answering(t, ctx, h.ident, "127.0.0.1", addr, h.got)
	h.addr = h.Addrs()[0]
}

// sendText sends text to `to` from tr and fails the test on error.
func sendText(t *testing.T, ctx context.Context, tr *Transport, to, text string) {
	t.Helper()
	if err := tr.Send(ctx, to, "StudySvc", "ep", message.New(message.Text("study", "text", text))); err != nil {
		t.Fatalf("send %q to %s: %v", text, to, err)
	}
}

// whoGot reports whether H or Z got the next message.
func whoGot(t *testing.T, hGot chan *Incoming, zGot chan string, want string) string {
	t.Helper()
	for {
		select {
		case in := <-hGot:
			if textOfIn(in) == want {
				return "H"
			}
		case s := <-zGot:
			if s == want {
				return "Z"
			}
		case <-time.After(10 * time.Second):
			return "nobody"
		}
	}
}

// A dialled H at hA, H's route. H restarts at hA; while A has no
// connection to it, the application sends to Z (a peer it talks to, at
// Z's own address), whose welcome names H: no replay, no signature. A
// binds H to Z's connection, nothing else serving H, but H's route stays
// hA: once H is back there, jxta://H goes to H, also after Z leaves.
// (The first version of routes took Z's address for H having moved: H's
// traffic went to Z, and once Z left every jxta://H send failed.)
func TestDialledClaimantDoesNotMoveTheRoute(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t)
	h := routedPeer(t, ctx, a.Transport)
	hAddr := h.addr
	h.restart(t, ctx, a.Transport, "")

	z := listenClaimant(t, claimantOpts{name: func(int) string { return h.ident.ID().String() }})
	sendText(t, ctx, a.Transport, z.addr, "to Z, as Z")
	<-z.got

	// H is back at its address and A reaches it there.
	sendText(t, ctx, a.Transport, hAddr, "2")
	if who := whoGot(t, h.got, z.got, "2"); who != "H" {
		t.Fatalf("tcp:// send to H's address went to %s", who)
	}
	sendText(t, ctx, a.Transport, peerAddress(h.ident.ID()), "secret for H")
	a.mu.Lock()
	route := a.routes[h.ident.ID()]
	a.mu.Unlock()
	if who := whoGot(t, h.got, z.got, "secret for H"); who != "H" {
		t.Fatalf("A's jxta://H send went to %s (H's route is now %s, Z is at %s, H at %s): a dialled welcome naming H "+
			"took H's route while A had no connection to H", who, route, z.addr, hAddr)
	}

	z.stop()
	waitUnservedAt(t, a.Transport, z.addr)
	for i := range 3 {
		if err := a.Send(ctx, peerAddress(h.ident.ID()), "StudySvc", "ep", message.New(message.Text("study", "text", "by ID"))); err != nil {
			t.Fatalf("jxta://H send %d, Z gone, A holding a connection it dialled to H at %s: %v", i, hAddr, err)
		}
		<-h.got
	}
}

// As TestDialledClaimantDoesNotMoveTheRoute, with no send of the
// application's at the critical time: the application sent to Z once (Z
// answered as Z, so Z has a route). Later, while A has no connection to
// H (H restarting), Z opens a connection to A and asks A a question,
// signed as Z; A answers jxta://Z, which dials Z's route; there Z's
// welcome names H. Z's route is dropped as stale; H's stays: dials this
// transport makes itself teach nothing.
func TestRouteDialTeachesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	aIdent := mustIdentity()
	aGot := make(chan *Incoming, 16)
	a := answering(t, ctx, aIdent, "127.0.0.1", "tcp://127.0.0.1:0", aGot)

	h := routedPeer(t, ctx, a)
	hIdent, hAddr, hGot := h.ident, h.addr, h.got
	zIdent := mustIdentity()

	// Z: its first connection answers as Z and hangs up; later ones name H.
	z := listenClaimant(t, claimantOpts{name: func(i int) string {
		if i == 0 {
			return zIdent.ID().String()
		}
		return hIdent.ID().String()
	}, hangUp: func(i int) bool { return i == 0 }})
	if err := a.Send(ctx, z.addr, "StudySvc", "ep", message.New(message.Text("study", "text", "hello Z"))); err != nil {
		t.Logf("send to Z: %v", err) // Z hangs up; the frame may or may not be written
	}
	waitUnservedAt(t, a, z.addr)
	h.restart(t, ctx, a, "") // H restarts at its address

	// Z, on a connection it opens, asks A a question as Z.
	zc, err := net.Dial("tcp", hostportOf(a))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	zr := &rawPeer{Conn: zc, br: bufio.NewReader(zc)}
	zr.welcome(t, zIdent)
	go func() { // drain A's answer
		b := make([]byte, 4096)
		for {
			if _, err := zr.br.Read(b); err != nil {
				return
			}
		}
	}()
	zr.Write(signedFrame(t, zIdent, "StudySvc/ep", message.Text("study", "q", "?")))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a.mu.Lock()
		_, zRouted := a.routes[zIdent.ID()]
		a.mu.Unlock()
		if !zRouted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("A did not dial Z's route to answer")
		}
	}

	// H is back: the application reaches it at its address, then by ID.
	sendText(t, ctx, a, hAddr, "2")
	if who := whoGot(t, hGot, z.got, "2"); who != "H" {
		t.Fatalf("tcp:// send to H's address went to %s", who)
	}
	sendText(t, ctx, a, peerAddress(hIdent.ID()), "secret for H")
	a.mu.Lock()
	route := a.routes[hIdent.ID()]
	a.mu.Unlock()
	if who := whoGot(t, hGot, z.got, "secret for H"); who != "H" {
		t.Fatalf("A's jxta://H send went to %s (H's route now %s; Z at %s, H at %s): Z moved H's route to its own "+
			"address by answering A's dial to its route with a welcome naming H", who, route, z.addr, hAddr)
	}
}

func hostportOf(tr *Transport) string { return tr.Addrs()[0][len("tcp://"):] }

// The application gives H's route (AddRoute) before ever reaching H,
// then sends to Z, a peer it talks to, whose welcome names H: the route
// given stays, and jxta://H goes to H.
func TestGivenRouteKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t)
	hIdent := mustIdentity()
	hGot := make(chan *Incoming, 16)
	h := answering(t, ctx, hIdent, "127.0.0.1", "tcp://127.0.0.1:0", hGot)
	if err := a.AddRoute(hIdent.ID(), h.Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	z := listenClaimant(t, claimantOpts{name: func(int) string { return hIdent.ID().String() }})
	sendText(t, ctx, a.Transport, z.addr, "to Z")
	<-z.got
	sendText(t, ctx, a.Transport, peerAddress(hIdent.ID()), "secret for H")
	a.mu.Lock()
	route := a.routes[hIdent.ID()]
	a.mu.Unlock()
	if who := whoGot(t, hGot, z.got, "secret for H"); who != "H" {
		t.Fatalf("A's jxta://H send went to %s: AddRoute(H, %s) replaced by Z's address (route now %s)", who, h.Addrs()[0], route)
	}
}

// A dialled H; H restarts on another port (JXSE takes the next free
// port of its range when its own is busy) and talks to A on a
// connection it opens, signing its frames, as a replayer would: A's
// jxta://H sends fail with ErrNoRoute naming H's route, rather than go
// over a connection a claimant of H opened. A send to H's new address
// (here by tcp://; AddRoute does as well) reaches H again by ID.
func TestMovedPeerReachedOnceSentTo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t)
	h := routedPeer(t, ctx, a.Transport)
	hIdent, hGot, old := h.ident, h.got, h.addr
	h.restart(t, ctx, a.Transport, "tcp://127.0.0.1:0")
	sendText(t, ctx, h.Transport, a.Addrs()[0], "H is back, elsewhere")
	a.next(t)
	err := a.Send(ctx, peerAddress(hIdent.ID()), "StudySvc", "ep", message.New(message.Text("study", "text", "reply")))
	if !errors.Is(err, ErrNoRoute) || !strings.Contains(err.Error(), strings.TrimPrefix(old, "tcp://")) {
		t.Fatalf("A's reply to H, moved and connected from its new port: %v, want ErrNoRoute naming %s", err, old)
	}
	sendText(t, ctx, a.Transport, h.addr, "2")
	if who := whoGot(t, hGot, nil, "2"); who != "H" {
		t.Fatalf("tcp:// send to H's new address went to %s", who)
	}
	sendText(t, ctx, a.Transport, peerAddress(hIdent.ID()), "reply")
	if who := whoGot(t, hGot, nil, "reply"); who != "H" {
		t.Fatalf("reply went to %s", who)
	}
}

// maxRoutes: with routes full (given ones: AddRoute), Z, a peer the
// application sends to by tcp:// now and then, hangs up after each
// message and names a fresh peer ID in each welcome. No route is learned
// for them, and H's, learned first, stays (a clear of every route at
// maxRoutes had exposed H to the replay hijack again).
func TestLearnedRoutesBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := newTarget(t)
	hIdent := mustIdentity()
	hGot := make(chan *Incoming, 16)
	h := answering(t, ctx, hIdent, "127.0.0.1", "tcp://127.0.0.1:0", hGot)
	sendText(t, ctx, a.Transport, h.Addrs()[0], "1")
	<-hGot
	for i := 0; a.routeCount() < maxRoutes; i++ {
		if err := a.AddRoute(freshPeerID(), fmt.Sprintf("tcp://127.0.1.%d:%d", 1+i/60000, 1+i%60000)); err != nil {
			t.Fatal(err)
		}
	}
	z := listenClaimant(t, claimantOpts{name: func(int) string { return freshPeerID().String() }, hangUpAfterFrame: true})
	for range 20 {
		a.Send(ctx, z.addr, "StudySvc", "ep", message.New(message.Text("study", "text", "x")))
		a.waitHangUp(z.addr)
	}
	a.mu.Lock()
	route, pinned := a.routes[hIdent.ID()]
	n := len(a.routes)
	a.mu.Unlock()
	if !pinned || n != maxRoutes {
		t.Fatalf("after dials to Z (a fresh peer ID in each welcome) with the routes full: H's route kept %v (%s), %d routes; want kept and %d",
			pinned, route, n, maxRoutes)
	}
}

// TestRouteAtAnAddressGoesWithItsPeer: Z, at one address, names a fresh
// peer ID in each welcome, as a JXSE peer restarted on its port with a
// new identity does. The route learned for the ID Z named before is
// stale once Z answers as another: each dial leaves one route at Z's
// address, the newest ID's. Before, one was kept per ID (a soak with
// JXSE peers restarting: 4 → 41 routes, never fewer), until maxRoutes,
// after which new peers learned none.
func TestRouteAtAnAddressGoesWithItsPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t)
	var mu sync.Mutex
	var last string
	z := listenClaimant(t, claimantOpts{name: func(int) string {
		mu.Lock()
		defer mu.Unlock()
		last = freshPeerID().String()
		return last
	}, hangUpAfterFrame: true})
	for i := range 5 {
		a.Send(ctx, z.addr, "StudySvc", "ep", message.New(message.Text("study", "text", "x")))
		a.waitHangUp(z.addr)
		a.mu.Lock()
		n := len(a.routes)
		var who id.ID
		for p, r := range a.routes {
			if "tcp://"+r == z.addr {
				who = p
			}
		}
		a.mu.Unlock()
		mu.Lock()
		want := last
		mu.Unlock()
		if n != 1 || who.String() != want {
			t.Fatalf("dial %d: %d routes, Z's address the route of %v; want 1, of %s", i+1, n, who, want)
		}
	}
}

// freshPeerID is a new peer ID in the net peer group.
func freshPeerID() id.ID {
	p, err := id.NewPeerID(id.NetPeerGroupID)
	if err != nil {
		panic(err)
	}
	return p
}

// routeCount is how many routes tr remembers.
func (tr *Transport) routeCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.routes)
}

// waitHangUp waits until tr has no connection to addr (tcp://…): the
// peer there hung up, so the next send dials.
func (tr *Transport) waitHangUp(addr string) {
	for {
		tr.mu.Lock()
		_, open := tr.byAddr[addr[len("tcp://"):]]
		tr.mu.Unlock()
		if !open {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
