package node

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// gatedConn holds its first Write until open is called, so that a test
// knows what the coalescer buffers meanwhile; it counts Writes. Its Close
// opens the gate, as a net.Conn's Close ends a blocked Write, but a write
// deadline does not.
type gatedConn struct {
	net.Conn
	release chan struct{}
	opened  sync.Once
	writes  atomic.Int32
	started chan struct{} // closed when the first Write begins
}

func newGatedConn(c net.Conn) *gatedConn {
	return &gatedConn{Conn: c, release: make(chan struct{}), started: make(chan struct{})}
}

func (g *gatedConn) open() { g.opened.Do(func() { close(g.release) }) }

func (g *gatedConn) Close() error {
	g.open()
	return g.Conn.Close()
}

func (g *gatedConn) Write(p []byte) (int, error) {
	if g.writes.Add(1) == 1 {
		close(g.started)
		<-g.release
	}
	return g.Conn.Write(p)
}

func (c *coalescingConn) buffered() (n int, writing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf), c.writing
}

func TestCoalescingConnKeepsOrder(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name     string
		min, max int // frame sizes
		total    int
	}{
		{"small", 12, 300, 4 << 20},
		{"large", coalesceDirect, 64 << 10, 8 << 20},
		{"mixed", 12, 40 << 10, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, sv := tcpPair(t)
			c := newCoalescingConn(cl)
			rng := rand.New(rand.NewPCG(1, uint64(tc.min)))
			want := make([]byte, tc.total)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(sv)
				got <- b
			}()
			for off := 0; off < len(want); {
				n := min(tc.min+rng.IntN(tc.max-tc.min+1), len(want)-off)
				frame := append([]byte(nil), want[off:off+n]...)
				if k, err := c.Write(frame); k != n || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
				}
				clear(frame) // yamux reuses its frame buffer once Write returns
				off += n
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("peer read %d bytes, not the %d written in order", len(b), len(want))
			}
		})
	}
}

// An empty Write writes nothing and holds no buffer.
func TestCoalescingConnEmptyWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, _ := tcpPair(t)
	c := newCoalescingConn(cl)
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d, %v", n, err)
	}
	c.mu.Lock()
	held, writing := c.buf != nil, c.writing
	c.mu.Unlock()
	if held || writing {
		t.Fatalf("after an empty Write: buffer held %v, writer running %v", held, writing)
	}
	c.Close()
}

// Frames written while a write is in progress leave together: however
// many there are, two writes on the connection carry them at most.
func TestCoalescingConnCoalesces(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, sv := tcpPair(t)
	g := newGatedConn(cl)
	c := newCoalescingConn(g)
	const frames, size = 200, 100 // 20 KB: fits the buffer
	var want bytes.Buffer
	for i := range frames {
		want.Write(bytes.Repeat([]byte{byte(i)}, size))
	}
	accepted := make(chan error, 1)
	go func() {
		for i := range frames {
			if _, err := c.Write(want.Bytes()[i*size : (i+1)*size]); err != nil {
				accepted <- err
				return
			}
		}
		accepted <- nil
	}()
	<-g.started // the first write is held; the rest queue behind it
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Writes waited for the held write") // written one by one
	}
	g.open()
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(sv, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("frames arrived out of order")
	}
	// The first write takes the frames buffered when the writer started
	// (one, or all of them), the second the rest.
	if n := g.writes.Load(); n > 2 {
		t.Errorf("%d frames took %d writes, want 2 at most", frames, n)
	}
	c.Close()
}

// What yamux handed over before closing (its last frames, a GoAway) is
// written before the connection closes.
func TestCoalescingConnCloseWritesBuffered(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, sv := tcpPair(t)
	g := newGatedConn(cl)
	c := newCoalescingConn(g)
	if _, err := c.Write([]byte("first frame;")); err != nil {
		t.Fatal(err)
	}
	<-g.started
	if _, err := c.Write([]byte("goaway")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	g.open()
	got, err := io.ReadAll(sv)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "first frame;goaway" {
		t.Fatalf("peer read %q", got)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// A peer that stops reading: the buffer stays within coalesceMax, yamux's
// writer then waits in Write, and closing the connection ends the wait.
func TestCoalescingConnPeerStopsReading(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, sv := tcpPair(t)
	cl.SetWriteBuffer(16 << 10) // kernel buffers small, so that they fill soon
	sv.SetReadBuffer(16 << 10)
	c := newCoalescingConn(cl)
	frame := make([]byte, 1000)
	var over atomic.Int64 // bytes buffered beyond the bound, if ever
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := c.Write(frame); err != nil {
				done <- err
				return
			}
			if n, _ := c.buffered(); n > coalesceMax {
				over.Store(int64(n))
			}
		}
	}()
	// Wait until the buffer is full behind a write the peer does not
	// take: the next Write waits.
	for {
		n, writing := c.buffered()
		if writing && n+len(frame) > coalesceMax {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the waiting Write returned %v, want net.ErrClosed", err)
	}
	if n := over.Load(); n > 0 {
		t.Fatalf("%d bytes buffered, over the bound of %d", n, coalesceMax)
	}
	if n, writing := c.buffered(); n != 0 || writing {
		t.Fatalf("after Close: %d bytes buffered, writer running %v", n, writing)
	}
}

// A write that fails (here its deadline passed, as yamux's does when the
// peer stops reading for its ConnectionWriteTimeout) fails the Writes
// after it and ends the session's Read in progress with its error.
func TestCoalescingConnWriteFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, _ := tcpPair(t)
	c := newCoalescingConn(cl)
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10)) // the peer sends nothing
		readErr <- err
	}()
	c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.Write([]byte("frame")); err != nil {
		t.Fatal(err) // buffered: the writer fails it
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read in progress returned %v, want the write's timeout", err)
		}
	case <-time.After(10 * time.Second):
		c.Close()
		<-readErr
		t.Fatal("Read in progress still waits 10 s after the write failed")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write after a failed one: %v, want the write's timeout", err)
	}
	c.Close()
}

// A small frame written while a large one is written directly leaves
// after it. Before, nothing started the writer for it: it stayed buffered,
// and a large frame written next waited for it for ever.
func TestCoalescingConnWriteDuringDirectWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, sv := tcpPair(t)
	g := newGatedConn(cl)
	c := newCoalescingConn(g)
	large := bytes.Repeat([]byte{'L'}, coalesceDirect)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(large)
		wrote <- err
	}()
	<-g.started // the large frame is being written, directly
	if _, err := c.Write([]byte("small")); err != nil {
		t.Fatal(err)
	}
	g.open()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := c.Write(large) // after "small"
		wrote <- err
	}()
	want := slices.Concat(large, []byte("small"), large)
	got := make([]byte, len(want))
	sv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.ReadFull(sv, got); err != nil {
		buffered, _ := c.buffered()
		c.Close()
		<-wrote
		t.Fatalf("peer read %d of %d bytes (%v), %d still buffered", n, len(want), err, buffered)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("frames arrived out of order")
	}
	c.Close()
}
