package jxtatcp

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// notToClaimant checks where a jxta:// send to H of text went, its Send
// having returned err: to H, or nowhere with ErrNoRoute (and the cause
// want, if set), never to Z.
func notToClaimant(t *testing.T, err, want error, hGot chan *Incoming, zGot chan string, text string) {
	t.Helper()
	if err == nil {
		if who := whoGot(t, hGot, zGot, text); who != "H" {
			t.Fatalf("A's jxta://H send went to %s, want H (or ErrNoRoute)", who)
		}
		return
	}
	if !errors.Is(err, ErrNoRoute) || want != nil && !errors.Is(err, want) {
		t.Fatalf("A's jxta://H send: %v, want it sent to H or ErrNoRoute (%v)", err, want)
	}
	select {
	case s := <-zGot:
		t.Fatalf("Z got %q", s)
	case <-time.After(300 * time.Millisecond):
	}
}

// keepBusy writes a small signed frame on p every period until the test
// ends, so that the target never finds p's connection idle.
func keepBusy(t *testing.T, p *rawPeer, period time.Duration) {
	t.Helper()
	frame := signedFrame(t, otherIdent, "StudySvc/keepalive", message.Text("study", "k", "."))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // drain what the target sends
		defer wg.Done()
		b := make([]byte, 4096)
		for {
			if _, err := p.br.Read(b); err != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := p.Write(frame); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); p.Close(); wg.Wait() })
}

// H has a route (the application sent to it at its address). Z is a
// peer the application also sends to, at Z's own address; Z's welcome
// names H (no replay, no signature), and Z keeps its connection busy.
// Attacker connections from three other hosts fill A's slots and stay
// busy: the third one has A close its idle connection to H (eviction),
// and A's dial to H's route then finds no slot (ErrTooManyConns). The
// send fails (ErrNoRoute): it does not go to Z, as it did when any
// failed dial to the route let it go to another connection A dialled
// whose welcome names H. Scaled down: 4 slots (1 a host, 3 inbound),
// idle 500 ms.
func TestFullSlotsSendNothingToClaimant(t *testing.T) {
	const idle = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t, WithMaxConns(4), withEvictIdle(idle))
	h := routedPeer(t, ctx, a.Transport)
	hIdent, hGot := h.ident, h.got

	z := listenClaimant(t, claimantOpts{name: func(int) string { return hIdent.ID().String() }, busy: idle / 5})
	sendText(t, ctx, a.Transport, z.addr, "to Z")
	if s := <-z.got; s != "to Z" {
		t.Fatalf("Z got %q", s)
	}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		p := dialRawFrom(t, a, ip)
		p.welcome(t, otherIdent)
		keepBusy(t, p, idle/5)
	}
	time.Sleep(2 * idle) // A's connection to H is idle; the others are not
	p := dialRawFrom(t, a, "127.0.0.4")
	p.welcome(t, otherIdent)
	keepBusy(t, p, idle/5)
	if s := a.Stats(); s.Evicted != 1 {
		t.Fatalf("%+v, want A's idle connection to H evicted", s)
	}

	err := a.Send(ctx, peerAddress(hIdent.ID()), "StudySvc", "ep", message.New(message.Text("study", "text", "secret for H")))
	notToClaimant(t, err, ErrTooManyConns, hGot, z.got, "secret for H")
}

// As TestFullSlotsSendNothingToClaimant, with nothing hostile at A but
// Z, a peer the application sends to: the attacker fills H's slots
// instead. H (4 slots, 3 inbound) closes its idle connection from A to
// make room for the attacker's busy connections from three hosts, and
// then refuses A's new one (no idle connection to close for it): A's dial
// to H's route fails in the welcome, and the send with it, while H
// listens at its route; it does not go to Z, whose welcome names H.
func TestRefusedWelcomeSendsNothingToClaimant(t *testing.T) {
	const idle = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t)
	hIdent := mustIdentity()
	hGot := make(chan *Incoming, 16)
	h, err := New(hIdent, func(in *Incoming) {
		if _, ok := in.Message.Get("study", "text"); ok {
			hGot <- in
		}
	}, WithMaxConns(4), withEvictIdle(idle))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	hAddr := h.Addrs()[0]
	ht := &target{Transport: h}
	sendText(t, ctx, a.Transport, hAddr, "1")
	<-hGot

	z := listenClaimant(t, claimantOpts{name: func(int) string { return hIdent.ID().String() }})
	sendText(t, ctx, a.Transport, z.addr, "to Z")
	<-z.got

	// The attacker at H: 127.0.0.2 and .3 take two of H's three inbound
	// slots; once A's connection is idle, .4 has it closed.
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		p := dialRawFrom(t, ht, ip)
		p.welcome(t, otherIdent)
		keepBusy(t, p, idle/5)
	}
	time.Sleep(2 * idle)
	p := dialRawFrom(t, ht, "127.0.0.4")
	p.welcome(t, otherIdent)
	keepBusy(t, p, idle/5)
	if s := h.Stats(); s.Evicted != 1 {
		t.Fatalf("H: %+v, want its idle connection from A evicted", s)
	}
	waitUnservedAt(t, a.Transport, hAddr)

	err = a.Send(ctx, peerAddress(hIdent.ID()), "StudySvc", "ep", message.New(message.Text("study", "text", "secret for H")))
	notToClaimant(t, err, nil, hGot, z.got, "secret for H")
}

// waitUnservedAt waits until tr has no connection to hostport addr.
func waitUnservedAt(t *testing.T, tr *Transport, addr string) {
	t.Helper()
	hp := addr[len("tcp://"):]
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tr.mu.Lock()
		_, open := tr.byAddr[hp]
		tr.mu.Unlock()
		if !open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection to %s still open", addr)
		}
	}
}

// Z is a peer the application sends to (its welcome names Z: Z gets a
// route, its own address). On that connection, which A dialled, Z replays
// a frame H signed (H's answer to a question of Z's) while H has no
// connection to A: H, with no route, is bound to Z's connection (the
// documented exposure, which ends when the application sends to H's
// address). Z's connection, idle, is then evicted to make room for the
// application's dials: H gets no route from it (before, every peer the
// connection served got one, and H's became Z's address, from a replayed
// signature; the application's send to H's own address then taught
// nothing, and jxta://H dialled Z, which answered naming H).
func TestEvictionPlantsNoRouteFromReplay(t *testing.T) {
	const idle = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newTarget(t, WithMaxConns(4), withEvictIdle(idle))
	hIdent := mustIdentity()
	hGot := make(chan *Incoming, 16)
	h := answering(t, ctx, hIdent, "127.0.0.1", "tcp://127.0.0.1:0", hGot)
	hAddr := h.Addrs()[0]
	captured := captureAnswer(t, h)

	z := listenClaimant(t, claimantOpts{name: func(i int) string {
		if i == 0 {
			return otherIdent.ID().String()
		}
		return hIdent.ID().String()
	}, first: func(i int) []byte {
		if i == 0 {
			return frameOf(captured)
		}
		return nil
	}})
	sendText(t, ctx, a.Transport, z.addr, "to Z")
	<-z.got
	if in := a.next(t); in.Source != hIdent.ID() {
		t.Fatalf("replayed frame delivered from %v", in.Source)
	}

	// The application talks to three more peers, then a fourth: Z's
	// connection, idle, is closed for it.
	time.Sleep(2 * idle)
	var others []*Transport
	for range 4 {
		o := answering(t, ctx, mustIdentity(), "127.0.0.1", "tcp://127.0.0.1:0", make(chan *Incoming, 4))
		others = append(others, o)
		sendText(t, ctx, a.Transport, o.Addrs()[0], "hi")
	}
	if s := a.Stats(); s.Evicted != 1 {
		t.Fatalf("%+v, want Z's idle connection evicted", s)
	}
	a.mu.Lock()
	planted := a.routes[hIdent.ID()]
	a.mu.Unlock()
	for _, o := range others {
		o.Close() // room again
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a.mu.Lock()
		n := len(a.conns)
		a.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", n)
		}
	}

	// The application reaches H at its own address, then sends by ID.
	sendText(t, ctx, a.Transport, hAddr, "2")
	if who := whoGot(t, hGot, z.got, "2"); who != "H" {
		t.Fatalf("tcp:// send to H's address went to %s", who)
	}
	err := a.Send(ctx, peerAddress(hIdent.ID()), "StudySvc", "ep", message.New(message.Text("study", "text", "secret for H")))
	if who := whoGot(t, hGot, z.got, "secret for H"); who != "H" {
		t.Fatalf("A's jxta://H send went to %s (Send: %v): the eviction of Z's dialled connection, which carried H's "+
			"replayed frame, made Z's address %s H's route (route after the eviction: %q; H at %s)", who, err, z.addr, planted, hAddr)
	}
}
