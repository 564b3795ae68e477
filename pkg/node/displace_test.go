package node_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// silent opens a raw TCP socket from ip to n and sends nothing on it;
// closed counts it once the node has closed it.
func silent(t *testing.T, n *node.Node, ip net.IP, closed *atomic.Int64) {
	t.Helper()
	na, err := manet.ToNetAddr(n.Host().Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	c, err := d.Dial("tcp", na.String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, c)
		if closed != nil {
			closed.Add(1)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
}

// fillHandshakeSlots has hosts 127.0.1.1, .2, … open silent sockets to
// n, perHost each, until they hold every slot for handshakes left free
// (slots of them).
func fillHandshakeSlots(t *testing.T, n *node.Node, slots, perHost int, closed *atomic.Int64) {
	t.Helper()
	held := transientInbound(n)
	for i := range slots {
		silent(t, n, net.IPv4(127, 0, 1, byte(1+i/perHost)), closed)
	}
	if !waitFor(within(t), func() bool { return transientInbound(n) == held+slots }) {
		t.Fatalf("%d silent sockets from %d hosts: the transient scope holds %d inbound connections, want %d",
			slots, (slots+perHost-1)/perHost, transientInbound(n), held+slots)
	}
}

// TestDisplacingDialChargedOnce: peers behind one address (127.0.0.1)
// have spent all but one of the connections go-libp2p's rate limit lets
// an address open; silent sockets from ten other hosts then hold every
// handshake slot, and one more peer from that address dials. Its
// connection displaces a silent socket and connects: the connection
// asking again after the displacement is not charged a second time.
func TestDisplacingDialChargedOnce(t *testing.T) {
	const burst = node.MaxHandshakesPerHost
	n := testutil.NewNode(t, node.WithLoopbackHandshakeLimit(), node.WithLoopbackRateLimit(burst))
	for i := range burst - 1 {
		h := rawHost(t, "", nil)
		if err := h.Connect(within(t), n.AddrInfo()); err != nil {
			t.Fatalf("peer %d behind the address: %v", i, err)
		}
		h.Close()
	}
	if !waitFor(within(t), func() bool { return len(n.Host().Network().Conns()) == 0 }) {
		t.Fatalf("%d connections still open", len(n.Host().Network().Conns()))
	}
	fillHandshakeSlots(t, n, node.HandshakeSlots(), node.MaxHandshakesPerHost, nil)
	err := rawHost(t, "", nil).Connect(within(t), n.AddrInfo())
	st := n.GateStats()
	if err != nil {
		t.Fatalf("the address's last connection, with every handshake slot held: %v (%+v)", err, st)
	}
	if st.HandshakesDisplaced != 1 || st.ConnsRefused != 0 {
		t.Fatalf("after the dial: %+v, want 1 handshake displaced, none refused", st)
	}
}

// stallingLink is a slow link from honest peers to n: it forwards each
// connection made to it to n from 127.0.0.1 (peers behind one NAT), what
// a peer sends at once, what n answers only once released.
type stallingLink struct {
	ln      net.Listener
	release chan struct{}
	spoken  atomic.Int64 // connections whose peer's first bytes went through
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newStallingLink(t *testing.T, n *node.Node) *stallingLink {
	t.Helper()
	na, err := manet.ToNetAddr(n.Host().Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &stallingLink{ln: ln, release: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", na.String())
			if err != nil {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, u)
			l.mu.Unlock()
			l.wg.Add(2)
			go func() {
				defer l.wg.Done()
				defer u.Close()
				b := make([]byte, 4096)
				k, err := c.Read(b)
				if err != nil {
					return
				}
				if _, err := u.Write(b[:k]); err != nil {
					return
				}
				l.spoken.Add(1)
				io.Copy(u, c)
			}()
			go func() {
				defer l.wg.Done()
				<-l.release
				io.Copy(c, u)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		l.open()
		l.mu.Lock()
		for _, c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return l
}

// addr is the link's address, to dial n by.
func (l *stallingLink) addr() ma.Multiaddr {
	a, err := manet.FromNetAddr(l.ln.Addr())
	if err != nil {
		panic(err)
	}
	return a
}

// open lets n's answers through.
func (l *stallingLink) open() {
	select {
	case <-l.release:
	default:
		close(l.release)
	}
}

// TestHandshakeDisplacesSilentFirst: honest peers behind one address
// (127.0.0.1) dial the node over a slow link, MaxHandshakesPerHost of
// them, and wait for its answers; silent sockets from 18 other hosts,
// 4 each, take the other handshake slots, then 16 more hosts open one
// each. The honest peers' address holds the most handshakes in progress,
// and the oldest, but they have spoken (their multistream header): every
// handshake displaced is a silent socket's, and once the link delivers
// the node's answers every honest peer connects.
func TestHandshakeDisplacesSilentFirst(t *testing.T) {
	n := testutil.NewNode(t, node.WithLoopbackHandshakeLimit())
	link := newStallingLink(t, n)
	const honest = node.MaxHandshakesPerHost
	errs := make(chan error, honest)
	for range honest {
		h := rawHost(t, "", nil)
		go func() { errs <- h.Connect(within(t), peer.AddrInfo{ID: n.ID(), Addrs: []ma.Multiaddr{link.addr()}}) }()
	}
	if !waitFor(within(t), func() bool { return transientInbound(n) == honest && link.spoken.Load() == honest }) {
		t.Fatalf("%d honest handshakes in progress, %d of them spoken, want %d", transientInbound(n), link.spoken.Load(), honest)
	}
	var full, last atomic.Int64
	fillHandshakeSlots(t, n, node.HandshakeSlots()-honest, 4, &full)
	const more = 16
	for i := range more {
		silent(t, n, net.IPv4(127, 0, 2, byte(1+i)), &last)
	}
	// Each of the last displaces one handshake. The wait ends before the
	// node's handshake timeout (15 s) closes every silent socket.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !waitFor(ctx, func() bool { return n.GateStats().HandshakesDisplaced == more }) || last.Load() != 0 {
		t.Fatalf("%d sockets opened with every slot taken: %d displacements, %d of the silent hosts' sockets closed, %d of the last",
			more, n.GateStats().HandshakesDisplaced, full.Load(), last.Load())
	}
	link.open()
	var failed []error
	for range honest {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d honest peers behind the slow link failed to connect (%d of the silent hosts' sockets closed), the first: %v",
			len(failed), honest, full.Load(), failed[0])
	}
	if !waitFor(within(t), func() bool { return full.Load() == more }) {
		t.Fatalf("%d of the silent hosts' sockets closed, want %d", full.Load(), more)
	}
}
