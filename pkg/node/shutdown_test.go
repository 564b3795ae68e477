package node

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	goyamux "github.com/libp2p/go-yamux/v5"
	ma "github.com/multiformats/go-multiaddr"
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
		type result struct {
			n   int64
			err error
		}
		got := make(chan result, 1)
		b.Host().SetStreamHandler(proto, func(s network.Stream) {
			n, err := io.Copy(io.Discard, s)
			got <- result{n, err}
			s.Close()
		})
		if err := a.Connect(ctx, b.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		st, err := a.Host().NewStream(ctx, b.ID(), proto)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if err := a.Shutdown(ctx); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		if r := <-got; r.err != nil || r.n != size {
			t.Fatalf("round %d: the peer read %d of %d bytes, then %v", round, r.n, size, r.err)
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
	p := newStallingProxy(t, net.JoinHostPort(ip, port))
	viaProxy := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(p.ln.Addr().(*net.TCPAddr).Port))
	a := newShutdownNode(t)
	ctx := context.Background()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{viaProxy}}); err != nil {
		t.Fatal(err)
	}
	// The proxy relays what the read it is in when stalled returns: a
	// ping either is that read, answered, or is not relayed at all (it
	// then ends with the connection).
	p.stall()
	var sess *goyamux.Session
	if !a.Host().Network().ConnsToPeer(b.ID())[0].As(&sess) {
		t.Fatal("not a yamux connection")
	}
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
	t.Log(err)
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
	type result struct {
		n   int
		err error
	}
	start, got := make(chan struct{}), make(chan result, 1)
	b.Host().SetStreamHandler(proto, func(s network.Stream) {
		<-start
		buf, err := io.ReadAll(s)
		got <- result{len(buf), err}
		s.Close()
	})
	if err := a.Connect(ctx, b.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	st, err := a.Host().NewStream(ctx, b.ID(), proto)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil { // b's yamux has read it all
		t.Fatal(err)
	}
	for b.Host().Network().Connectedness(a.ID()) == network.Connected {
		time.Sleep(time.Millisecond)
	}
	close(start)
	if r := <-got; r.err != nil || r.n != size {
		t.Fatalf("read %d of %d bytes, then %v", r.n, size, r.err)
	}
}
