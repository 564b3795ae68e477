package node

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p-kbucket/peerdiversity"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
)

// MaxRoutingPeersPerHost bounds the places one remote host (an IPv4
// address, an IPv6 /64) holds in the node's DHT routing table; its
// further peers are refused a place, counted (DHTStats.RoutingRefused).
// Any DHT server that connects to a node joins its table once it
// answers a query, so without it one host's identities, which cost a
// key each, could fill the table and be most of the peers a lookup
// starts from and FIND_NODE names. A host runs one node or a few, and
// kad-dht's public DHT (amino) admits 3 peers of a whole IPv4 /16 or
// IPv6 network to its table (amino.DefaultMaxPeersPerIPGroup): 3 per
// host admits every host at least as many, and leaves one at most 3 of
// a bucket's 20 places.
//
// A peer connected from one of the IP addresses the node itself listens
// on (its interface addresses for 0.0.0.0 or ::) runs on the node's own
// machine and is not counted: processes on the machine itself are not
// strangers (go-libp2p's per-IP limits exempt loopback for the same
// reason) and a lab swarm runs dozens of nodes at 127.0.0.1. Other
// loopback addresses (127.0.0.2, …) are hosts like any other.
const MaxRoutingPeersPerHost = 3

// routingHosts is the DHT routing table's diversity filter (kad-dht's
// RoutingTablePeerDiversityFilter): the table consults it under its
// own lock before it adds a peer and tells it of every peer it drops,
// so that it counts what the table holds, not what was once let in.
// kad-dht's RoutingTableFilter would not do: it is asked when a peer
// is found, before the liveness check, and the table adds peers later
// without asking again, so peers found at once would all pass; it is
// never told of peers dropped.
//
// The table's filter (peerdiversity.Filter) asks PeerAddresses for the
// peer's addresses, then Allow for each, then Increment for each if all
// were allowed; Decrement for each when the peer leaves. It groups the
// addresses by its own rule (IPv4 /16, IPv6 network), so routingHosts
// names one address, that of the connection whose host the peer is
// counted under, and counts by host itself.
type routingHosts struct {
	net     network.Network
	max     int
	refused atomic.Uint64

	mu     sync.Mutex
	last   routingPlace // of the peer PeerAddresses was last asked about
	held   map[peer.ID]routingPlace
	byHost map[netip.Prefix]int
}

var _ peerdiversity.PeerIPGroupFilter = (*routingHosts)(nil)

// routingPlace is the host a peer is counted under and the address
// named for it; own if the host is the node's own.
type routingPlace struct {
	id   peer.ID
	addr ma.Multiaddr
	host netip.Prefix
	own  bool
}

func newRoutingHosts(n network.Network, max int) *routingHosts {
	return &routingHosts{net: n, max: max, held: map[peer.ID]routingPlace{}, byHost: map[netip.Prefix]int{}}
}

// PeerAddresses names the remote address of the connection p is counted
// under: a direct one if p has any, else a relayed one (the relay's
// host). None if p has no connection with an IP address, which the
// table's filter refuses: a peer joins the table after answering a
// query, so it is connected, and p2pmsg's transports all run over IP.
func (r *routingHosts) PeerAddresses(p peer.ID) []ma.Multiaddr {
	pl, ok := r.placeOf(p)
	r.mu.Lock()
	r.last = pl
	r.mu.Unlock()
	if !ok {
		return nil
	}
	return []ma.Multiaddr{pl.addr}
}

// Allow admits g's peer unless its host holds max places already.
func (r *routingHosts) Allow(g peerdiversity.PeerGroupInfo) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	pl := r.lastFor(g.Id)
	if pl.own || r.byHost[pl.host] < r.max {
		return true
	}
	r.refused.Add(1)
	return false
}

// Increment counts g's peer under its host.
func (r *routingHosts) Increment(g peerdiversity.PeerGroupInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop(g.Id) // not held twice
	pl := r.lastFor(g.Id)
	r.held[g.Id] = pl
	if !pl.own {
		r.byHost[pl.host]++
	}
}

// Decrement gives the place of g's peer back to the host it was
// counted under.
func (r *routingHosts) Decrement(g peerdiversity.PeerGroupInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop(g.Id)
}

func (r *routingHosts) drop(p peer.ID) {
	pl, ok := r.held[p]
	if !ok {
		return
	}
	delete(r.held, p)
	if pl.own {
		return
	}
	if r.byHost[pl.host]--; r.byHost[pl.host] <= 0 {
		delete(r.byHost, pl.host)
	}
}

// lastFor returns the place PeerAddresses found for p. The table's
// filter asks Allow and Increment right after PeerAddresses, under its
// own lock; the place is found again should that ever change.
func (r *routingHosts) lastFor(p peer.ID) routingPlace {
	if r.last.id == p {
		return r.last
	}
	pl, _ := r.placeOf(p)
	return pl
}

// placeOf finds the host p is counted under, from its connections; it
// takes no lock of r's.
func (r *routingHosts) placeOf(p peer.ID) (routingPlace, bool) {
	pl, found := routingPlace{id: p}, false
	for _, c := range r.net.ConnsToPeer(p) {
		a := c.RemoteMultiaddr()
		h, ok := hostkey.FromMultiaddr(a)
		if !ok {
			continue
		}
		if !found || (isRelayed(pl.addr) && !isRelayed(a)) {
			pl.addr, pl.host, found = a, h, true
		}
	}
	if found {
		pl.own = r.isOwn(pl.addr)
	}
	return pl, found
}

// isOwn reports whether a's IP address is one the node listens on.
func (r *routingHosts) isOwn(a ma.Multiaddr) bool {
	ip, ok := firstIP(a)
	if !ok {
		return false
	}
	own, err := r.net.InterfaceListenAddresses()
	if err != nil {
		return false
	}
	for _, o := range own {
		if oip, ok := firstIP(o); ok && oip == ip {
			return true
		}
	}
	return false
}

// firstIP returns a's first IP address, unmapped, without zone.
func firstIP(a ma.Multiaddr) (netip.Addr, bool) {
	for _, c := range a {
		switch c.Code() {
		case ma.P_IP4, ma.P_IP6:
			ip, ok := netip.AddrFromSlice(c.RawValue())
			return ip.Unmap().WithZone(""), ok
		}
	}
	return netip.Addr{}, false
}
