package testutil

import (
	"context"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// LoopbackTCP is the listen address test nodes use.
const LoopbackTCP = "/ip4/127.0.0.1/tcp/0"

// LoopbackQUIC is a loopback QUIC listen address, for node.WithListenAddrs.
const LoopbackQUIC = "/ip4/127.0.0.1/udp/0/quic-v1"

// NewNode starts a node with an ephemeral key listening on loopback TCP
// (unless opts say otherwise) and closes it when the test ends.
func NewNode(t testing.TB, opts ...node.Option) *node.Node {
	t.Helper()
	all := append([]node.Option{node.WithEphemeralKey(), node.WithListenAddrs(LoopbackTCP)}, opts...)
	n, err := node.New(context.Background(), all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// NewConnectedNodes starts count loopback nodes, each connected to every
// other.
func NewConnectedNodes(t testing.TB, count int) []*node.Node {
	t.Helper()
	nodes := make([]*node.Node, count)
	for i := range nodes {
		nodes[i] = NewNode(t)
	}
	for i := range nodes {
		for j := i + 1; j < count; j++ {
			if err := nodes[i].Connect(context.Background(), peer.AddrInfo{ID: nodes[j].ID(), Addrs: nodes[j].Host().Addrs()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return nodes
}

// FreshPeerID is the peer ID of a new Ed25519 key that nobody keeps: a
// made-up peer, as a hostile peer names one.
func FreshPeerID(t testing.TB) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
