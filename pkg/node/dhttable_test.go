package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// TestDHTRoutingTableBoundPerHost: 30 real kad-dht servers on one host
// (127.0.0.2) connect to a node and query it, beside honest DHT servers
// at the node's own address (127.0.0.1, a lab swarm's: four, more than a
// host's places, not counted) and on hosts of their own (127.0.0.3–6).
// The sybils hold at most MaxRoutingPeersPerHost places in the node's
// routing table, the others refused and counted (all 30 got in, 16 of
// the 20 peers nearest a key); every honest server is in the table and
// among the 20 peers nearest a key (what FIND_NODE answers). Places the
// table frees are the host's to take again.
func TestDHTRoutingTableBoundPerHost(t *testing.T) {
	victim := testutil.NewNode(t, node.WithDHT(node.DHTServer))
	rt := victim.Routing().(*dht.IpfsDHT).RoutingTable()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var honest []peer.ID
	for i := range 8 {
		opts := []node.Option{node.WithDHT(node.DHTServer), node.WithBootstrapPeers(victim.AddrInfo())}
		if i%2 == 1 { // a host of its own; dialling from its listening port, the victim sees that host
			opts = append(opts, node.WithListenAddrs(fmt.Sprintf("/ip4/127.0.0.%d/tcp/0", 3+i/2)), node.WithTCPPortReuse())
		}
		honest = append(honest, testutil.NewNode(t, opts...).ID())
	}
	inTable := func(ps []peer.ID) (n int) {
		for _, p := range ps {
			if rt.Find(p) != "" {
				n++
			}
		}
		return n
	}
	if !waitFor(ctx, func() bool { return inTable(honest) == len(honest) }) {
		t.Fatalf("%d of %d honest servers in the routing table", inTable(honest), len(honest))
	}

	const sybils = 30
	hosts := make([]host.Host, sybils)
	ids := make([]peer.ID, sybils)
	for i := range hosts {
		hosts[i] = dhtServer(t, ctx, victim, "/ip4/127.0.0.2/tcp/0", nil)
		ids[i] = hosts[i].ID()
	}
	settled := func() bool {
		return inTable(ids)+int(victim.DHTStats().RoutingRefused) >= sybils
	}
	waitFor(ctx, settled)
	held, st := inTable(ids), victim.DHTStats()
	nearest := rt.NearestPeers(kb.ConvertKey("a key an honest peer looks up"), 20)
	t.Logf("%d sybils of one host: %d in the routing table (%d peers), %d refusals; %d of the 20 nearest a key",
		sybils, held, rt.Size(), st.RoutingRefused, inList(nearest, ids))
	if held > node.MaxRoutingPeersPerHost || st.RoutingRefused == 0 {
		t.Fatalf("sybils of one host hold %d places in the routing table (%+v), want at most %d and the rest refused",
			held, st, node.MaxRoutingPeersPerHost)
	}
	if n := inTable(honest); n != len(honest) {
		t.Fatalf("%d of %d honest servers left in the routing table", n, len(honest))
	}
	if n := inList(nearest, honest); n != len(honest) {
		t.Fatalf("%d of the %d honest servers among the 20 peers nearest a key (%d peers)", n, len(honest), len(nearest))
	}

	// The table drops the sybils it holds (as when they stop answering);
	// the host's other sybils, found again, take their places, no more.
	for _, p := range ids {
		rt.RemovePeer(p)
	}
	refused := victim.DHTStats().RoutingRefused
	for _, h := range hosts {
		h.Network().ClosePeer(victim.ID())
		if err := h.Connect(ctx, victim.AddrInfo()); err != nil { // identify tells the node's DHT of it again
			t.Fatal(err)
		}
	}
	waitFor(ctx, func() bool {
		return inTable(ids) == node.MaxRoutingPeersPerHost && victim.DHTStats().RoutingRefused > refused
	})
	if held := inTable(ids); held != node.MaxRoutingPeersPerHost {
		t.Fatalf("after the table dropped them, sybils hold %d places, want %d again", held, node.MaxRoutingPeersPerHost)
	}
}

// dhtServer starts a kad-dht server under p2pmsg's protocol on a raw
// host listening on listen (rawHost: "" for 127.0.0.1) and announcing
// addrs, dialling from its listening port (go-libp2p's default),
// connects it to n and has it query n, as a DHT server joining does.
// It does not refresh its own routing table: 30 such servers that did
// learned of each other from n and dialled each other (30-37 connections
// each), which took TestDHTRoutingTableBoundPerHost's 30 sybils 55-80 s
// to join under CI-like load against the test's 2-minute bound; n sees
// each join as before.
func dhtServer(t *testing.T, ctx context.Context, n *node.Node, listen string, addrs []ma.Multiaddr) host.Host {
	t.Helper()
	h := rawHost(t, listen, addrs)
	d, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix(node.DHTProtocolPrefix), dht.DisableValues(),
		dht.DisableAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := h.Connect(ctx, n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	findNode(t, ctx, h, n.ID(), []byte(h.ID()))
	return h
}

func inList(list, want []peer.ID) (n int) {
	for _, p := range want {
		for _, q := range list {
			if p == q {
				n++
				break
			}
		}
	}
	return n
}
