package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	ws "github.com/libp2p/go-libp2p/p2p/transport/websocket"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/stallproxy"
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

// Every Close returns once the writer is gone, also one called while
// another drains. Before, a second Close closed the connection under the
// first one's drain and returned with the writer still writing.
func TestCoalescingConnConcurrentClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cl, _ := tcpPair(t)
	g := newGatedConn(cl) // the peer does not take the first write
	c := newCoalescingConn(g)
	if _, err := c.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	<-g.started
	first := make(chan error, 1)
	go func() { first <- c.Close() }()
	for closing := false; !closing; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		closing = c.closed
		c.mu.Unlock()
	}
	c.Close()
	n, writing := c.buffered()
	g.open()
	<-first
	if writing || n > 0 {
		t.Fatalf("a second Close returned while the first drained: writer running %v, %d bytes buffered", writing, n)
	}
}

// captureMuxer is the node's coalescing yamux, handing the test the first
// connection it makes.
type captureMuxer struct {
	network.Multiplexer
	conns chan *coalescingConn
}

func (m captureMuxer) NewConn(c net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	cc := newCoalescingConn(c)
	select {
	case m.conns <- cc:
	default: // the test watches the first connection only
	}
	return m.Multiplexer.NewConn(cc, isServer, scope)
}

// wsHost is an honest go-libp2p host on loopback WebSocket, stock yamux:
// each stream of protocol proto answers one byte, then reads all.
func wsHost(t *testing.T, proto string) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.Transport(ws.New), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0/ws"),
		libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableRelay(), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.SetStreamHandler(protocol.ID(proto), func(s network.Stream) {
		s.Write([]byte{1})
		io.Copy(io.Discard, s)
		s.Close()
	})
	return h
}

// A peer that stops reading a WebSocket connection while many streams
// write to it: closing the connection ends the write in progress after
// closeDrain. Before, Close set a write deadline for its drain, and on
// libp2p's WebSocket connection setting one waits for the write in
// progress, so Close waited for yamux's write timeout (10 s; an hour
// here, so that no run could mistake the wait for a short one).
func TestCoalescingConnCloseOverWebSocket(t *testing.T) {
	const proto, streams = "/test/stall", 64 // 64 windows of 256 KiB: more than the kernel's buffers take
	ctx := context.Background()
	b := wsHost(t, proto)
	ip, _ := b.Addrs()[0].ValueForProtocol(ma.P_IP4)
	port, _ := b.Addrs()[0].ValueForProtocol(ma.P_TCP)
	p := stallproxy.New(t, net.JoinHostPort(ip, port))
	viaProxy := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(p.Port()) + "/ws")

	slow := *yamux.DefaultTransport
	slow.ConnectionWriteTimeout = time.Hour
	conns := make(chan *coalescingConn, 1)
	a, err := New(ctx, WithEphemeralKey(), WithListenAddrs("/ip4/127.0.0.1/tcp/0/ws"),
		WithLibp2pOptions(libp2p.Muxer(yamux.ID, captureMuxer{&slow, conns})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{viaProxy}}); err != nil {
		t.Fatal(err)
	}
	cc := <-conns

	// Open the streams while the proxy relays, then stop reading and
	// write on all of them until the coalescer is full behind a write the
	// proxy does not take.
	var ss []network.Stream
	for range streams {
		s, err := a.Host().NewStream(ctx, b.ID(), proto)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	p.Stall()
	var writers sync.WaitGroup
	var written atomic.Int64
	for _, s := range ss {
		writers.Add(1)
		go func() {
			defer writers.Done()
			frame := make([]byte, 1000)
			for {
				n, err := s.Write(frame)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	// Ready when the coalescer is full and the streams have written
	// nothing for a second: its write in progress is not taken.
	for end, last, still := time.Now().Add(time.Minute), int64(-1), 0; still < 10; time.Sleep(100 * time.Millisecond) {
		n, writing := cc.buffered()
		if w := written.Load(); w == last && writing && n > coalesceMax-2048 {
			still++
		} else {
			last, still = w, 0
		}
		if time.Now().After(end) {
			p.Close()
			writers.Wait()
			t.Fatal("the coalescer never stalled full: the kernel's buffers took every stream's window")
		}
	}

	closed := make(chan error, 1)
	go func() { closed <- a.Host().Network().ClosePeer(b.ID()) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Error("closing the connection still waits 30 s for a write the peer does not take")
		p.Close() // ends that write
		<-closed
	}
	writers.Wait()
	if n, writing := cc.buffered(); n != 0 || writing {
		t.Fatalf("after Close: %d bytes buffered, writer running %v", n, writing)
	}
}
