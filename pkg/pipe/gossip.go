package pipe

import (
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// gossipDrops counts what the service's own gossipsub router drops
// silently: gossipsub never slows a publisher down, so under load its
// bounded queues shed messages, and this is how a node learns of it
// (Stats). It also keeps this node's mesh peers per topic, for
// WaitMembers. Its methods run on gossipsub's event loop.
type gossipDrops struct {
	outbound, inbound, undelivered atomic.Uint64
	// rejected counts messages refused as invalid (Stats.PropagateRejected);
	// graylistedMsgs the messages in RPCs of graylisted peers.
	rejected, graylistedMsgs atomic.Uint64
	// graylisted are the peers the last score inspection found below
	// the graylist threshold (nil: none, or no scoring).
	graylisted atomic.Pointer[map[peer.ID]struct{}]
	mu         sync.Mutex
	mesh       map[string]map[peer.ID]struct{}
}

// inspect takes the router's scores (scoreInspectPeriod): the peers below
// the graylist threshold, whose RPCs gossipsub drops unread.
func (g *gossipDrops) inspect(scores map[peer.ID]float64) {
	var gray map[peer.ID]struct{}
	for p, sc := range scores {
		if sc < scoreGraylistThreshold {
			if gray == nil {
				gray = map[peer.ID]struct{}{}
			}
			gray[p] = struct{}{}
		}
	}
	g.graylisted.Store(&gray)
}

// graylistedPeers is the number of peers graylisted at the last
// inspection.
func (g *gossipDrops) graylistedPeers() int {
	if m := g.graylisted.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// meshSize is the number of peers in this node's mesh for topic.
func (g *gossipDrops) meshSize(topic string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.mesh[topic])
}

// Graft: p joined this node's mesh for topic.
func (g *gossipDrops) Graft(p peer.ID, topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mesh == nil {
		g.mesh = map[string]map[peer.ID]struct{}{}
	}
	m := g.mesh[topic]
	if m == nil {
		m = map[peer.ID]struct{}{}
		g.mesh[topic] = m
	}
	m[p] = struct{}{}
}

// Prune: p left this node's mesh for topic.
func (g *gossipDrops) Prune(p peer.ID, topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.mesh[topic]; m != nil {
		delete(m, p)
		if len(m) == 0 {
			delete(g.mesh, topic)
		}
	}
}

// Leave: this node left topic, and its mesh.
func (g *gossipDrops) Leave(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.mesh, topic)
}

// RemovePeer: p is gone from every mesh.
func (g *gossipDrops) RemovePeer(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for topic, m := range g.mesh {
		delete(m, p)
		if len(m) == 0 {
			delete(g.mesh, topic)
		}
	}
}

var _ pubsub.RawTracer = (*gossipDrops)(nil)

// DropRPC: an RPC to a peer was dropped because the peer's outbound
// queue was full; count the messages it carried.
func (g *gossipDrops) DropRPC(rpc *pubsub.RPC, _ peer.ID) {
	if n := len(rpc.GetPublish()); n > 0 {
		g.outbound.Add(uint64(n))
	}
}

// RejectMessage: count the messages dropped for want of room to validate
// them, and those refused as invalid; messages the validator ignores are
// replays, counted by it.
func (g *gossipDrops) RejectMessage(_ *pubsub.Message, reason string) {
	switch reason {
	case pubsub.RejectValidationQueueFull, pubsub.RejectValidationThrottled:
		g.inbound.Add(1)
	case pubsub.RejectMissingSignature, pubsub.RejectInvalidSignature, pubsub.RejectUnexpectedSignature,
		pubsub.RejectUnexpectedAuthInfo, pubsub.RejectSelfOrigin, pubsub.RejectValidationFailed:
		g.rejected.Add(1)
	}
}

// countGraylisted sees every RPC before gossipsub asks the router whether
// to read it (pubsub.WithAppSpecificRpcInspector; gossipsub traces no
// drop): the messages of an RPC from a peer graylisted at the last
// inspection are counted as dropped. It refuses nothing.
func (g *gossipDrops) countGraylisted(from peer.ID, rpc *pubsub.RPC) error {
	m := g.graylisted.Load()
	if m == nil {
		return nil
	}
	if _, ok := (*m)[from]; ok {
		g.graylistedMsgs.Add(uint64(len(rpc.GetPublish())))
	}
	return nil
}

// UndeliverableMessage: a subscription fell behind and gossipsub dropped
// a message meant for it.
func (g *gossipDrops) UndeliverableMessage(*pubsub.Message) { g.undelivered.Add(1) }

func (*gossipDrops) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (*gossipDrops) OnClosedOutboundStream(peer.ID)                       {}
func (*gossipDrops) Join(string)                                          {}
func (*gossipDrops) ValidateMessage(*pubsub.Message)                      {}
func (*gossipDrops) DeliverMessage(*pubsub.Message)                       {}
func (*gossipDrops) DuplicateMessage(*pubsub.Message)                     {}
func (*gossipDrops) ThrottlePeer(peer.ID)                                 {}
func (*gossipDrops) RecvRPC(*pubsub.RPC)                                  {}
func (*gossipDrops) SendRPC(*pubsub.RPC, peer.ID)                         {}
func (*gossipDrops) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (*gossipDrops) AddPeer(peer.ID, protocol.ID)                         {}
