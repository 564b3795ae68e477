package node

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	goyamux "github.com/libp2p/go-yamux/v5"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/stallproxy"
)

func newShutdownNode(t *testing.T) *Node {
	t.Helper()
	n, err := New(context.Background(), WithEphemeralKey(), WithListenAddrs("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// SinkResult is what Sink's reader of a stream got: the bytes, then the
// error that ended the stream (nil at its end).
type SinkResult struct {
	N   int64
	Err error
}

// Sink makes n read whole each stream of proto it accepts, once start is
// closed (nil: at once), and returns where each stream's result comes.
func Sink(n *Node, proto protocol.ID, start <-chan struct{}) <-chan SinkResult {
	got := make(chan SinkResult, 1)
	n.Host().SetStreamHandler(proto, func(s network.Stream) {
		if start != nil {
			<-start
		}
		c, err := io.Copy(io.Discard, s)
		got <- SinkResult{c, err}
		s.Close()
	})
	return got
}

// SendAndEnd opens a stream of proto from n to p, relayed connections
// allowed, writes size bytes on it and ends it.
func SendAndEnd(t testing.TB, ctx context.Context, n *Node, p peer.ID, proto protocol.ID, size int) {
	t.Helper()
	st, err := n.Host().NewStream(network.WithAllowLimitedConn(ctx, "test"), p, proto)
	if err != nil {
		t.Fatal(err)
	}
	WriteAndEnd(t, st, size)
}

// WriteAndEnd writes size bytes on st and ends it.
func WriteAndEnd(t testing.TB, st network.Stream, size int) {
	t.Helper()
	if _, err := st.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownDeliversWhatWasWritten checks that what a node wrote on a
// stream before Shutdown, its end included, reaches the peer: the last
// frames of a large write are still queued for yamux's writer when
// Shutdown begins, and the peer reads every byte and the stream's end.
// Close in its place drops them (the peer reads a reset) in most runs.
func TestShutdownDeliversWhatWasWritten(t *testing.T) {
	const proto, size, rounds = "/test/sink", 4 << 20, 3
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range rounds {
		a, b := newShutdownNode(t), newShutdownNode(t)
		got := Sink(b, proto, nil)
		if err := a.Connect(ctx, b.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		SendAndEnd(t, ctx, a, b.ID(), proto, size)
		if err := a.Shutdown(ctx); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		if r := <-got; r.Err != nil || r.N != size {
			t.Fatalf("round %d: the peer read %d of %d bytes, then %v", round, r.N, size, r.Err)
		}
	}
}

// TestShutdownSilentPeer checks that a peer that stops reading holds
// Shutdown only until ctx ends: the connection is then closed, and
// Shutdown says it closed it unanswered.
func TestShutdownSilentPeer(t *testing.T) {
	b := newShutdownNode(t)
	ip, _ := b.Host().Addrs()[0].ValueForProtocol(ma.P_IP4)
	port, _ := b.Host().Addrs()[0].ValueForProtocol(ma.P_TCP)
	p := stallproxy.New(t, net.JoinHostPort(ip, port))
	viaProxy := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(p.Port()))
	a := newShutdownNode(t)
	ctx := context.Background()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{viaProxy}}); err != nil {
		t.Fatal(err)
	}
	var sess *goyamux.Session
	if !a.Host().Network().ConnsToPeer(b.ID())[0].As(&sess) {
		t.Fatal("not a yamux connection")
	}
	// yamux pings at a session's start to measure its round trip, and a
	// Ping made while one is out takes that one's answer: waited for
	// here, it cannot answer the ping below, which would then leave the
	// read the proxy is in to Shutdown's question (about 1 run in 60).
	if _, err := sess.Ping(); err != nil {
		t.Fatal(err)
	}
	// The proxy relays what the read it is in when stalled returns: a
	// ping either is that read, answered, or is not relayed at all (it
	// then ends with the connection).
	p.Stall()
	pinged := make(chan struct{})
	go func() { sess.Ping(); close(pinged) }()
	select {
	case <-pinged:
	case <-time.After(500 * time.Millisecond):
	}

	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err := a.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a silent peer: %v, want it to match context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "1 connection closed before its peer answered") {
		t.Errorf("Shutdown with a silent peer: %v, want it to count the connection", err)
	}
	if c := a.Host().Network().Conns(); len(c) != 0 {
		t.Errorf("%d connections left open", len(c))
	}
	<-pinged
}

// TestShutdownWithoutConns checks that a node without connections shuts
// down as by Close, and that Close after Shutdown does no harm.
func TestShutdownWithoutConns(t *testing.T) {
	a := newShutdownNode(t)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadAfterPeerClosed checks that data a stream received before its
// peer's connection ended is read whole before the stream's end: go-yamux
// returns the session's end (io.EOF when the peer closed the connection)
// from a Read that delivered data and then failed to send a window
// update, which a reader takes for the stream's end, its last bytes
// unread (yamuxStream.Read defers that error).
func TestReadAfterPeerClosed(t *testing.T) {
	const proto, size = "/test/late", 200 << 10 // within the first window
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := newShutdownNode(t), newShutdownNode(t)
	start := make(chan struct{})
	got := Sink(b, proto, start)
	if err := a.Connect(ctx, b.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	SendAndEnd(t, ctx, a, b.ID(), proto, size)
	if err := a.Shutdown(ctx); err != nil { // b's yamux has read it all
		t.Fatal(err)
	}
	for b.Host().Network().Connectedness(a.ID()) == network.Connected {
		time.Sleep(time.Millisecond)
	}
	close(start)
	if r := <-got; r.Err != nil || r.N != size {
		t.Fatalf("read %d of %d bytes, then %v", r.N, size, r.Err)
	}
}

// TestShutdownWithCtxOver: a Shutdown whose ctx ended before it began
// (the layers above took it all, as a Peer's endpoint waiting for an
// idle sender does) says so, rather than that its peers did not answer:
// it asked none. Before: "1 connection closed before its peer answered".
func TestShutdownWithCtxOver(t *testing.T) {
	a, b := newShutdownNode(t), newShutdownNode(t)
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := a.Shutdown(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "its ctx ended before it began; 1 connection closed without asking") {
		t.Fatalf("Shutdown with its ctx over: %v", err)
	}
	if c := a.Host().Network().Conns(); len(c) != 0 {
		t.Errorf("%d connections left open", len(c))
	}
}
