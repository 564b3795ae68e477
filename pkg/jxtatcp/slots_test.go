package jxtatcp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func withEvictIdle(d time.Duration) Option {
	return func(o *options) error { o.evictIdle = d; return nil }
}

// dialFrom makes a transport dial from ip, a loopback address standing
// for another host.
func dialFrom(ip string) Option {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return WithDialer(d.DialContext)
}

// dialRawFrom is dialRaw from ip.
func dialRawFrom(t *testing.T, tg *target, ip string) *rawPeer {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", tg.hostport())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawPeer{Conn: c, br: bufio.NewReader(c)}
}

// tryWelcome is welcome for a connection the target may refuse.
func (p *rawPeer) tryWelcome(ident *Identity) error {
	w := Welcome{Dest: "tcp://" + p.RemoteAddr().String(), Public: "tcp://127.0.0.1:0", Peer: ident.ID().String(), Version: "1.1"}
	p.SetDeadline(time.Now().Add(30 * time.Second))
	defer p.SetDeadline(time.Time{})
	if _, err := p.Write(w.Append(nil)); err != nil {
		return err
	}
	_, err := readWelcome(p.br)
	return err
}

// hostsOpen returns the connections the target counts for each host.
func (tg *target) hostsOpen() map[string]int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	out := map[string]int{}
	for h, n := range tg.hostConns {
		out[h] = n
	}
	return out
}

// isOpen reports whether the target still has p's connection open.
func (tg *target) isOpen(p *rawPeer) bool {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for c := range tg.conns {
		if c.nc.RemoteAddr().String() == p.LocalAddr().String() {
			return true
		}
	}
	return false
}

// waitQuiet waits until every connection of the target has ended its
// welcome and every frame but busy ones (in handlers that stay), then
// until each has been idle for d.
func (tg *target) waitQuiet(t *testing.T, busy int, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tg.mu.Lock()
		n := 0
		for c := range tg.conns {
			n += int(c.frames.Load())
		}
		tg.mu.Unlock()
		if n == busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d frames or welcomes under way 30 s later, want %d", n, busy)
		}
	}
	time.Sleep(d + 10*time.Millisecond)
}

// One host's idle connections took every slot, for ever: honest peers'
// dials were refused and this peer's own dials failed. A host opens a
// quarter of the slots at most.
func TestOneHostCannotTakeEveryConnection(t *testing.T) {
	tg := newTarget(t)
	welcomed := 0
	for range DefaultMaxConns {
		if dialRawFrom(t, tg, "127.0.0.1").tryWelcome(otherIdent) == nil {
			welcomed++
		}
	}
	if want := DefaultMaxConns / 4; welcomed != want {
		t.Fatalf("one host opened %d connections, want %d (a quarter)", welcomed, want)
	}

	honest, err := New(otherIdent, func(*Incoming) {}, dialFrom("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	if err := honest.Listen("tcp://127.0.0.2:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := honest.Send(ctx, tg.Addrs()[0], "StudySvc", "ep", message.New(message.Text("study", "text", "hi"))); err != nil {
		t.Fatalf("another host's send: %v", err)
	}
	if in := tg.next(t); in.Source != otherIdent.ID() {
		t.Fatalf("%+v", in)
	}
	if err := tg.Send(ctx, honest.Addrs()[0], "StudySvc", "ep", message.New(message.Text("study", "text", "hi"))); err != nil {
		t.Fatalf("our own dial: %v", err)
	}
	if s := tg.Stats(); s.Refused != DefaultMaxConns-DefaultMaxConns/4 || s.Evicted != 0 {
		t.Fatalf("%+v", s)
	}
}

// welcomedHosts opens n welcomed connections from each of ips.
func welcomedHosts(t *testing.T, tg *target, n int, ips ...string) map[string][]*rawPeer {
	t.Helper()
	out := map[string][]*rawPeer{}
	for _, ip := range ips {
		for range n {
			p := dialRawFrom(t, tg, ip)
			p.welcome(t, otherIdent)
			out[ip] = append(out[ip], p)
		}
	}
	return out
}

// With no connection idle long enough to close, a host past its share
// and any host past the inbound share are refused and counted, and this
// peer's own dials still have their quarter.
func TestConnectionSharesRefuse(t *testing.T) {
	// 12 slots: 3 a host, 9 inbound, 3 for our dials.
	tg := newTarget(t, WithMaxConns(12), withEvictIdle(time.Hour))
	welcomedHosts(t, tg, 3, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	if err := dialRawFrom(t, tg, "127.0.0.2").tryWelcome(otherIdent); err == nil {
		t.Fatal("a host opened more than its share")
	}
	if err := dialRawFrom(t, tg, "127.0.0.5").tryWelcome(otherIdent); err == nil {
		t.Fatal("peers opened more than the inbound share")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 4 {
		addr := welcomedPeer(t, otherIdent.ID().String(), func(_ net.Conn, br *bufio.Reader) { io.Copy(io.Discard, br) })
		err := tg.Send(ctx, addr, "Svc", "", message.New(message.Text("", "n", "1")))
		if i < 3 && err != nil {
			t.Fatalf("dial %d of the quarter kept for ours: %v", i+1, err)
		}
		if i == 3 && !errors.Is(err, ErrTooManyConns) {
			t.Fatalf("a dial past every slot: %v, want ErrTooManyConns", err)
		}
	}
	if s := tg.Stats(); s.Refused != 2 || s.Evicted != 0 {
		t.Fatalf("%+v, want 2 refused", s)
	}
}

// When a new connection finds no slot, an idle one is closed for it: its
// own host's when the host is at its share, else one of the host holding
// the most. A connection whose frame is in a handler is not idle.
func TestIdleConnectionsEvicted(t *testing.T) {
	const idle = 200 * time.Millisecond
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	tr, err := New(testIdent, func(in *Incoming) {
		if in.Param == "park" {
			entered <- struct{}{}
			<-release
		}
	}, WithMaxConns(12), withEvictIdle(idle))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	defer close(release) // before Close, which waits for the handlers
	if err := tr.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tg := &target{Transport: tr}
	hosts := welcomedHosts(t, tg, 3, "127.0.0.2")
	welcomedHosts(t, tg, 2, "127.0.0.3", "127.0.0.4", "127.0.0.6")
	parked := hosts["127.0.0.2"][0]
	parked.Write(signedFrame(t, otherIdent, "StudySvc/park"))
	<-entered
	tg.waitQuiet(t, 1, idle)

	// 127.0.0.2 is at its share: a fourth connection replaces one of its
	// idle ones.
	fourth := dialRawFrom(t, tg, "127.0.0.2")
	fourth.welcome(t, otherIdent)
	// The inbound share is full: a new host's connection replaces an idle
	// one of the host holding the most, 127.0.0.2 again.
	dialRawFrom(t, tg, "127.0.0.5").welcome(t, otherIdent)

	if s := tg.Stats(); s.Evicted != 2 || s.Refused != 0 {
		t.Fatalf("%+v, want 2 evicted", s)
	}
	want := map[string]int{"127.0.0.2": 2, "127.0.0.3": 2, "127.0.0.4": 2, "127.0.0.6": 2, "127.0.0.5": 1}
	if got := tg.hostsOpen(); len(got) != len(want) {
		t.Fatalf("connections by host %v, want %v", got, want)
	} else {
		for h, n := range want {
			if got[h] != n {
				t.Fatalf("connections by host %v, want %v", got, want)
			}
		}
	}
	if !tg.isOpen(parked) || !tg.isOpen(fourth) {
		t.Fatalf("closed the connection in a handler (%v) or the newest (%v)", !tg.isOpen(parked), !tg.isOpen(fourth))
	}
	for _, p := range hosts["127.0.0.2"][1:] {
		p.closed(t)
	}
}

// A peer whose idle accepted connection was closed for another is
// reached again once it dials this end, on its next send; until then a
// send to it fails with ErrNoRoute.
func TestEvictedPeerReachedAgain(t *testing.T) {
	const idle = 200 * time.Millisecond
	// 4 slots: 1 a host, 3 inbound, 1 for our dials.
	tg := newTarget(t, WithMaxConns(4), withEvictIdle(idle))
	hGot := make(chan *Incoming, 4)
	h, err := New(otherIdent, func(in *Incoming) { hGot <- in }, dialFrom("127.0.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Listen("tcp://127.0.0.3:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	send := func(from *Transport, to string) {
		t.Helper()
		if err := from.Send(ctx, to, "StudySvc", "ep", message.New(message.Text("study", "text", "hi"))); err != nil {
			t.Fatal(err)
		}
	}
	send(h, tg.Addrs()[0])
	tg.next(t)
	tg.waitQuiet(t, 0, 0) // H's frame ends before the others' welcomes
	welcomedHosts(t, tg, 1, "127.0.0.4", "127.0.0.5")
	tg.waitQuiet(t, 0, idle)
	dialRawFrom(t, tg, "127.0.0.6").welcome(t, otherIdent) // H's connection is the idlest
	if s := tg.Stats(); s.Evicted != 1 {
		t.Fatalf("%+v, want H's connection evicted", s)
	}

	// H's connection was accepted: no route to it is kept (the address a
	// welcome announces is the peer's word), so a send to it fails, and
	// says so, until H dials again.
	if err := tg.Send(ctx, peerAddress(otherIdent.ID()), "StudySvc", "ep", message.New(message.Text("study", "text", "hi"))); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("send to H after its accepted connection was evicted: %v, want ErrNoRoute", err)
	}
	// Once H has seen its connection closed, its next send dials again.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.mu.Lock()
		stale := h.byAddr[tg.hostport()] != nil
		h.mu.Unlock()
		if !stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("H did not see its connection closed within 30 s")
		}
	}
	send(h, tg.Addrs()[0])
	tg.next(t)
	if s := tg.Stats(); s.Evicted != 2 || s.Refused != 0 {
		t.Fatalf("%+v, want H's new connection to take an idle one's place", s)
	}
	send(tg.Transport, peerAddress(otherIdent.ID()))
	select {
	case <-hGot:
	case <-ctx.Done():
		t.Fatal("H never got the message sent to it over its new connection")
	}
}

// A JXTA peer's frame arrives on its idle connection at the instant the
// connection is closed to make room for another. It was lost without a
// count (JXTA unicast has no acknowledgement); now the frame is read and
// handled before the connection closes, and a second frame behind it,
// which the peer sent before it could see the close, is counted lost
// (Stats.EvictedUnread). The hook holds the reader between a frame's
// first byte and its beginning, where the eviction can take it.
func TestEvictionReadsTheFrameArriving(t *testing.T) {
	for _, tc := range []struct {
		name       string
		frames     int
		wantUnread uint64
	}{
		{"one frame", 1, 0},
		{"a second one behind it", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const idle = 100 * time.Millisecond
			peeked, proceed := make(chan struct{}), make(chan struct{})
			var once atomic.Bool
			hook := func(o *options) error {
				o.afterPeek = func(*conn) {
					if once.CompareAndSwap(false, true) {
						close(peeked)
						<-proceed
					}
				}
				return nil
			}
			tg := newTarget(t, WithMaxConns(4), withEvictIdle(idle), hook) // a host's share: 1 connection
			victim := dialRawFrom(t, tg, "127.0.0.2")
			victim.welcome(t, otherIdent)
			tg.waitQuiet(t, 0, idle)
			var b []byte
			for i := range tc.frames {
				b = append(b, signedFrame(t, otherIdent, "StudySvc/ep", message.Text("", "n", strconv.Itoa(i)))...)
			}
			if _, err := victim.Write(b); err != nil {
				t.Fatal(err)
			}
			<-peeked
			// The host is at its share: its new connection closes the idle one.
			dialRawFrom(t, tg, "127.0.0.2").welcome(t, otherIdent)
			close(proceed)
			if in := tg.next(t); in.Service != "StudySvc" {
				t.Fatalf("%+v", in)
			}
			victim.closed(t)
			tg.waitFor(t, "the victim's reader done", func() bool {
				tg.mu.Lock()
				defer tg.mu.Unlock()
				return len(tg.evicted) == 0
			})
			if s := tg.Stats(); s.Evicted != 1 || s.Received != 1 || s.EvictedUnread != tc.wantUnread {
				t.Fatalf("%+v, want one eviction, one frame received and %d lost", s, tc.wantUnread)
			}
		})
	}
}
