package node_test

import (
	"io"
	"net"
	"sync/atomic"
	"testing"

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
