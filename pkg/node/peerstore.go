package node

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	ma "github.com/multiformats/go-multiaddr"
)

// Peerstore bounds. Identify stores up to 500 addresses a connected peer
// announces and, once it leaves, 20 of them for RecentlyConnectedAddrTTL
// (15 minutes); go-libp2p's memory peerstore holds a peer's addresses in
// a map of its own, which does not shrink when addresses are dropped. So
// each identity that connected, announced 500 addresses and left cost a
// node ~31 KiB for 15 minutes, and identities cost nothing to make: 1,000
// of them from one process grew a node's heap by 39 MiB.
const (
	// MaxAddrsPerPeer bounds the addresses the node keeps for one peer,
	// connected or not; more are not stored, counted
	// (PeerstoreStats.AddrsRefused). It is go-libp2p's own bound for a
	// peer the node is not connected to (well above the ~26 addresses of
	// well-connected nodes listening on many transports), which identify
	// otherwise lifts to 500 for a connected one.
	MaxAddrsPerPeer = 64
	// MaxDepartedPeers bounds the peers whose addresses the node keeps
	// after they disconnect (identify keeps them 15 minutes, to dial the
	// peer again): when one more leaves, the addresses of the peer that
	// left longest ago are dropped (PeerstoreStats.DepartedForgotten).
	// Twice the connections the resource manager lets a node hold (504
	// on a 24 GiB machine), so that a node that turns all its
	// connections over twice still finds the peers of the first turn;
	// peers identities churned by the thousand then push out one another
	// rather than filling memory, and a connected peer's addresses are
	// never dropped for them.
	MaxDepartedPeers = 1024
)

// departedBound is MaxDepartedPeers, lowered by tests.
var departedBound = MaxDepartedPeers

// PeerstoreStats counts what the node's peerstore did not keep.
type PeerstoreStats struct {
	// AddrsRefused counts addresses not stored: their peer already had
	// MaxAddrsPerPeer.
	AddrsRefused uint64
	// DepartedForgotten counts disconnected peers whose addresses were
	// dropped before they expired, to keep MaxDepartedPeers.
	DepartedForgotten uint64
}

// PeerstoreStats returns the peerstore's counters (zero when a peerstore
// was given with WithLibp2pOptions).
func (n *Node) PeerstoreStats() PeerstoreStats {
	ps, ok := n.host.Peerstore().(*boundedPeerstore)
	if !ok {
		return PeerstoreStats{}
	}
	return PeerstoreStats{AddrsRefused: ps.refused.Load(), DepartedForgotten: ps.forgotten.Load()}
}

// boundedPeerstore is go-libp2p's memory peerstore with at most
// MaxAddrsPerPeer addresses per peer and the addresses of at most
// MaxDepartedPeers disconnected peers. Its total bound on addresses of
// peers not connected (go-libp2p's 1,000,000) is left as it is: the
// peerstore keeps it by refusing new addresses, so a lower total would let
// whoever fills it keep out the addresses a DHT lookup learns, while
// connected peers' addresses, which it never refuses, are bounded per
// peer here and in number by the resource manager.
type boundedPeerstore struct {
	peerstore.Peerstore
	cab peerstore.CertifiedAddrBook

	mu sync.Mutex // serialises address writes, so that a peer's bound holds
	// departed holds the disconnected peers whose recently-connected
	// addresses are kept, oldest first; at their elements.
	departed    *list.List
	at          map[peer.ID]*list.Element
	maxDeparted int

	refused   atomic.Uint64
	forgotten atomic.Uint64
}

var _ peerstore.CertifiedAddrBook = (*boundedPeerstore)(nil)

func newBoundedPeerstore() (*boundedPeerstore, error) {
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		return nil, err
	}
	cab, ok := peerstore.GetCertifiedAddrBook(ps)
	if !ok {
		ps.Close()
		return nil, fmt.Errorf("node: memory peerstore keeps no signed peer records")
	}
	return &boundedPeerstore{Peerstore: ps, cab: cab, departed: list.New(), at: map[peer.ID]*list.Element{},
		maxDeparted: departedBound}, nil
}

// peerstoreOption gives the host a boundedPeerstore, unless
// WithLibp2pOptions gave it one of its own.
func peerstoreOption() libp2p.Option {
	return func(cfg *libp2p.Config) error {
		if cfg.Peerstore != nil {
			return nil
		}
		ps, err := newBoundedPeerstore()
		if err != nil {
			return err
		}
		return cfg.Apply(libp2p.Peerstore(ps))
	}
}

func (ps *boundedPeerstore) AddAddr(p peer.ID, a ma.Multiaddr, ttl time.Duration) {
	ps.AddAddrs(p, []ma.Multiaddr{a}, ttl)
}

func (ps *boundedPeerstore) AddAddrs(p peer.ID, addrs []ma.Multiaddr, ttl time.Duration) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.Peerstore.AddAddrs(p, ps.room(p, addrs, ttl), ttl)
	ps.noteDeparted(p, ttl)
}

func (ps *boundedPeerstore) SetAddr(p peer.ID, a ma.Multiaddr, ttl time.Duration) {
	ps.SetAddrs(p, []ma.Multiaddr{a}, ttl)
}

func (ps *boundedPeerstore) SetAddrs(p peer.ID, addrs []ma.Multiaddr, ttl time.Duration) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.Peerstore.SetAddrs(p, ps.room(p, addrs, ttl), ttl)
	ps.noteDeparted(p, ttl)
}

// room returns the addresses of addrs the peer has room for: those it
// already has (their TTL is updated), then new ones in their order up to
// MaxAddrsPerPeer. A TTL of zero or less removes addresses: all pass.
// Identify replaces a peer's addresses by adding the new ones before it
// drops the old, so a peer that changes more of its addresses than
// MaxAddrsPerPeer leaves room for has only those the room took stored
// until identify runs again; honest peers hold far fewer than the bound.
func (ps *boundedPeerstore) room(p peer.ID, addrs []ma.Multiaddr, ttl time.Duration) []ma.Multiaddr {
	if ttl <= 0 {
		return addrs
	}
	have := ps.Peerstore.Addrs(p)
	if len(have)+len(addrs) <= MaxAddrsPerPeer {
		return addrs
	}
	known := make(map[string]bool, len(have))
	for _, a := range have {
		known[string(a.Bytes())] = true
	}
	free := MaxAddrsPerPeer - len(have)
	kept := make([]ma.Multiaddr, 0, min(len(addrs), MaxAddrsPerPeer))
	for _, a := range addrs {
		if a == nil {
			continue
		}
		bare, _ := peer.SplitAddr(a)
		switch {
		case bare != nil && known[string(bare.Bytes())]:
			kept = append(kept, a)
		case free > 0:
			kept = append(kept, a)
			free--
			if bare != nil {
				known[string(bare.Bytes())] = true
			}
		default:
			ps.refused.Add(1)
		}
	}
	return kept
}

// noteDeparted records that p's addresses were written with identify's
// TTL for a peer that disconnected, and drops the addresses of the peer
// that left longest ago when more than MaxDepartedPeers are kept. Only
// addresses of that TTL are dropped: a peer that came back has its
// addresses at ConnectedAddrTTL, and one dialled since at the dial's.
func (ps *boundedPeerstore) noteDeparted(p peer.ID, ttl time.Duration) {
	if ttl != peerstore.RecentlyConnectedAddrTTL {
		return
	}
	if e, ok := ps.at[p]; ok {
		ps.departed.MoveToBack(e)
		return
	}
	ps.at[p] = ps.departed.PushBack(p)
	for ps.departed.Len() > ps.maxDeparted {
		old := ps.departed.Remove(ps.departed.Front()).(peer.ID)
		delete(ps.at, old)
		ps.Peerstore.UpdateAddrs(old, peerstore.RecentlyConnectedAddrTTL, 0)
		ps.forgotten.Add(1)
	}
}

// ConsumePeerRecord stores a signed peer record and its addresses, past
// MaxAddrsPerPeer: the host stores its own record here, and no peer can
// have one stored (identify keeps other peers' addresses, through
// AddAddrs, not their records; gossipsub's peer exchange, which would,
// is off).
func (ps *boundedPeerstore) ConsumePeerRecord(e *record.Envelope, ttl time.Duration) (bool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.cab.ConsumePeerRecord(e, ttl)
}

func (ps *boundedPeerstore) GetPeerRecord(p peer.ID) *record.Envelope { return ps.cab.GetPeerRecord(p) }
