package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// TestPeerstoreChurnBounded: identities made one after another connect
// to a node, each announcing 500 addresses through identify, and leave.
// The node keeps MaxAddrsPerPeer addresses of each while connected, and
// the addresses of MaxDepartedPeers of those that left (it kept 500 of a
// connected one, then 20 of every one that left, in a map sized for 500,
// for 15 minutes: 39 MiB for 1,000 of them); an honest peer connected
// all along keeps its addresses. The bound on departed peers is lowered
// to 64 for the test (the node's is MaxDepartedPeers), so that 128
// identities show it.
func TestPeerstoreChurnBounded(t *testing.T) {
	const bound = 64
	restore := node.SetDepartedBound(bound)
	n := testutil.NewNode(t)
	restore()
	ps := n.Host().Peerstore()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	honest := testutil.NewNode(t)
	if err := honest.Connect(ctx, n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	identified := func(p peer.ID) func() bool {
		return func() bool { ps, _ := ps.GetProtocols(p); return len(ps) > 0 }
	}
	// Identify stores a peer's protocols before its addresses.
	if !waitFor(ctx, func() bool { return identified(honest.ID())() && len(ps.Addrs(honest.ID())) > 0 }) {
		t.Fatal("honest peer not identified")
	}
	honestAddrs := len(ps.Addrs(honest.ID()))

	fake := fakeAddrs(500)
	first := rawHost(t, "", fake)
	if err := first.Connect(ctx, n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool { return len(ps.Addrs(first.ID())) > 0 }) {
		t.Fatal("first sybil's addresses never stored")
	}
	waitFor(ctx, func() bool { return len(ps.Addrs(first.ID())) >= node.MaxAddrsPerPeer })
	if got := len(ps.Addrs(first.ID())); got > node.MaxAddrsPerPeer {
		t.Fatalf("a connected peer announcing %d addresses: %d kept, want at most %d", len(fake), got, node.MaxAddrsPerPeer)
	}
	first.Close()

	// The rest come and go 8 at a time.
	const churn = 2 * bound
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for range churn {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			h := rawHost(t, "", fake)
			defer h.Close()
			if err := h.Connect(ctx, n.AddrInfo()); err != nil {
				t.Error(err)
				return
			}
			waitFor(ctx, func() bool { return len(ps.Addrs(h.ID())) > 0 })
		}()
	}
	wg.Wait()
	// Identify writes a departed peer's addresses as it learns of the
	// disconnection: wait until all have been counted in or out.
	want := uint64(churn + 1 - bound)
	if !waitFor(ctx, func() bool { return n.PeerstoreStats().DepartedForgotten >= want }) {
		t.Fatalf("after %d sybils left: %+v, want %d departed peers forgotten", churn+1, n.PeerstoreStats(), want)
	}
	withAddrs := len(ps.PeersWithAddrs())
	// the node itself, the honest peer and the departed peers kept
	if max := bound + 2; withAddrs > max {
		t.Fatalf("after %d sybils left, addresses of %d peers kept, want at most %d", churn+1, withAddrs, max)
	}
	if got := len(ps.Addrs(honest.ID())); got < honestAddrs {
		t.Fatalf("honest connected peer: %d addresses, had %d", got, honestAddrs)
	}
	t.Logf("%d sybils came and went: addresses of %d peers kept; %+v", churn+1, withAddrs, n.PeerstoreStats())
}
