package node

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
)

// Bounds on the dials mDNS makes a node start. go-libp2p's mDNS hands
// every peer an announcement names to the node, each in a goroutine of
// its own, however many there are: one LAN host announcing made-up peers
// at addresses that accept TCP and never answer would otherwise have the
// node dial them all at once, each dial holding a goroutine, a socket
// and a handshake until it times out.
//
// go-libp2p's mDNS (zeroconf) tells of a peer once, and again only when
// its announcement expires (zeroconf's TTL, 3,200 s, which go-libp2p
// keeps): a peer not dialled when found is not found again for nearly an
// hour (it still finds, and dials, this node). So peers found wait for a
// dial, grouped by the host they are announced at (the first IP address
// of the peer, internal/hostkey), and the hosts are served in turn: made-up
// peers by the hundred at one address take one host's share of the dials
// and the waiting places, and a peer announced at another host is dialled
// next, not after them.
const (
	// MaxMDNSDials bounds the dials to peers found by mDNS in progress
	// at once: go-libp2p's per-host figure (MaxHandshakesPerHost, the
	// dials one go-libp2p host makes to a peer at once). An honest LAN
	// peer answers a dial within milliseconds, so a slot is soon free
	// again; only peers that do not answer hold one, up to the dial
	// timeout.
	MaxMDNSDials = 8
	// MaxMDNSWaitingPerHost bounds the peers found by mDNS announced at
	// one host that wait for a dial slot, first found first dialled;
	// peers found beyond it are not dialled, counted
	// (MDNSStats.Skipped). With the dials in progress, the node takes in
	// ConnHighWater peers of one host at once: the most it keeps before
	// its connection manager trims, so that more would be dialled only
	// to be closed again — a host runs one node or a few, not that many.
	MaxMDNSWaitingPerHost = ConnHighWater - MaxMDNSDials
	// MaxMDNSWaiting bounds the peers found by mDNS waiting for a dial
	// slot, all hosts together. A node starting on a LAN hears every
	// peer there answer its first query at once: 1,024 is four nodes on
	// each host of a /24, more than an ordinary LAN runs. A waiting peer
	// costs its ID and its addresses (at most MaxAddrsPerPeer are kept;
	// a LAN peer announces a few, some hundred bytes in all), which
	// zeroconf already holds for as long as the announcement lives, so
	// waiting costs at most as much again. When all places are taken, a
	// peer whose host has fewer waiting than the host with the most takes
	// the place of that host's latest peer, counted skipped, so that
	// hosts announcing peers by the hundred cannot keep one with a peer
	// or two out.
	MaxMDNSWaiting = 1024
	// MDNSDialsPerSecond bounds the rate at which dials to peers found
	// by mDNS start, after a first ConnHighWater (MaxMDNSDials +
	// MaxMDNSWaitingPerHost) at once; the peers wait meanwhile. The bound
	// on dials in progress holds back only peers that do not answer:
	// announcements naming the address of another LAN host, which
	// refuses or closes at once, would otherwise have the node (and
	// every node on the LAN hearing them) connect to it as fast as they
	// come, each dial to every address named (at most MaxAddrsPerPeer).
	// A node hears of each LAN peer once, when it starts or the peer
	// does, and again only when the announcement expires (3,200 s), so
	// one a second after the first ConnHighWater dials the peers of a
	// LAN as they start.
	MDNSDialsPerSecond = 1
)

// mdnsDialTimeout bounds one dial to a peer found by mDNS (tests raise it
// so that dials to silent listeners last until the node closes).
var mdnsDialTimeout = 10 * time.Second

// MDNSStats counts the node's dials to peers found by mDNS (WithMDNS).
type MDNSStats struct {
	// Dialled: dials started to peers found by mDNS.
	Dialled uint64
	// Skipped: peers found by mDNS and not dialled because
	// MaxMDNSWaitingPerHost peers of their host waited, or MaxMDNSWaiting
	// of all hosts (then also a peer whose place a peer of a host with
	// fewer waiting took). A peer already connected, being dialled or
	// waiting is not dialled again, nor counted here.
	Skipped uint64
	// Waiting: peers found by mDNS waiting now for a dial slot or for
	// MDNSDialsPerSecond.
	Waiting int
}

// MDNSStats returns the counts of mDNS dials (zero without WithMDNS).
func (n *Node) MDNSStats() MDNSStats {
	if n.mdnsDialer == nil {
		return MDNSStats{}
	}
	return n.mdnsDialer.stats()
}

// mdnsDialer is the node's mDNS notifee: it dials the peers mDNS finds,
// MaxMDNSDials at a time, starting dials at MDNSDialsPerSecond after the
// first ConnHighWater, with at most MaxMDNSWaitingPerHost waiting per
// host and MaxMDNSWaiting in all, hosts served in turn. A dial runs in
// the goroutine go-libp2p's mDNS started for the announcement, which goes
// on with the waiting peers until none is left; all other such
// goroutines return at once.
type mdnsDialer struct {
	h       host.Host
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc
	timeout time.Duration

	mu      sync.Mutex
	closed  bool
	dialers int // goroutines dialling, at most MaxMDNSDials
	dialing map[peer.ID]struct{}
	pacing  int // peers taken to be dialled, waiting for the rate
	// hosts holds the waiting peers by host; turn is the hosts with
	// peers waiting, served in this order from turn[next] on.
	hosts   map[netip.Prefix]*mdnsHost
	turn    []*mdnsHost
	next    int
	waiting map[peer.ID]netip.Prefix
	wg      sync.WaitGroup // goroutines dialling
	// tokens is how many more dials may start now, up to mdnsBurst,
	// growing by MDNSDialsPerSecond since refilled; below zero, dials
	// reserved wait for it to grow back to zero.
	tokens   float64
	refilled time.Time

	dialled, skipped atomic.Uint64
}

// mdnsHost is the peers waiting that are announced at one host, first
// found first.
type mdnsHost struct {
	key   netip.Prefix
	peers []peer.AddrInfo
}

// mdnsBurst is how many dials to peers found by mDNS start at once.
const mdnsBurst = ConnHighWater

func newMDNSDialer(h host.Host) *mdnsDialer {
	ctx, cancel := context.WithCancel(context.Background())
	return &mdnsDialer{h: h, ctx: ctx, cancel: cancel, timeout: mdnsDialTimeout, dialing: map[peer.ID]struct{}{},
		hosts: map[netip.Prefix]*mdnsHost{}, waiting: map[peer.ID]netip.Prefix{}, tokens: mdnsBurst, refilled: time.Now()}
}

func (d *mdnsDialer) stats() MDNSStats {
	d.mu.Lock()
	w := len(d.waiting) + d.pacing
	d.mu.Unlock()
	return MDNSStats{Dialled: d.dialled.Load(), Skipped: d.skipped.Load(), Waiting: w}
}

// HandlePeerFound has p wait for a dial, or counts it skipped, and dials
// the waiting peers if fewer than MaxMDNSDials goroutines do.
func (d *mdnsDialer) HandlePeerFound(p peer.AddrInfo) {
	if p.ID == d.h.ID() || d.connected(p.ID) {
		return
	}
	d.mu.Lock()
	if d.closed || d.known(p.ID) {
		d.mu.Unlock()
		return
	}
	if !d.enqueue(p) {
		d.skipped.Add(1)
	}
	if d.dialers >= MaxMDNSDials || len(d.waiting) == 0 {
		d.mu.Unlock()
		return
	}
	d.dialers++
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	for {
		d.mu.Lock()
		p, ok := d.take()
		if !ok {
			d.dialers--
			d.mu.Unlock()
			return
		}
		d.dialing[p.ID] = struct{}{}
		wait := d.reserve()
		if wait > 0 {
			d.pacing++
		}
		d.mu.Unlock()
		ok = d.sleep(wait)
		if wait > 0 {
			d.mu.Lock()
			d.pacing--
			d.mu.Unlock()
		}
		if ok {
			d.dial(p)
		}
		d.mu.Lock()
		delete(d.dialing, p.ID)
		d.mu.Unlock()
	}
}

// enqueue has p wait at its host, false if it is skipped; d.mu held.
func (d *mdnsDialer) enqueue(p peer.AddrInfo) bool {
	key := mdnsHostOf(p)
	h := d.hosts[key]
	n := 0
	if h != nil {
		n = len(h.peers)
	}
	if n >= MaxMDNSWaitingPerHost {
		return false
	}
	if len(d.waiting) >= MaxMDNSWaiting {
		most := d.turn[0]
		for _, o := range d.turn[1:] {
			if len(o.peers) > len(most.peers) {
				most = o
			}
		}
		if len(most.peers) <= n+1 {
			return false
		}
		last := len(most.peers) - 1
		delete(d.waiting, most.peers[last].ID)
		most.peers[last] = peer.AddrInfo{}
		most.peers = most.peers[:last]
		d.skipped.Add(1)
	}
	if h == nil {
		h = &mdnsHost{key: key}
		d.hosts[key] = h
		d.turn = append(d.turn, h)
	}
	if len(p.Addrs) > MaxAddrsPerPeer {
		p.Addrs = p.Addrs[:MaxAddrsPerPeer:MaxAddrsPerPeer]
	}
	h.peers = append(h.peers, p)
	d.waiting[p.ID] = key
	return true
}

// mdnsHostOf returns the host p is announced at: that of its first
// address with an IP (the zero prefix for a peer with none, all such
// peers together).
func mdnsHostOf(p peer.AddrInfo) netip.Prefix {
	for _, a := range p.Addrs {
		if k, ok := hostkey.FromMultiaddr(a); ok {
			return k
		}
	}
	return netip.Prefix{}
}

// take takes the first waiting peer, not connected meanwhile, of the
// next host in turn; d.mu held.
func (d *mdnsDialer) take() (peer.AddrInfo, bool) {
	for !d.closed && len(d.turn) > 0 {
		if d.next >= len(d.turn) {
			d.next = 0
		}
		h := d.turn[d.next]
		p := h.peers[0]
		h.peers[0] = peer.AddrInfo{}
		h.peers = h.peers[1:]
		delete(d.waiting, p.ID)
		if len(h.peers) == 0 {
			delete(d.hosts, h.key)
			d.turn = slices.Delete(d.turn, d.next, d.next+1)
		} else {
			d.next++
		}
		if !d.connected(p.ID) {
			return p, true
		}
	}
	return peer.AddrInfo{}, false
}

// reserve reserves the start of one dial and returns how long it waits
// for the rate; d.mu held.
func (d *mdnsDialer) reserve() time.Duration {
	now := time.Now()
	d.tokens = min(mdnsBurst, d.tokens+now.Sub(d.refilled).Seconds()*MDNSDialsPerSecond)
	d.refilled = now
	d.tokens--
	if d.tokens >= 0 {
		return 0
	}
	return time.Duration(-d.tokens / MDNSDialsPerSecond * float64(time.Second))
}

// sleep waits for wait, false if the dialer closes first.
func (d *mdnsDialer) sleep(wait time.Duration) bool {
	if wait <= 0 {
		return d.ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// known says whether p is being dialled or waits; d.mu held.
func (d *mdnsDialer) known(p peer.ID) bool {
	if _, ok := d.dialing[p]; ok {
		return true
	}
	_, ok := d.waiting[p]
	return ok
}

func (d *mdnsDialer) connected(p peer.ID) bool {
	return d.h.Network().Connectedness(p) == network.Connected
}

func (d *mdnsDialer) dial(p peer.AddrInfo) {
	d.dialled.Add(1)
	ctx, cancel := context.WithTimeout(d.ctx, d.timeout)
	defer cancel()
	d.h.Connect(ctx, p) // best effort: a LAN peer that does not answer is skipped
}

// close ends the dials in progress, drops the waiting peers and returns
// once no goroutine dials. Call it after the mDNS service is closed, so
// that no announcement comes after it (one that does is ignored).
func (d *mdnsDialer) close() {
	d.mu.Lock()
	d.closed = true
	d.hosts, d.turn, d.waiting = nil, nil, nil
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}
