package node

import (
	"context"
	"crypto/sha256"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"

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
// keeps). So peers found wait for a dial, grouped by the host they are
// announced at (the first IP address of the peer, internal/hostkey), and
// the hosts are served in turn: made-up peers by the hundred at one
// address take one host's share of the dials and the waiting places, and
// a peer announced at another host is dialled next, not after them. A
// peer skipped all the same (made-up peers at its own host took that
// host's places) is told of again when the node rebuilds its mDNS service
// (MDNSRebuildAfterSkip), and peers whose dial failed are not dialled
// again meanwhile (MDNSRetryFailedAfter), so that the rebuilds give the
// places to peers not yet tried.
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
	// does, and again only when the announcement expires (3,200 s) or the
	// node rebuilds its mDNS service (and then dials only peers not
	// connected), so one a second after the first ConnHighWater dials the
	// peers of a LAN as they start.
	MDNSDialsPerSecond = 1
	// MDNSRebuildAfterSkip is how soon after it last started its mDNS
	// service a node that has skipped a peer found by mDNS since rebuilds
	// the service (closes it and starts a new one, counted
	// MDNSStats.Restarts): the new service's zeroconf has told of nothing
	// yet and tells of every live announcement again, so that a skipped
	// peer is found again within about a minute instead of when its
	// announcement expires (3,200 s). zeroconf queries the LAN when it
	// starts, then after 4 s and at growing intervals up to a minute, each
	// query answered by every announcer there: rebuilt a minute at most,
	// the node queries about four times a minute instead of once (as each
	// node does in its first minute), says goodbye and announces itself
	// anew, under a new instance name (peers connected to it ignore it,
	// peers that skipped it find it again). Peers connected,
	// being dialled, waiting or whose dial failed recently are not dialled
	// again. A LAN where no node skips a peer sees rebuilds only every
	// MDNSRefreshEvery; one where a host keeps announcing made-up peers
	// sees the nodes hearing it rebuild once a minute.
	MDNSRebuildAfterSkip = time.Minute
	// MDNSRetryFailedAfter is how long a peer found by mDNS whose dial
	// failed is not dialled again when told of once more at the same
	// addresses: as long as zeroconf alone would take to tell of it again
	// (its TTL, 3,200 s), so that honest peers are redialled no sooner
	// than before the rebuilds, and the rebuilds after skips dial each
	// made-up peer once and give the places to peers not yet tried. An
	// honest peer announced among N made-up peers of its host is dialled
	// once the node has dialled them: after about N seconds
	// (N/MDNSDialsPerSecond; N × the 10 s dial timeout / MaxMDNSDials for
	// made-up peers at addresses that do not answer), for N up to the
	// failures remembered. Dials start at most mdnsBurst at once and
	// MDNSDialsPerSecond after, so those are at most maxMDNSFailed
	// (3,240), about 150 bytes each.
	MDNSRetryFailedAfter = 3200 * time.Second
	// MDNSRefreshEvery is how often a node rebuilds its mDNS service even
	// without skipping peers: zeroconf keeps every announcement it told of
	// for the TTL the announcer chose, up to 136 years, and a rebuild drops
	// them, so that an announcement no host answers for any more is kept
	// no longer than an honest one (3,200 s), whatever TTL it named. An
	// honest announcement that lives on is told of again then, as zeroconf
	// does itself when it expires.
	MDNSRefreshEvery = 3200 * time.Second
)

// maxMDNSFailed bounds the peers remembered whose mDNS dial failed: the
// most dials that start in MDNSRetryFailedAfter (see MDNSDialsPerSecond),
// so that none is forgotten early.
const maxMDNSFailed = mdnsBurst + int(MDNSRetryFailedAfter/time.Second)*MDNSDialsPerSecond

// mdnsDialTimeout bounds one dial to a peer found by mDNS (tests raise it
// so that dials to silent listeners last until the node closes).
var mdnsDialTimeout = 10 * time.Second

// mdnsRebuildAfterSkip and mdnsRefreshEvery are MDNSRebuildAfterSkip and
// MDNSRefreshEvery, which tests shorten.
var mdnsRebuildAfterSkip, mdnsRefreshEvery = MDNSRebuildAfterSkip, MDNSRefreshEvery

// MDNSStats counts the node's dials to peers found by mDNS (WithMDNS).
type MDNSStats struct {
	// Dialled: dials started to peers found by mDNS.
	Dialled uint64
	// Skipped: peers found by mDNS and not dialled because
	// MaxMDNSWaitingPerHost peers of their host waited, or MaxMDNSWaiting
	// of all hosts (then also a peer whose place a peer of a host with
	// fewer waiting took). A peer already connected, being dialled or
	// waiting is not dialled again, nor one whose dial at the same
	// addresses failed within MDNSRetryFailedAfter, nor counted here.
	Skipped uint64
	// Waiting: peers found by mDNS waiting now for a dial slot or for
	// MDNSDialsPerSecond.
	Waiting int
	// Restarts: rebuilds of the node's mDNS service, after skips
	// (MDNSRebuildAfterSkip) or every MDNSRefreshEvery.
	Restarts uint64
}

// MDNSStats returns the counts of mDNS dials (zero without WithMDNS).
func (n *Node) MDNSStats() MDNSStats {
	if n.mdns == nil {
		return MDNSStats{}
	}
	st := n.mdns.d.stats()
	st.Restarts = n.mdns.restarts.Load()
	return st
}

// mdnsRunner runs go-libp2p's mDNS service for a node, with its dialer
// as the notifee, and rebuilds the service (same host, same notifee)
// MDNSRebuildAfterSkip after it last started if the dialer has skipped a
// peer since, and every MDNSRefreshEvery: zeroconf tells of an
// announcement once until it expires, and forgets it only when closed.
type mdnsRunner struct {
	h      host.Host
	d      *mdnsDialer
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	// afterSkip and refresh are MDNSRebuildAfterSkip and
	// MDNSRefreshEvery, or what a test set.
	afterSkip, refresh time.Duration
	svc                mdns.Service // owned by run until it returns; nil if a rebuild failed to start
	restarts           atomic.Uint64
}

// startMDNS starts go-libp2p's mDNS service on h, dialling the peers it
// finds with the bounds of mdnsDialer.
func startMDNS(h host.Host) (*mdnsRunner, error) {
	r := &mdnsRunner{h: h, d: newMDNSDialer(h), done: make(chan struct{}),
		afterSkip: mdnsRebuildAfterSkip, refresh: mdnsRefreshEvery}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	svc := mdns.NewMdnsService(h, MDNSServiceName, r.d)
	if err := svc.Start(); err != nil {
		svc.Close()
		r.d.close()
		return nil, err
	}
	r.svc = svc
	go r.run()
	return r, nil
}

// run rebuilds the service every refresh, and at most afterSkip after
// the last rebuild when the dialer skipped a peer since; a rebuild that
// fails to start is tried again afterSkip later.
func (r *mdnsRunner) run() {
	defer close(r.done)
	last := time.Now()
	for r.wait(last) {
		select {
		case <-r.d.skips: // skipped by the service about to be closed: it tells the new one
		default:
		}
		if r.svc != nil {
			r.svc.Close()
		}
		r.svc = mdns.NewMdnsService(r.h, MDNSServiceName, r.d)
		if err := r.svc.Start(); err != nil {
			r.svc.Close()
			r.svc = nil
		}
		r.restarts.Add(1)
		last = time.Now()
	}
}

// wait waits for the next rebuild after the one at last, false if the
// runner closes first.
func (r *mdnsRunner) wait(last time.Time) bool {
	if r.svc == nil {
		return sleepCtx(r.ctx, time.Until(last.Add(r.afterSkip)))
	}
	refresh := time.NewTimer(time.Until(last.Add(r.refresh)))
	defer refresh.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-refresh.C:
		return true
	case <-r.d.skips:
		return sleepCtx(r.ctx, time.Until(last.Add(min(r.afterSkip, r.refresh))))
	}
}

// close closes the service, ends the dials and returns once no goroutine
// of the runner or its dialer is left.
func (r *mdnsRunner) close() error {
	r.cancel()
	<-r.done
	var err error
	if r.svc != nil {
		err = r.svc.Close()
	}
	r.d.close()
	return err
}

// sleepCtx waits for wait, false if ctx ends first.
func sleepCtx(ctx context.Context, wait time.Duration) bool {
	if wait <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// mdnsDialer is the node's mDNS notifee: it dials the peers mDNS finds,
// MaxMDNSDials at a time, starting dials at MDNSDialsPerSecond after the
// first ConnHighWater, with at most MaxMDNSWaitingPerHost waiting per
// host and MaxMDNSWaiting in all, hosts served in turn, and not those
// whose dial failed within MDNSRetryFailedAfter. A dial runs in
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
	// failed holds when the dial to a peer at its addresses
	// (mdnsFailedKey) failed, failedOrder the same first failed first,
	// at most maxMDNSFailed of them, none older than
	// MDNSRetryFailedAfter.
	failed      map[[sha256.Size]byte]time.Time
	failedOrder []mdnsFailure

	dialled, skipped atomic.Uint64
	// skips has a value when a peer was skipped since it was last
	// emptied (by mdnsRunner).
	skips chan struct{}
}

// mdnsFailure is a dial to a peer found by mDNS that failed.
type mdnsFailure struct {
	key [sha256.Size]byte
	at  time.Time
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
		hosts: map[netip.Prefix]*mdnsHost{}, waiting: map[peer.ID]netip.Prefix{}, tokens: mdnsBurst, refilled: time.Now(),
		failed: map[[sha256.Size]byte]time.Time{}, skips: make(chan struct{}, 1)}
}

func (d *mdnsDialer) stats() MDNSStats {
	d.mu.Lock()
	w := len(d.waiting) + d.pacing
	d.mu.Unlock()
	return MDNSStats{Dialled: d.dialled.Load(), Skipped: d.skipped.Load(), Waiting: w}
}

// HandlePeerFound has p wait for a dial, or counts it skipped, and dials
// the waiting peers if fewer than MaxMDNSDials goroutines do. A peer
// whose dial at the same addresses failed within MDNSRetryFailedAfter is
// ignored.
func (d *mdnsDialer) HandlePeerFound(p peer.AddrInfo) {
	if p.ID == d.h.ID() || d.connected(p.ID) {
		return
	}
	if len(p.Addrs) > MaxAddrsPerPeer {
		p.Addrs = p.Addrs[:MaxAddrsPerPeer:MaxAddrsPerPeer]
	}
	d.mu.Lock()
	if d.closed || d.known(p.ID) || d.failedRecently(p) {
		d.mu.Unlock()
		return
	}
	if !d.enqueue(p) {
		d.skip()
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
		ok = sleepCtx(d.ctx, wait)
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
		d.skip()
	}
	if h == nil {
		h = &mdnsHost{key: key}
		d.hosts[key] = h
		d.turn = append(d.turn, h)
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

// skip counts a peer skipped and tells mdnsRunner.
func (d *mdnsDialer) skip() {
	d.skipped.Add(1)
	select {
	case d.skips <- struct{}{}:
	default:
	}
}

// mdnsFailedKey names p with its addresses, so that announcements naming
// an honest peer's ID at addresses where dials fail do not keep it from
// being dialled at its own.
func mdnsFailedKey(p peer.AddrInfo) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(p.ID))
	for _, a := range p.Addrs {
		h.Write([]byte{0})
		h.Write(a.Bytes())
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// failedRecently says whether p's dial at its addresses failed within
// MDNSRetryFailedAfter, and forgets the failures older; d.mu held.
func (d *mdnsDialer) failedRecently(p peer.AddrInfo) bool {
	d.forgetFailures(time.Now())
	_, ok := d.failed[mdnsFailedKey(p)]
	return ok
}

// forgetFailures forgets the failures older than MDNSRetryFailedAfter;
// d.mu held.
func (d *mdnsDialer) forgetFailures(now time.Time) {
	for len(d.failedOrder) > 0 && now.Sub(d.failedOrder[0].at) >= MDNSRetryFailedAfter {
		d.forgetOldestFailure()
	}
}

// forgetOldestFailure forgets the failure remembered longest; d.mu held.
func (d *mdnsDialer) forgetOldestFailure() {
	f := d.failedOrder[0]
	if d.failed[f.key].Equal(f.at) {
		delete(d.failed, f.key)
	}
	d.failedOrder[0] = mdnsFailure{}
	d.failedOrder = d.failedOrder[1:]
}

// fail remembers that p's dial failed; d.mu held.
func (d *mdnsDialer) fail(p peer.AddrInfo) {
	now := time.Now()
	d.forgetFailures(now)
	for len(d.failedOrder) >= maxMDNSFailed {
		d.forgetOldestFailure()
	}
	k := mdnsFailedKey(p)
	d.failed[k] = now
	d.failedOrder = append(d.failedOrder, mdnsFailure{key: k, at: now})
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

// dial dials p, and remembers it if the dial fails before the dialer
// closes (best effort: a LAN peer that does not answer is skipped).
func (d *mdnsDialer) dial(p peer.AddrInfo) {
	d.dialled.Add(1)
	ctx, cancel := context.WithTimeout(d.ctx, d.timeout)
	defer cancel()
	if err := d.h.Connect(ctx, p); err != nil && d.ctx.Err() == nil {
		d.mu.Lock()
		d.fail(p)
		d.mu.Unlock()
	}
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
