package socket_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// TestJXTACloseWriteEndsReading: JXTA's socket close has no half-close,
// so a JXTA socket's CloseWrite ends it both ways: the other side reads
// what was written, then io.EOF, and its Writes fail; this side reads
// what the other wrote before the close, then ErrClosed, saying so. Before,
// this side's Read after CloseWrite waited forever (the other side, its
// writing ended by the close, closed without telling it), the hang of an
// echo client between two p2pmsg peers.
func TestJXTACloseWriteEndsReading(t *testing.T) {
	c, sc := jxtaPair(t)

	// Each side reads as it goes, as an echo client does: a JXTA close
	// waits until the other side's application has taken every block.
	type result struct {
		b   []byte
		err error
	}
	read := func(c *socket.Conn) chan result {
		ch := make(chan result, 1)
		c.SetReadDeadline(time.Now().Add(40 * time.Second))
		go func() {
			b, err := io.ReadAll(c)
			ch <- result{b, err}
		}()
		return ch
	}
	if _, err := sc.Write([]byte("early")); err != nil {
		t.Fatal(err)
	}
	serverRead, clientRead := read(sc), read(c)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if r := <-serverRead; string(r.b) != "hello" || r.err != nil {
		t.Fatalf("the other side read %q, %v; want hello, then io.EOF", r.b, r.err)
	}
	if _, err := sc.Write([]byte("late")); err == nil {
		t.Fatal("the other side wrote after the close")
	}
	if r := <-clientRead; string(r.b) != "early" || !errors.Is(r.err, socket.ErrClosed) {
		t.Fatalf("after CloseWrite this side read %q, %v; want early, then ErrClosed", r.b, r.err)
	}
}

// jxtaPair connects two p2pmsg peers' sockets over JXTA TCP: c dialled,
// sc accepted. Both are closed when the test ends.
func jxtaPair(t *testing.T) (c, sc *socket.Conn) {
	start := func() (*socket.Service, string) {
		ep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithUnsigned())
		_, s := socketsOn(t, ep)
		return s, ep.JXTA().Addrs()[0]
	}
	server, addr := start()
	client, _ := start()
	a := seeded(t, "jxta-pair")
	l, err := server.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan *socket.Conn, 1)
	go func() {
		c, err := l.AcceptContext(ctx(t))
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err = client.Dial(ctx(t), a, pipe.ToJXTAPeers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if sc = <-accepted; sc == nil {
		t.FailNow()
	}
	t.Cleanup(func() { sc.Close() })
	return c, sc
}
