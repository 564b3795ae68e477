package node

import (
	"cmp"
	"slices"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// DHTMaxAddrsPerPeer bounds the addresses the node's DHT names for each
// peer in its answers (FIND_NODE and the closer peers of GET_PROVIDERS).
// A dial needs one address that works: 8 holds TCP and QUIC, over IPv4
// and IPv6, at a public and a private address. kad-dht named every
// address the peerstore held, and identify keeps up to MaxAddrsPerPeer
// for a connected peer (500 before): sybils in the routing table
// announcing 500 each made a FIND_NODE request of 41 bytes draw an answer
// of ~100 KB.
const DHTMaxAddrsPerPeer = 8

// dhtHost is the host the DHT is given: the node's, whose peerstore names
// at most DHTMaxAddrsPerPeer addresses of a peer. kad-dht answers from
// the peerstore and offers no option to bound the addresses it sends
// (its AddressFilter sees only provider records). The DHT dials through
// the node's host, which dials every address the peerstore holds.
type dhtHost struct {
	host.Host
	ps dhtPeerstore
}

func newDHTHost(h host.Host) *dhtHost { return &dhtHost{Host: h, ps: dhtPeerstore{h.Peerstore()}} }

func (h *dhtHost) Peerstore() peerstore.Peerstore { return h.ps }

type dhtPeerstore struct{ peerstore.Peerstore }

func (ps dhtPeerstore) Addrs(p peer.ID) []ma.Multiaddr {
	return fewestAddrs(ps.Peerstore.Addrs(p), DHTMaxAddrsPerPeer)
}

func (ps dhtPeerstore) PeerInfo(p peer.ID) peer.AddrInfo {
	return peer.AddrInfo{ID: p, Addrs: ps.Addrs(p)}
}

// fewestAddrs returns at most n of addrs: public ones first, then
// private, then loopback and the rest, which a remote asker is least
// likely to reach; in byte order within each, so that every answer names
// the same ones.
func fewestAddrs(addrs []ma.Multiaddr, n int) []ma.Multiaddr {
	if len(addrs) <= n {
		return addrs
	}
	rank := func(a ma.Multiaddr) int {
		switch {
		case manet.IsPublicAddr(a):
			return 0
		case manet.IsPrivateAddr(a):
			return 1
		default:
			return 2
		}
	}
	sorted := slices.Clone(addrs)
	slices.SortFunc(sorted, func(a, b ma.Multiaddr) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return cmp.Compare(string(a.Bytes()), string(b.Bytes()))
	})
	return sorted[:n]
}
