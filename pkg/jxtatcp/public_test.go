package jxtatcp

import (
	"bufio"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWelcomeAnnouncesReachableAddress: a transport listening at an
// unspecified address (tcp://0.0.0.0:PORT, as the README's recv --jxta
// and bridge lines have it) announces in its welcome the address the peer
// reached it at, with the listener's port, and lists its interfaces'
// addresses as its own. It announced and listed the listener's own
// address, 0.0.0.0 or [::], where a JXSE peer on another host can reach
// nothing.
func TestWelcomeAnnouncesReachableAddress(t *testing.T) {
	tr, err := New(testIdent, func(*Incoming) {})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Listen("tcp://0.0.0.0:0"); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(tr.listeners[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "127.0.0.3"} {
		got := welcomeAt(t, net.JoinHostPort(host, port))
		if want := "tcp://" + net.JoinHostPort(host, port); got.Public != want {
			t.Errorf("dialled at %s: the welcome announces %q, want %q", host, got.Public, want)
		}
	}
	// Its addresses are the interfaces' (loopback among them), none
	// unspecified: what the CLI prints and the resolver's route hint
	// lists (they were tcp://[::]:PORT).
	addrs := tr.Addrs()
	if !slices.Contains(addrs, "tcp://127.0.0.1:"+port) {
		t.Errorf("Addrs %q: no tcp://127.0.0.1:%s", addrs, port)
	}
	for _, a := range addrs {
		if strings.Contains(a, "0.0.0.0") || strings.Contains(a, "[::]") {
			t.Errorf("Addrs %q: an unspecified address", addrs)
		}
	}

	// A listener at a host announces that host, whoever dials.
	lt, err := New(otherIdent, func(*Incoming) {})
	if err != nil {
		t.Fatal(err)
	}
	defer lt.Close()
	if err := lt.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	at := lt.listeners[0].Addr().(*net.TCPAddr)
	if got, want := lt.public(&net.TCPAddr{IP: net.ParseIP("127.0.0.5"), Port: 1}), "tcp://127.0.0.1:"+strconv.Itoa(at.Port); got != want {
		t.Errorf("a listener at 127.0.0.1 announces %q, want %q", got, want)
	}
}

// TestPublicAddress: WithPublicAddress is what the welcome announces,
// whatever the listener, and comes first in AnnouncedAddrs, before the
// listeners' addresses (once, if it is one of them); without it,
// AnnouncedAddrs is Addrs. A bad address is refused.
func TestPublicAddress(t *testing.T) {
	const public = "tcp://203.0.113.7:9711"
	tr, err := New(testIdent, func(*Incoming) {}, WithPublicAddress(public))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if got := welcomeAt(t, tr.listeners[0].Addr().String()); got.Public != public {
		t.Errorf("the welcome announces %q, want %q", got.Public, public)
	}
	if got, want := tr.AnnouncedAddrs(), append([]string{public}, tr.Addrs()...); !slices.Equal(got, want) {
		t.Errorf("AnnouncedAddrs %q, want %q", got, want)
	}

	plain, err := New(otherIdent, func(*Incoming) {})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if got, want := plain.AnnouncedAddrs(), plain.Addrs(); !slices.Equal(got, want) {
		t.Errorf("without a public address: AnnouncedAddrs %q, want Addrs %q", got, want)
	}
	// A public address that is the listener's own is listed once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	own := "tcp://" + ln.Addr().String()
	ln.Close()
	self, err := New(otherIdent, func(*Incoming) {}, WithPublicAddress(own))
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if err := self.Listen(own); err != nil {
		t.Fatal(err) // the port, free a moment ago, taken since
	}
	if got := self.AnnouncedAddrs(); !slices.Equal(got, []string{own}) {
		t.Errorf("public address %s, listening there: AnnouncedAddrs %q, want it once", own, got)
	}
	for _, bad := range []string{"udp://203.0.113.7:1", "203.0.113.7:1", ""} {
		if _, err := New(otherIdent, func(*Incoming) {}, WithPublicAddress(bad)); !errors.Is(err, ErrBadOption) {
			t.Errorf("WithPublicAddress(%q): %v, want ErrBadOption", bad, err)
		}
	}
}

// welcomeAt connects to a transport's listener at hostport, as a JXTA
// peer, and returns the welcome it answers; the connection closes at
// the end of the test.
func welcomeAt(t *testing.T, hostport string) Welcome {
	t.Helper()
	c, err := net.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &rawPeer{Conn: c, br: bufio.NewReader(c)}
	w := Welcome{Dest: "tcp://" + c.RemoteAddr().String(), Public: "tcp://127.0.0.1:0", Peer: otherIdent.ID().String(), Version: "1.1"}
	if _, err := p.Write(w.Append(nil)); err != nil {
		t.Fatal(err)
	}
	got, err := readWelcome(p.br)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
