package node

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// SetDepartedBound sets the bound on departed peers of the nodes started
// next, for a test that cannot wait for MaxDepartedPeers identities; it
// returns a function restoring MaxDepartedPeers.
func SetDepartedBound(n int) (restore func()) {
	departedBound = n
	return func() { departedBound = MaxDepartedPeers }
}

// WithLoopbackHandshakeLimit applies MaxHandshakesPerHost to loopback
// hosts as well, so that tests on 127.0.0.0/8 can show the bound.
func WithLoopbackHandshakeLimit() Option {
	return func(c *config) error { c.limitLoopback = true; return nil }
}

// WithLoopbackRateLimit lets each loopback address open n connections
// to the node, then none for days (loopbackConnRate), so that a test
// can spend an address's connections without timing anything.
func WithLoopbackRateLimit(n int) Option {
	return func(c *config) error { c.loopbackRate = n; return nil }
}

// WithPeerMemoryLimit limits every peer's memory on the node to n bytes,
// so that a test peer can reach the limit with a few streams.
func WithPeerMemoryLimit(n int64) Option {
	return func(c *config) error { c.peerMemory = n; return nil }
}

// WithNodeMemoryLimit limits the node's memory, all peers together, to
// n bytes, so that a test peer can fill it with a few streams.
func WithNodeMemoryLimit(n int64) Option {
	return func(c *config) error { c.nodeMemory = n; return nil }
}

// LimitedProtocols lists the layers' protocols the node sizes limits for.
func LimitedProtocols() []protocol.ID {
	return []protocol.ID{endpointProtocol, socketProtocol, resolverProtocol, bindingProtocol}
}

// WithoutConnGrace sets the connection manager's grace period to 0, so
// that a test can trim connections as soon as they are open.
func WithoutConnGrace() Option {
	return func(c *config) error { c.noConnGrace = true; return nil }
}

// SetMDNSDialTimeout sets the timeout of mDNS dials of the nodes started
// next, so that a test's dials to silent listeners last until the node
// closes; it returns a function restoring the default.
func SetMDNSDialTimeout(d time.Duration) (restore func()) {
	old := mdnsDialTimeout
	mdnsDialTimeout = d
	return func() { mdnsDialTimeout = old }
}

// SetMDNSRebuild sets how soon after a skip (MDNSRebuildAfterSkip) and
// how often in any case (MDNSRefreshEvery) the nodes started next rebuild
// their mDNS service, so that a test need not wait minutes; it returns a
// function restoring the defaults.
func SetMDNSRebuild(afterSkip, refresh time.Duration) (restore func()) {
	mdnsRebuildAfterSkip, mdnsRefreshEvery = afterSkip, refresh
	return func() { mdnsRebuildAfterSkip, mdnsRefreshEvery = MDNSRebuildAfterSkip, MDNSRefreshEvery }
}

// NewMDNSNotifee starts the handler of peers found by mDNS that WithMDNS
// gives n, without mDNS itself, so that a test can hand it peers; close
// ends its dials.
func NewMDNSNotifee(n *Node) (found func(peer.AddrInfo), stats func() MDNSStats, close func()) {
	d := newMDNSDialer(n.host)
	return d.HandlePeerFound, d.stats, d.close
}

// RelayProtectedUntil is when n's protection of its connection to relay
// from trims ends; zero if it is not protected for a reservation.
func RelayProtectedUntil(n *Node, relay peer.ID) time.Time {
	n.gate.mu.Lock()
	defer n.gate.mu.Unlock()
	return n.gate.expiry[relay].until
}

// HandshakeSlots is how many inbound connections the node lets handshake
// at once (the transient scope's inbound connections).
func HandshakeSlots() int {
	return int(limits(MaxSocketStreamsPerPeer).ToPartialLimitConfig().Transient.ConnsInbound)
}

// ConnsInboundPerPeer is how many inbound connections one peer may hold
// on the node.
func ConnsInboundPerPeer() int {
	return int(limits(MaxSocketStreamsPerPeer).ToPartialLimitConfig().PeerDefault.ConnsInbound)
}

// LiveYamuxSpans is how many of the node's yamux memory spans have begun
// and not ended.
func LiveYamuxSpans(n *Node) int64 { return n.gate.yamuxSpans.Load() }
