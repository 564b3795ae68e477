package node

import (
	"sync/atomic"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
)

// Protocol IDs of the layers above, named here to size their stream
// limits; the node imports none of those layers (the layering test
// forbids it). A test checks they match the layers' own constants.
const (
	endpointProtocol protocol.ID = "/p2pmsg/endpoint/1.2.0"
	socketProtocol   protocol.ID = "/p2pmsg/socket/1.0.0"
	resolverProtocol protocol.ID = "/p2pmsg/pipe-resolver/1.0.0"
	bindingProtocol  protocol.ID = "/p2pmsg/pipe-binding/1.0.0"
)

// MaxInboundStreamsPerPeer bounds the inbound streams one peer holds
// open on the node, all protocols together: what one peer of p2pmsg's
// protocols needs at once, the socket's 64, the endpoint's 8 (its own
// default limit), the pipe resolver's and binding's 8 each, and 8 for the
// rest (identify, ping, the DHT, gossipsub, hole punching).
// WithSocketStreamsPerPeer raises it by as much as it raises the
// socket's. The node's inbound streams are raised, if need be, to this
// share for each of its inbound connections, so that the peers it lets
// in cannot take one another's share (go-libp2p's defaults let 7
// identities take them all).
const MaxInboundStreamsPerPeer = 96

// Inbound streams one peer may hold open on one protocol at once (the
// streams this node opens keep go-libp2p's default bound, 128 per
// protocol and peer, or the socket's bound where it is larger). Beyond
// them a new stream is reset when its protocol is negotiated, and counted
// (GateStats.StreamsRefused). They count against the peer's share too
// (MaxInboundStreamsPerPeer): a peer spends its share as it likes, but
// cannot take another peer's. Every inbound connection's peer may hold
// them all: a protocol's streams on the node are raised to match.
const (
	// MaxSocketStreamsPerPeer: an established socket connection is one
	// stream for its lifetime, so this is the largest pool of sockets
	// one client holds open on the node, those waiting for Accept (at
	// most 16, a quarter of socket.WithBacklog's default 64) included.
	// 64 is go-libp2p's own bound on one peer's inbound streams of any
	// protocol before it scales with the machine's memory (75 at
	// 24 GiB), which p2pmsg applied until it set bounds of its own: a
	// pool that go-libp2p let through on every machine still gets
	// through (at 32, pools of 33 were cut). The cost, over 32: a peer's
	// share is 96 streams, not 64, the node's inbound streams 24,192,
	// not 16,128, on a 24 GiB machine, and a peer holding its share
	// reserves 24 MiB of yamux receive windows, not 16, so that 131
	// such peers, not 197, reach the node's memory limit: fewer
	// identities than the 252 inbound connections they could already
	// take. A server expecting larger pools raises it
	// (WithSocketStreamsPerPeer). Beyond it the dialler's Dial fails
	// with socket.ErrRefused naming this bound.
	MaxSocketStreamsPerPeer = 64
	// MaxEndpointStreamsPerPeer is twice the endpoint layer's own
	// per-peer limit (endpoint.WithMaxStreamsPerPeer, default 8), which
	// acts first and counts what it resets
	// (endpoint.Stats.StreamsRefused); this bound keeps a larger setting
	// from taking more than a quarter of the peer's share.
	MaxEndpointStreamsPerPeer = 16
	// MaxPipeQueryStreamsPerPeer bounds pipe-resolver and pipe-binding
	// streams, each: one stream carries one query or one push of at most
	// 4 KiB and lives for one round trip, so a peer needs as many as the
	// pipes it resolves or binds at the same moment.
	MaxPipeQueryStreamsPerPeer = 8
	// MaxRelayStopStreamsPerPeer bounds circuit relay STOP streams from
	// one relay: each is one connection relayed to this node for as long
	// as it lasts, and a go-libp2p relay carries at most 16 connections
	// per peer by default (relay.DefaultResources().MaxCircuits).
	MaxRelayStopStreamsPerPeer = 16
)

// perPeerLimits are the protocols above and their bounds, the socket's
// socketStreams.
func perPeerLimits(socketStreams int) map[protocol.ID]int {
	return map[protocol.ID]int{
		endpointProtocol: MaxEndpointStreamsPerPeer,
		socketProtocol:   socketStreams,
		resolverProtocol: MaxPipeQueryStreamsPerPeer,
		bindingProtocol:  MaxPipeQueryStreamsPerPeer,
	}
}

// peerShare is a peer's share of the node's inbound streams when it may
// hold socketStreams socket streams: MaxInboundStreamsPerPeer, raised
// by as much as socketStreams exceeds MaxSocketStreamsPerPeer (never
// lowered: the other protocols need their room whatever the socket's).
func peerShare(socketStreams int) int {
	return MaxInboundStreamsPerPeer + max(0, socketStreams-MaxSocketStreamsPerPeer)
}

// limits builds the node's resource limits, one peer holding at most
// socketStreams socket streams on it: go-libp2p's defaults scaled
// to the machine, with go-libp2p's default service limits (which its own
// default setup applies and a hand-built limiter must ask for: ping 2
// inbound streams per peer, identify 16, hole punching 2, …), the
// per-peer limits above, and these changes to the scaled result:
//
//   - a peer's inbound streams are its share (peerShare), and the
//     node's inbound streams at least that for every inbound connection;
//     likewise each protocol's and service's inbound streams are at least
//     its per-peer limit for every inbound connection (go-libp2p's own,
//     ping's, identify's, …, too), so that no set of inbound peers takes
//     a protocol from the others: a stream costs the node a goroutine
//     and its buffers, which the memory limits bound;
//   - streams and connections being negotiated or handshaken (the
//     transient scope) may be as many as the system's inbound ones,
//     instead of under a third: they count against the system's limits
//     as well, so this gives an attacker no more than the system limit
//     already does, while with the default a few hosts' silent sockets
//     refused everyone else's connections until their handshakes timed
//     out (15 s); the handshakes one host keeps in progress are bounded
//     on their own (MaxHandshakesPerHost), a peer's streams by its share.
func limits(socketStreams int) rcmgr.ConcreteLimitConfig {
	cfg := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&cfg)
	for p, n := range perPeerLimits(socketStreams) {
		// Outbound streams are this node's own choice: go-libp2p's
		// default stays, so a client pool is not cut by these bounds,
		// or, if larger, as many as the node lets a peer hold.
		out := max(cfg.ProtocolPeerBaseLimit.StreamsOutbound, n)
		cfg.AddProtocolPeerLimit(p, rcmgr.BaseLimit{StreamsInbound: n, StreamsOutbound: out, Streams: n + out,
			Memory: cfg.ProtocolPeerBaseLimit.Memory}, rcmgr.BaseLimitIncrease{})
	}
	// go-libp2p's default for STOP (128 each way, 32 MiB), inbound cut.
	cfg.AddProtocolPeerLimit(proto.ProtoIDv2Stop, rcmgr.BaseLimit{StreamsInbound: MaxRelayStopStreamsPerPeer, StreamsOutbound: 128,
		Streams: 128 + MaxRelayStopStreamsPerPeer, Memory: 32 << 20}, rcmgr.BaseLimitIncrease{})
	l := cfg.AutoScale().ToPartialLimitConfig()
	connsIn := l.System.ConnsInbound
	share := rcmgr.LimitVal(peerShare(socketStreams))
	raiseInbound(&l.System, connsIn*share)
	l.PeerDefault.StreamsInbound = share
	l.PeerDefault.Streams += share - MaxInboundStreamsPerPeer
	if l.Protocol == nil {
		l.Protocol = map[protocol.ID]rcmgr.ResourceLimits{}
	}
	raiseSocketOutbound(&l, socketStreams, cfg.ProtocolPeerBaseLimit.StreamsOutbound)
	if l.Service == nil {
		l.Service = map[string]rcmgr.ResourceLimits{}
	}
	raiseShared(l.Protocol, l.ProtocolPeer, l.ProtocolDefault, connsIn)
	raiseShared(l.Service, l.ServicePeer, l.ServiceDefault, connsIn)
	l.Transient.ConnsInbound = connsIn
	l.Transient.Conns = max(l.Transient.Conns, connsIn+l.Transient.ConnsOutbound)
	raiseInbound(&l.Transient, l.System.StreamsInbound)
	return l.Build(rcmgr.ConcreteLimitConfig{})
}

// raiseSocketOutbound makes room for the outbound socket streams a
// peer's bound lets this node hold on one peer, socketStreams, when it
// exceeds go-libp2p's default bound of a protocol's outbound streams to
// one peer (defaultOut): the peer's outbound streams grow by as much,
// and the protocol's and the node's are at least that.
func raiseSocketOutbound(l *rcmgr.PartialLimitConfig, socketStreams, defaultOut int) {
	d := rcmgr.LimitVal(socketStreams - defaultOut)
	if d <= 0 {
		return
	}
	l.PeerDefault.StreamsOutbound += d
	l.PeerDefault.Streams += d
	pl, ok := l.Protocol[socketProtocol]
	if !ok {
		pl = l.ProtocolDefault
	}
	raiseOutbound(&pl, rcmgr.LimitVal(socketStreams))
	l.Protocol[socketProtocol] = pl
	raiseOutbound(&l.System, l.PeerDefault.StreamsOutbound)
}

// raiseOutbound raises r's outbound streams to at least n, and its
// streams in all by as much.
func raiseOutbound(r *rcmgr.ResourceLimits, n rcmgr.LimitVal) {
	if d := n - r.StreamsOutbound; d > 0 {
		r.StreamsOutbound += d
		r.Streams += d
	}
}

// raiseShared raises the inbound streams of each protocol or service
// with a per-peer limit (perPeer) to that limit for each of connsIn
// inbound connections; one without limits of its own in shared starts
// from def.
func raiseShared[K comparable](shared, perPeer map[K]rcmgr.ResourceLimits, def rcmgr.ResourceLimits, connsIn rcmgr.LimitVal) {
	for k, pp := range perPeer {
		r, ok := shared[k]
		if !ok {
			r = def
		}
		raiseInbound(&r, connsIn*pp.StreamsInbound)
		shared[k] = r
	}
}

// raiseInbound raises r's inbound streams to at least n, and its streams
// in all by as much.
func raiseInbound(r *rcmgr.ResourceLimits, n rcmgr.LimitVal) {
	if d := n - r.StreamsInbound; d > 0 {
		r.StreamsInbound += d
		r.Streams += d
	}
}

// refusals counts the connections and streams the resource manager
// refuses (rcmgr's metrics hooks); it implements rcmgr.MetricsReporter.
// Memory refusals are counted by memoryCounter: this hook reports one
// refusal at every scope on its way up.
type refusals struct {
	conns, streams atomic.Uint64
}

var _ rcmgr.MetricsReporter = (*refusals)(nil)

func (r *refusals) AllowConn(network.Direction, bool)      {}
func (r *refusals) BlockConn(network.Direction, bool)      {} // handshakeLimiter counts them
func (r *refusals) AllowStream(peer.ID, network.Direction) {}
func (r *refusals) BlockStream(peer.ID, network.Direction) { r.streams.Add(1) }
func (r *refusals) AllowPeer(peer.ID)                      {}
func (r *refusals) BlockPeer(peer.ID)                      { r.conns.Add(1) } // at SetPeer
func (r *refusals) AllowProtocol(protocol.ID)              {}
func (r *refusals) BlockProtocol(protocol.ID)              { r.streams.Add(1) }
func (r *refusals) BlockProtocolPeer(protocol.ID, peer.ID) { r.streams.Add(1) }
func (r *refusals) AllowService(string)                    {}
func (r *refusals) BlockService(string)                    { r.streams.Add(1) }
func (r *refusals) BlockServicePeer(string, peer.ID)       { r.streams.Add(1) }
func (r *refusals) AllowMemory(int)                        {}
func (r *refusals) BlockMemory(int)                        {}
