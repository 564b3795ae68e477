package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Bounds on the dials mDNS makes a node start. go-libp2p's mDNS hands
// every peer an announcement names to the node, each in a goroutine of
// its own, however many there are: one LAN host announcing made-up peers
// at addresses that accept TCP and never answer would otherwise have the
// node dial them all at once, each dial holding a goroutine, a socket
// and a handshake until it times out.
const (
	// MaxMDNSDials bounds the dials to peers found by mDNS in progress
	// at once: go-libp2p's per-host figure (MaxHandshakesPerHost, the
	// dials one go-libp2p host makes to a peer at once). An honest LAN
	// peer answers a dial within milliseconds, so a slot is soon free
	// again; only peers that do not answer hold one, up to the dial
	// timeout.
	MaxMDNSDials = 8
	// MaxMDNSWaiting bounds the peers found by mDNS that wait for a dial
	// slot, first found first dialled; peers found beyond it are not
	// dialled, counted (MDNSStats.Skipped). A node starting on a LAN
	// hears every peer there answer its first query at once, and
	// go-libp2p's mDNS tells of a peer again only when its announcement
	// expires (zeroconf's TTL, 3,200 s, which go-libp2p keeps), so a
	// peer skipped is not found again soon (it still finds, and dials,
	// this node). With the dials in progress, the node takes in
	// ConnHighWater peers at once: the most it keeps before its
	// connection manager trims, so that more would be dialled only to be
	// closed again.
	MaxMDNSWaiting = ConnHighWater - MaxMDNSDials
	// MDNSDialsPerSecond bounds the rate at which peers found by mDNS
	// are taken in to be dialled (at once or after waiting), after a
	// first MaxMDNSDials + MaxMDNSWaiting; peers found beyond it are not
	// dialled, counted (MDNSStats.OverRate). The bound on dials in
	// progress holds back only peers that do not answer: announcements
	// naming the address of another LAN host, which refuses or closes
	// at once, would otherwise have the node (and every node on the LAN
	// hearing them) connect to it as fast as they come, each dial to
	// every address named (at most MaxAddrsPerPeer). A node hears of
	// each LAN peer once, when it starts or the peer does, and again
	// only when the announcement expires (3,200 s), so one a second
	// after the first ConnHighWater takes in a LAN's peers as they
	// start.
	MDNSDialsPerSecond = 1
)

// mdnsDialTimeout bounds one dial to a peer found by mDNS (tests raise it
// so that dials to silent listeners last until the node closes).
var mdnsDialTimeout = 10 * time.Second

// MDNSStats counts the node's dials to peers found by mDNS (WithMDNS).
type MDNSStats struct {
	// Dialled: dials started to peers found by mDNS.
	Dialled uint64
	// Skipped: peers found by mDNS and not dialled because MaxMDNSDials
	// dials were in progress and MaxMDNSWaiting peers waited. A peer
	// already connected, being dialled or waiting is not dialled again,
	// nor counted here.
	Skipped uint64
	// OverRate: peers found by mDNS and not dialled because more came
	// than MDNSDialsPerSecond allows.
	OverRate uint64
}

// MDNSStats returns the counts of mDNS dials (zero without WithMDNS).
func (n *Node) MDNSStats() MDNSStats {
	if n.mdnsDialer == nil {
		return MDNSStats{}
	}
	return n.mdnsDialer.stats()
}

// mdnsDialer is the node's mDNS notifee: it dials the peers mDNS finds,
// MaxMDNSDials at a time, with at most MaxMDNSWaiting waiting, taking
// them in at MDNSDialsPerSecond after the first ConnHighWater. A dial
// runs in the goroutine go-libp2p's mDNS started for the announcement,
// which goes on with the waiting peers until none is left; all other
// such goroutines return at once.
type mdnsDialer struct {
	h       host.Host
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc
	timeout time.Duration

	mu      sync.Mutex
	closed  bool
	dialing map[peer.ID]struct{}
	waiting []peer.AddrInfo // first found first
	wg      sync.WaitGroup  // goroutines dialling
	// tokens is how many more peers may be taken in now, up to
	// mdnsBurst, growing by MDNSDialsPerSecond since refilled.
	tokens   float64
	refilled time.Time

	dialled, skipped, overRate atomic.Uint64
}

// mdnsBurst is how many peers found by mDNS the node takes in at once.
const mdnsBurst = MaxMDNSDials + MaxMDNSWaiting

func newMDNSDialer(h host.Host) *mdnsDialer {
	ctx, cancel := context.WithCancel(context.Background())
	return &mdnsDialer{h: h, ctx: ctx, cancel: cancel, timeout: mdnsDialTimeout, dialing: map[peer.ID]struct{}{},
		tokens: mdnsBurst, refilled: time.Now()}
}

func (d *mdnsDialer) stats() MDNSStats {
	return MDNSStats{Dialled: d.dialled.Load(), Skipped: d.skipped.Load(), OverRate: d.overRate.Load()}
}

// HandlePeerFound dials p, has it wait for a dial slot, or counts it
// skipped or over the rate.
func (d *mdnsDialer) HandlePeerFound(p peer.AddrInfo) {
	if p.ID == d.h.ID() || d.connected(p.ID) {
		return
	}
	d.mu.Lock()
	if d.closed || d.known(p.ID) {
		d.mu.Unlock()
		return
	}
	full := len(d.dialing) >= MaxMDNSDials
	if full && len(d.waiting) >= MaxMDNSWaiting {
		d.skipped.Add(1)
		d.mu.Unlock()
		return
	}
	if !d.take() {
		d.overRate.Add(1)
		d.mu.Unlock()
		return
	}
	if full {
		d.waiting = append(d.waiting, p)
		d.mu.Unlock()
		return
	}
	d.dialing[p.ID] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	defer d.wg.Done()
	for {
		d.dial(p)
		d.mu.Lock()
		delete(d.dialing, p.ID)
		var ok bool
		if p, ok = d.next(); !ok {
			d.mu.Unlock()
			return
		}
		d.dialing[p.ID] = struct{}{}
		d.mu.Unlock()
	}
}

// take takes in one more peer if the rate allows; d.mu held.
func (d *mdnsDialer) take() bool {
	now := time.Now()
	d.tokens = min(mdnsBurst, d.tokens+now.Sub(d.refilled).Seconds()*MDNSDialsPerSecond)
	d.refilled = now
	if d.tokens < 1 {
		return false
	}
	d.tokens--
	return true
}

// next takes the first waiting peer not connected meanwhile; d.mu held.
func (d *mdnsDialer) next() (peer.AddrInfo, bool) {
	for !d.closed && len(d.waiting) > 0 {
		p := d.waiting[0]
		d.waiting[0] = peer.AddrInfo{}
		d.waiting = d.waiting[1:]
		if !d.connected(p.ID) {
			return p, true
		}
	}
	return peer.AddrInfo{}, false
}

// known says whether p is being dialled or waits; d.mu held.
func (d *mdnsDialer) known(p peer.ID) bool {
	if _, ok := d.dialing[p]; ok {
		return true
	}
	for _, w := range d.waiting {
		if w.ID == p {
			return true
		}
	}
	return false
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
	d.waiting = nil
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}
