package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-msgio/pbio"
	"google.golang.org/protobuf/proto"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// TestDHTAnswersBoundAddrs: DHT servers announcing 500 addresses each
// (identify stored them all) get into a node's routing table by querying
// it; a client's FIND_NODE requests then draw answers naming at most
// DHTMaxAddrsPerPeer addresses per peer (they named all 500: a request of
// a few dozen bytes drew ~100 KB). The node still finds an honest peer's
// dialable address through the DHT.
func TestDHTAnswersBoundAddrs(t *testing.T) {
	n := testutil.NewNode(t, node.WithDHT(node.DHTServer))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fake := fakeAddrs(500)
	const sybils = 8
	for range sybils {
		dhtServer(t, ctx, n, "", fake) // a querying DHT server joins the routing table
	}
	rt := n.Routing().(*dht.IpfsDHT).RoutingTable()
	if !waitFor(ctx, func() bool { return rt.Size() >= sybils }) {
		t.Fatalf("routing table holds %d peers, want the %d sybils", rt.Size(), sybils)
	}
	c := rawHost(t, "", nil)
	if err := c.Connect(ctx, n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		req := []byte(fmt.Sprintf("key-%d", i))
		resp := findNode(t, ctx, c, n.ID(), req)
		size := proto.Size(resp)
		if len(resp.CloserPeers) < sybils {
			t.Fatalf("answer names %d peers, want the %d sybils", len(resp.CloserPeers), sybils)
		}
		for _, p := range resp.CloserPeers {
			if len(p.Addrs) > node.DHTMaxAddrsPerPeer {
				t.Fatalf("FIND_NODE answer (%d bytes) names %d addresses of a peer, want at most %d",
					size, len(p.Addrs), node.DHTMaxAddrsPerPeer)
			}
		}
		if i == 0 {
			t.Logf("FIND_NODE answer: %d bytes, %d peers", size, len(resp.CloserPeers))
		}
	}
	// An honest DHT server joining through the node is found by a third
	// one, at an address it can dial.
	honest := testutil.NewNode(t, node.WithDHT(node.DHTServer), node.WithBootstrapPeers(n.AddrInfo()))
	asker := testutil.NewNode(t, node.WithDHT(node.DHTClient), node.WithBootstrapPeers(n.AddrInfo()))
	if err := honest.RefreshRouting(ctx); err != nil {
		t.Fatal(err)
	}
	var found peer.AddrInfo
	waitFor(ctx, func() bool {
		found, _ = asker.Routing().FindPeer(ctx, honest.ID())
		return len(found.Addrs) > 0
	})
	n.Host().Network().ClosePeer(honest.ID()) // not the node's connection: the asker dials
	if err := asker.Connect(ctx, found); err != nil {
		t.Fatalf("honest peer found at %v: %v", found.Addrs, err)
	}
}

// findNode sends one FIND_NODE for key from h to p and returns the answer.
func findNode(t *testing.T, ctx context.Context, h host.Host, p peer.ID, key []byte) *dhtpb.Message {
	t.Helper()
	s, err := h.NewStream(ctx, p, node.DHTProtocolPrefix+"/kad/1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := pbio.NewDelimitedWriter(s).WriteMsg(dhtpb.NewMessage(dhtpb.Message_FIND_NODE, key, 0)); err != nil {
		t.Fatal(err)
	}
	var resp dhtpb.Message
	if err := pbio.NewDelimitedReader(s, 4<<20).ReadMsg(&resp); err != nil {
		t.Fatal(err)
	}
	return &resp
}
