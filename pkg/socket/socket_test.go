package socket_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"go.uber.org/goleak"
	"golang.org/x/net/nettest"

	"github.com/p2pmsg/p2pmsg/internal/stallproxy"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func newSockets(t testing.TB, n *node.Node, opts ...socket.Option) *socket.Service {
	t.Helper()
	ep, err := endpoint.New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() }) // after the services on it
	_, s := socketsOn(t, ep, opts...)
	return s
}

// socketsOn starts the pipe and socket services on ep, closed when the
// test ends.
func socketsOn(t testing.TB, ep *endpoint.Service, opts ...socket.Option) (*pipe.Service, *socket.Service) {
	t.Helper()
	ps, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	s, err := socket.New(ps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); ps.Close() })
	return ps, s
}

func newAdv(t testing.TB, typ adv.PipeType) *adv.PipeAdvertisement {
	a, err := adv.New(typ, "sock", "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pair returns a dialled and an accepted connection between two nodes.
func pair(t testing.TB, sa, sb *socket.Service, a *adv.PipeAdvertisement) (c1, c2 *socket.Conn) {
	t.Helper()
	l, err := sb.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c1, err = sa.Dial(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	c2, err = l.AcceptContext(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return c1, c2
}

// TestConformance runs golang.org/x/net/nettest's net.Conn suite.
func TestConformance(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	nettest.TestConn(t, func() (net.Conn, net.Conn, func(), error) {
		c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

func TestLargeTransferHalfClose(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
	defer c1.Close()
	defer c2.Close()
	data := make([]byte, 10<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	go func() {
		c1.Write(data)
		c1.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, c2)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("copied %d bytes: %v", n, err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("data damaged")
	}
	// The half-closed side still reads what the other side writes.
	if _, err := c2.Write([]byte("ack")); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	got, err := io.ReadAll(c1)
	if err != nil || string(got) != "ack" {
		t.Fatalf("after half-close: %q %v", got, err)
	}
	if c1.RemotePeer() != nodes[1].ID() || c1.Security() == "" || c2.RemoteAddr().(socket.Addr).Peer != nodes[0].ID() {
		t.Fatalf("addresses %v %v", c1.RemoteAddr(), c2.RemoteAddr())
	}
}

func TestRefusedAndUnresolved(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1], socket.WithBacklog(1))
	a := newAdv(t, adv.Unicast)
	if _, err := sa.Dial(ctx(t), a); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("dial without a listener: %v", err)
	}
	l, err := sb.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Listen(a); !errors.Is(err, socket.ErrBound) {
		t.Fatalf("second listener: %v", err)
	}
	c1, err := sa.Dial(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if _, err := sa.Dial(ctx(t), a); !errors.Is(err, socket.ErrRefused) {
		t.Fatalf("dial beyond the backlog: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); !errors.Is(err, socket.ErrClosed) {
		t.Fatalf("accept on a closed listener: %v", err)
	}
	// A second Close fails, as a TCP listener's does (it returned nil).
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	if _, err := sa.Dial(ctx(t), a, pipe.ToPeers(nodes[1].AddrInfo())); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("dial after the listener closed: %v", err)
	}
	if _, err := sa.Listen(newAdv(t, adv.Propagate)); !errors.Is(err, pipe.ErrWrongType) {
		t.Fatalf("socket on a propagate pipe: %v", err)
	}
	if _, err := socket.New(nil, socket.WithBacklog(0)); !errors.Is(err, socket.ErrBadOption) {
		t.Fatalf("bad option: %v", err)
	}
}

// TestClosedServiceRefuses: Listen and Dial on a closed socket service
// fail with ErrClosed (net.ErrClosed), with the pipes below still up or
// closed too, as a Peer's Close closes them. Before, Dial went on to
// connect while the pipes were up, and with them closed both failed with
// the pipe layer's error, which matches neither.
func TestClosedServiceRefuses(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sb := newSockets(t, nodes[1])
	a := newAdv(t, adv.Unicast)
	l, err := sb.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ep, err := endpoint.New(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ps, sa := socketsOn(t, ep)
	sa.Close()
	for _, pipes := range []string{"up", "closed"} {
		if pipes == "closed" {
			ps.Close()
		}
		c, err := sa.Dial(ctx(t), a, pipe.ToPeers(nodes[1].AddrInfo()))
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, socket.ErrClosed) || !errors.Is(err, net.ErrClosed) {
			t.Errorf("pipes %s: Dial after Close: %v, want ErrClosed", pipes, err)
		}
		if _, err := sa.Listen(newAdv(t, adv.Unicast)); !errors.Is(err, socket.ErrClosed) {
			t.Errorf("pipes %s: Listen after Close: %v, want ErrClosed", pipes, err)
		}
	}
}

func TestDeadlineIsTimeout(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	secure := newAdv(t, adv.UnicastSecure)
	secure.Binders = []string{nodes[1].ID().String()}
	c1, c2 := pair(t, sa, sb, secure)
	defer c1.Close()
	defer c2.Close()
	c1.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c1.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
}

// TestPastDeadlineWithDataWaiting: once a deadline has passed, Read and
// Write fail with a timeout even when bytes wait to be read, as on TCP
// (Read returned them); cleared, the bytes are read.
func TestPastDeadlineWithDataWaiting(t *testing.T) {
	for _, tc := range []struct {
		name string
		pair func(t *testing.T) (a, b *socket.Conn)
	}{
		{"libp2p", func(t *testing.T) (a, b *socket.Conn) {
			nodes := testutil.NewConnectedNodes(t, 2)
			a, b = pair(t, newSockets(t, nodes[0]), newSockets(t, nodes[1]), newAdv(t, adv.Unicast))
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		}},
		{"JXTA", jxtaPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.pair(t)
			if _, err := b.Write([]byte("xy")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1)
			if _, err := io.ReadFull(a, buf); err != nil || buf[0] != 'x' {
				t.Fatalf("read %q, %v", buf, err)
			}
			timedOut := func(op string, err error) {
				t.Helper()
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("%s past the deadline: %v; want a timeout", op, err)
				}
			}
			a.SetDeadline(time.Now().Add(-time.Second))
			_, err := a.Read(buf)
			timedOut("read", err)
			_, err = a.Write([]byte("z"))
			timedOut("write", err)
			a.SetDeadline(time.Time{})
			if _, err := a.Read(buf); err != nil || buf[0] != 'y' {
				t.Fatalf("after the deadline was cleared: %q, %v", buf, err)
			}
		})
	}
}

// TestCloseWhilePeerWrites: after one side closes, the other side's
// writes fail (after a short linger) instead of stalling for ever, and
// what was written before the close still arrives.
func TestCloseWhilePeerWrites(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
	defer c1.Close()
	if _, err := c2.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) || !errors.Is(err, socket.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(c1, got); err != nil || string(got) != "bye" {
		t.Fatalf("bytes written before close: %q %v", got, err)
	}
	c1.SetWriteDeadline(time.Now().Add(time.Minute)) // a hang fails the test, not the deadline
	chunk := make([]byte, 256<<10)
	var err error
	for err == nil { // until the linger ends; the deadline catches a stall
		_, err = c1.Write(chunk)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing to a closed peer: %v, want a reset", err)
	}
}

func TestSocketThroughRelay(t *testing.T) {
	r := testutil.NewNode(t, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
	a := testutil.NewNode(t)
	b := testutil.NewNode(t, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
	if err := b.Connect(ctx(t), r.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx(t), r.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	circuit, _ := ma.NewMultiaddr(r.Addrs()[0].String() + "/p2p-circuit")
	if err := a.Connect(ctx(t), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatal(err)
	}
	secure := newAdv(t, adv.UnicastSecure)
	secure.Binders = []string{b.ID().String()}
	c1, c2 := pair(t, newSockets(t, a), newSockets(t, b), secure)
	defer c1.Close()
	defer c2.Close()
	// Well past go-libp2p's default relay limit of 128 KiB.
	data := bytes.Repeat([]byte("relayed "), 512<<10/8)
	go func() { c1.Write(data); c1.CloseWrite() }()
	got, err := io.ReadAll(c2)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("relayed %d of %d bytes: %v", len(got), len(data), err)
	}
	if c2.Security() == "" {
		t.Fatal("relayed socket not secured")
	}
}

func lingering() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "socket.(*Conn).linger")
}

// After Close, while the peer keeps its side open and silent: a Read
// fails at once with net.ErrClosed (it waited for the linger, 5 s, and
// for ever once the application cleared its deadline), deadlines can no
// longer be set, and the linger ends within its bound whatever the
// application does.
func TestClosedConnDoesNotWaitForThePeer(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
	defer c1.Close()
	before := lingering()
	c2.Close()
	time.Sleep(100 * time.Millisecond) // the linger has started
	if err := c2.SetDeadline(time.Time{}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetDeadline after Close: %v, want net.ErrClosed", err)
	}
	read := make(chan error, 1)
	go func() { _, err := c2.Read(make([]byte, 1)); read <- err }()
	select {
	case err := <-read:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		c1.Close()
		t.Fatalf("Read after Close still blocked after 3 s; returned %v once the peer closed", <-read)
	}
	deadline := time.Now().Add(20 * time.Second)
	for lingering() > before {
		if time.Now().After(deadline) {
			t.Fatal("the linger still runs 20 s after Close (its bound is 5 s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOnePeerCannotTakeTheBacklog: a peer that dials and never writes
// holds a quarter of the listener's backlog at most; every other peer
// still gets in, the refusals are counted, and a place Accept frees is
// the peer's again.
func TestOnePeerCannotTakeTheBacklog(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	// The honest peer is on another host: this one's share is the
	// attacker's (TestOneHostsIdentitiesCannotTakeTheBacklog).
	victim, attacker, honest := newSockets(t, nodes[0]), newSockets(t, nodes[1]), newSockets(t, testutil.NodeOnHost(t, "127.0.0.2", nodes[0]))
	a := newAdv(t, adv.Unicast)
	l, err := victim.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const share = 64 / 4
	for i := range share {
		c, err := attacker.Dial(ctx(t), a)
		if err != nil {
			t.Fatalf("dial %d within the peer's share: %v", i, err)
		}
		defer c.Close()
	}
	_, err = attacker.Dial(ctx(t), a)
	if !errors.Is(err, socket.ErrRefused) || !strings.Contains(err.Error(), "share") {
		t.Fatalf("dial beyond the peer's share: %v", err)
	}
	c, err := honest.Dial(ctx(t), a)
	if err != nil {
		t.Fatalf("another peer, with the backlog three quarters free: %v", err)
	}
	defer c.Close()
	if st := victim.Stats(); st.PeerBacklog != 1 || st.BacklogFull != 0 {
		t.Fatalf("stats %+v, want one refusal for the peer's share", st)
	}
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	c2, err := attacker.Dial(ctx(t), a)
	if err != nil {
		t.Fatalf("dial after Accept freed one of the peer's places: %v", err)
	}
	c2.Close()
}

// TestResetIsNotEOF: a writer that resets mid-stream (its input cut
// short) leaves the reader an error, not io.EOF: the reader cannot take
// the bytes that arrived for the whole stream, as it would after Close.
func TestResetIsNotEOF(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
	defer c2.Close()
	if _, err := c1.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c2, buf); err != nil {
		t.Fatal(err)
	}
	if err := c1.Reset(); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if _, err := c1.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Reset: %v, want net.ErrClosed", err)
	}
	if _, err := io.Copy(io.Discard, c2); err == nil {
		t.Fatal("the reader saw a clean end of stream after the writer reset")
	}
}

// TestLostConnectionIsNotEOF: however the stream ends before a clean
// close (the other side resets it, or its peer goes away: its node
// closes, as a killed process's connection does, with a bare end of
// stream under the multiplexer), Read fails with ErrReset, which a
// caller can match, and never with an error that matches io.EOF, which
// would let a caller testing errors.Is(err, io.EOF) take the bytes that
// arrived for the whole stream.
func TestLostConnectionIsNotEOF(t *testing.T) {
	tests := []struct {
		name string
		end  func(writer *socket.Conn, writerNode *node.Node) error
	}{
		{"writer resets", func(c *socket.Conn, _ *node.Node) error { return c.Reset() }},
		{"writer's node closes", func(_ *socket.Conn, n *node.Node) error { return n.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
			c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
			defer c1.Close()
			defer c2.Close()
			if _, err := c1.Write([]byte("partial")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 7)
			if _, err := io.ReadFull(c2, buf); err != nil {
				t.Fatal(err)
			}
			if err := tt.end(c1, nodes[0]); err != nil {
				t.Fatal(err)
			}
			_, err := c2.Read(buf)
			if !errors.Is(err, socket.ErrReset) || errors.Is(err, io.EOF) {
				t.Fatalf("Read after the stream was lost: %v, want socket.ErrReset and not io.EOF", err)
			}
		})
	}
}

// TestWriteToLostPeerIsReset: Writes under way when the connection under
// their streams is lost (here reset by a relaying TCP proxy, as a killed
// peer's kernel resets a connection with unread data) fail with ErrReset,
// as Read does. A Write that reached yamux's session as it ended got the
// connection's own error alone ("write tcp ...: connection reset by peer",
// or io.EOF), matching no sentinel of package socket.
func TestWriteToLostPeerIsReset(t *testing.T) {
	if testutil.Loopback() != testutil.LoopbackTCP {
		t.Skip("relays TCP")
	}
	for range 8 { // the race is narrow: a few Writes in each round reach it
		writeThroughLostConn(t)
	}
}

func writeThroughLostConn(t *testing.T) {
	writerNode, readerNode := testutil.NewNode(t), testutil.NewNode(t)
	sa, sb := newSockets(t, writerNode), newSockets(t, readerNode)
	target := readerNode.Host().Addrs()[0]
	ta, err := manet.ToNetAddr(target)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	conns := make(chan *net.TCPConn, 4)
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			conns <- c.(*net.TCPConn)
			go func() {
				up, err := net.Dial("tcp", ta.String())
				if err != nil {
					c.Close()
					return
				}
				defer up.Close()
				go io.Copy(c, up)
				io.Copy(up, c)
			}()
		}
	}()
	paddr, _ := manet.FromNetAddr(pl.Addr())
	a := newAdv(t, adv.Unicast)
	l, err := sb.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const writers = 16
	errs := make(chan error, writers)
	for range writers {
		c, err := sa.Dial(ctx(t), a, pipe.ToPeers(peer.AddrInfo{ID: readerNode.ID(), Addrs: []ma.Multiaddr{paddr}}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, err := l.AcceptContext(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go io.Copy(io.Discard, r)
		go func() {
			buf := make([]byte, 1<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case c := <-conns:
		c.SetLinger(0)
		c.Close() // a reset
	default:
		t.Fatal("no connection through the proxy")
	}
	for range writers {
		select {
		case err := <-errs:
			if !errors.Is(err, socket.ErrReset) || errors.Is(err, io.EOF) {
				t.Fatalf("Write when the connection was lost: %v, want socket.ErrReset and not io.EOF", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Write still blocked 10 s after the connection was lost")
		}
	}
}

// TestWriteAfterCloseWrite: a Write after CloseWrite fails with ErrClosed
// (net.ErrClosed), as a JXTA socket's does; it failed with yamux's
// "stream closed", which matched no sentinel of package socket or net.
func TestWriteAfterCloseWrite(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
	defer c1.Close()
	defer c2.Close()
	if err := c1.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Write([]byte("late")); !errors.Is(err, socket.ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after CloseWrite: %v, want socket.ErrClosed", err)
	}
	// the other direction still works
	if _, err := c2.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c1, buf); err != nil {
		t.Fatal(err)
	}
	if n, err := c2.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the other side's CloseWrite: %d, %v; want io.EOF", n, err)
	}
}

// TestReadAfterCloseRead: Reads after CloseRead, and one it cuts short,
// return io.EOF, as on TCP: this side chose to stop reading. They failed
// with ErrReset ("stream reset"), which says the other side reset or was
// lost.
func TestReadAfterCloseRead(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newSockets(t, nodes[0]), newSockets(t, nodes[1])
	c1, c2 := pair(t, sa, sb, newAdv(t, adv.Unicast))
	defer c1.Close()
	defer c2.Close()
	blocked := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		blocked <- err
	}()
	testutil.WaitBlocked(t, "socket.(*Conn).Read", false)
	if err := c1.CloseRead(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != io.EOF {
		t.Fatalf("a Read that CloseRead cut short: %v, want io.EOF", err)
	}
	if n, err := c1.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after CloseRead: %d, %v; want io.EOF", n, err)
	}
}

// TestShutdownBoundedByCtx: a peer that stops reading its connection
// (a proxy between the peers stops relaying) holds Shutdown only until
// its ctx ends, which it reports, with the connection still up: the
// multiplexer queues a stream's end behind what the connection has yet
// to write, without a deadline. Before, ending each socket's writing
// waited there until the connection's write timeout killed it (9 s for a
// 2 s ctx in the red team's run), and Shutdown then returned nil.
func TestShutdownBoundedByCtx(t *testing.T) {
	a, b := testutil.NewNode(t), testutil.NewNode(t)
	ip, _ := b.Host().Addrs()[0].ValueForProtocol(ma.P_IP4)
	port, _ := b.Host().Addrs()[0].ValueForProtocol(ma.P_TCP)
	p := stallproxy.New(t, net.JoinHostPort(ip, port))
	viaProxy := peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(p.Port()))}}
	if err := a.Connect(ctx(t), viaProxy); err != nil {
		t.Fatal(err)
	}
	sa, sb := newSockets(t, a), newSockets(t, b)
	pa := newAdv(t, adv.Unicast)
	l, err := sb.Listen(pa)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns []*socket.Conn
	defer func() { closeAll(conns) }()
	for range node.MaxSocketStreamsPerPeer {
		c, err := sa.Dial(ctx(t), pa, pipe.ToPeers(viaProxy))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := l.AcceptContext(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	// Every socket writes until the stalled connection stops taking its
	// bytes, more than the kernel's buffers hold in all.
	p.Stall()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	sctx, cancel := context.WithTimeout(ctx(t), 500*time.Millisecond)
	defer cancel()
	if err := sa.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with the peer's connection stalled: %v, want its ctx's end", err)
	}
	if a.Host().Network().Connectedness(b.ID()) != network.Connected {
		t.Fatal("Shutdown returned once the stalled connection was closed, not when its ctx ended")
	}
}
