package jxtatcp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// Three hosts (three IPv4 addresses, or three IPv6 /64s — a home
// /56 holds 256) take the whole inbound share, a quarter each, and keep
// every connection "busy" with one small signed frame of their own per
// idle period (30 s by default: 192 tiny frames per 30 s). Only idle
// connections are evicted, so the honest peer's connection, the only idle
// one, was closed to make room for the attacker's next connection, and
// its reconnection refused for as long as the attacker kept sending. Now
// a host takes nothing from a host holding fewer than it will. Scaled
// down: 8 slots (host share 2, inbound share 6), idle 200 ms.
func TestBusyHostsCannotEvictTheIdleHonest(t *testing.T) {
	const idle = 200 * time.Millisecond
	a := newTarget(t, WithMaxConns(8), withEvictIdle(idle))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hIdent := mustIdentity()
	h, err := New(hIdent, func(*Incoming) {}, dialFrom("127.0.0.5"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	send := func() error {
		return h.Send(ctx, a.Addrs()[0], "StudySvc", "ep", message.New(message.Text("study", "text", "hi")))
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	a.next(t)
	a.waitQuiet(t, 0, 0)

	// The attacker: 2 + 2 + 1 connections from three hosts.
	peers := welcomedHosts(t, a, 2, "127.0.0.2", "127.0.0.3")
	p4 := dialRawFrom(t, a, "127.0.0.4")
	p4.welcome(t, otherIdent)
	attackers := append(append(peers["127.0.0.2"], peers["127.0.0.3"]...), p4)
	frame := signedFrame(t, otherIdent, "StudySvc/keepalive")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	busy := func(p *rawPeer) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(idle / 4):
				}
				if _, err := p.Write(frame); err != nil {
					return
				}
			}
		}()
	}
	for _, p := range attackers {
		busy(p)
	}
	time.Sleep(3 * idle) // H's connection is now idle, the attacker's are not

	// One more attacker connection (its host is under its share): no
	// host holds more than it will, so it is refused.
	p6 := dialRawFrom(t, a, "127.0.0.4")
	w := Welcome{Dest: "tcp://" + p6.RemoteAddr().String(), Public: "tcp://127.0.0.1:0", Peer: otherIdent.ID().String(), Version: "1.1"}
	p6.Write(w.Append(nil))
	p6.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, p6.br); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the attacker's connection was neither refused nor closed")
	}
	if s := a.Stats(); s.Evicted != 0 || s.Refused != 1 {
		t.Fatalf("%+v, want the attacker's connection refused and nothing evicted", s)
	}
	for i := range 5 {
		if err := send(); err != nil {
			t.Fatalf("the honest peer's send %d, over its idle connection: %v", i+1, err)
		}
		a.next(t)
		time.Sleep(idle)
	}
}

// Route poisoning through eviction: Z replays a frame H signed
// (captured when H answered Z) on its own connection to A, whose welcome
// announces Z's listener as its public address. While H has no connection
// to A, A binds H to Z's connection. Z then lets it idle and opens one
// more connection from the same host: A evicts Z's idle connection. A
// remembered a route for H to Z's announced address, which outlived H's
// own later connection: A's messages for jxta://H went to Z. An accepted
// connection leaves no route now; A's Send fails with ErrNoRoute.
func TestEvictionRoutesNoReplayer(t *testing.T) {
	const idle = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 4 slots: 1 a host, 3 inbound.
	a := newTarget(t, WithMaxConns(4), withEvictIdle(idle))

	// H, an honest peer that answers questions.
	h, hIdent, _ := answeringPeer(t, ctx, "127.0.0.3")

	// Z asks H something and captures H's signed answer.
	captured := captureAnswer(t, h)

	// Z's listener: what A sends there is stolen.
	stolen := make(chan *message.Message, 4)
	zAddr := welcomedPeer(t, hIdent.ID().String(), func(nc net.Conn, br *bufio.Reader) {
		for {
			n, err := readFrameHeader(br, DefaultMaxMessageSize)
			if err != nil {
				return
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(br, b); err != nil {
				return
			}
			m, err := wire.Decode(strings.NewReader(string(b)))
			if err == nil {
				stolen <- m
			}
		}
	})

	// Z connects to A from 127.0.0.2, announcing its listener, and
	// replays H's frame.
	z := dialRawFrom(t, a, "127.0.0.2")
	w := Welcome{Dest: "tcp://" + z.RemoteAddr().String(), Public: zAddr, Peer: otherIdent.ID().String(), Version: "1.1"}
	if _, err := z.Write(w.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := readWelcome(z.br); err != nil {
		t.Fatal(err)
	}
	z.Write(frameOf(captured))
	if in := a.next(t); in.Source != hIdent.ID() {
		t.Fatalf("replayed frame delivered from %v", in.Source)
	}
	a.waitQuiet(t, 0, idle)
	// One more connection from Z's host: Z's idle one is evicted.
	dialRawFrom(t, a, "127.0.0.2").welcome(t, otherIdent)
	if s := a.Stats(); s.Evicted != 1 {
		t.Fatalf("%+v, want Z's idle connection evicted", s)
	}
	a.mu.Lock()
	route := a.routes[hIdent.ID()]
	a.mu.Unlock()

	// H connects to A and talks, then leaves (closes its transport).
	if err := h.Send(ctx, a.Addrs()[0], "StudySvc", "ep", message.New(message.Text("study", "text", "hello from H"))); err != nil {
		t.Fatal(err)
	}
	a.next(t)
	h.Close()
	time.Sleep(300 * time.Millisecond)

	// A sends to H by its peer ID.
	err := a.Send(ctx, peerAddress(hIdent.ID()), "StudySvc", "ep", message.New(message.Text("study", "secret", "for H only")))
	select {
	case m := <-stolen:
		e, _ := m.Get("study", "secret")
		t.Fatalf("A's message for H (%q) was delivered to Z's listener %s (Send error %v): eviction made A remember "+
			"route %s for H from Z's replayed frame and Z's announced address, and it outlived H's own later connection; "+
			"want no route (ErrNoRoute) or H's own address", e.Data, zAddr, err, route)
	case <-time.After(2 * time.Second):
	}
	if !errors.Is(err, ErrNoRoute) || route != "" {
		t.Fatalf("send after H left: %v (route %q), want ErrNoRoute and no route", err, route)
	}
}
