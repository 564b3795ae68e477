package testutil

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// LoopbackTCP is a loopback TCP listen address, the one test nodes use
// by default.
const LoopbackTCP = "/ip4/127.0.0.1/tcp/0"

// LoopbackQUIC is a loopback QUIC listen address, for node.WithListenAddrs.
const LoopbackQUIC = "/ip4/127.0.0.1/udp/0/quic-v1"

// TransportEnv names the environment variable that picks the transport
// of test nodes: "quic" for loopback QUIC, "" or "tcp" for loopback TCP
// (make test-quic runs the layers' tests on QUIC).
const TransportEnv = "P2PMSG_TEST_TRANSPORT"

// Loopback is the listen address test nodes use unless told otherwise:
// LoopbackTCP, or LoopbackQUIC when TransportEnv says "quic". It panics
// on any other value, a mistake in the test's command line.
func Loopback() string {
	switch v := os.Getenv(TransportEnv); v {
	case "", "tcp":
		return LoopbackTCP
	case "quic":
		return LoopbackQUIC
	default:
		panic(fmt.Sprintf("%s=%q: want tcp or quic", TransportEnv, v))
	}
}

// NewNode starts a node with an ephemeral key listening on Loopback()
// (unless opts say otherwise) and closes it when the test ends.
func NewNode(t testing.TB, opts ...node.Option) *node.Node {
	t.Helper()
	all := append([]node.Option{node.WithEphemeralKey(), node.WithListenAddrs(Loopback())}, opts...)
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

// NodeOnHost starts a node listening on loopback address ip only (such
// as 127.0.0.2), and has from connect to it, so that from sees the
// connection's remote host as ip whichever address the node would dial
// from: a peer on another host, for the bounds shared out by host.
func NodeOnHost(t testing.TB, ip string, from *node.Node) *node.Node {
	t.Helper()
	n := NewNode(t, node.WithListenAddrs("/ip4/"+ip+"/tcp/0"))
	if err := from.Connect(context.Background(), peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	return n
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
