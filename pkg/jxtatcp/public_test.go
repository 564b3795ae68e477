package jxtatcp

import (
	"bufio"
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
		c, err := net.Dial("tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p := &rawPeer{Conn: c, br: bufio.NewReader(c)}
		w := Welcome{Dest: "tcp://" + c.RemoteAddr().String(), Public: "tcp://127.0.0.1:0", Peer: otherIdent.ID().String(), Version: "1.1"}
		if _, err := p.Write(w.Append(nil)); err != nil {
			t.Fatal(err)
		}
		got, err := readWelcome(p.br)
		if err != nil {
			t.Fatal(err)
		}
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
