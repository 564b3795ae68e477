package pipe

import (
	"net"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Peer scoring of the service's own gossipsub router.
//
// Without scoring, a peer of a propagate pipe's topic that sends invalid
// messages (bad or missing signatures, messages the topic validator
// rejects) costs a signature check and a refusal per message for as long
// as it sends. With it, gossipsub keeps a score per peer and drops every
// RPC of a peer whose score is below GraylistThreshold, unread.
//
// Only penalties are used; every positive component (time in mesh, first
// deliveries) is off, so an honest peer's score is 0. A positive score
// would let a peer bank credit by behaving, then spend it on invalid
// messages, and pipes carry too little traffic for delivery rewards to
// tell peers apart. The mesh delivery deficit (P3, P3b) is off too:
// pipes are often quiet for hours, and a mesh peer with nothing to
// forward would be penalised for it. The application score (P5) is 0.
//
// What remains:
//   - invalid messages (P4): -1 × n², n decaying to 1% in an hour;
//   - peers on one IP address beyond scoreIPColocation (P6): -1 × surplus²,
//     the node's own listen addresses exempt;
//   - broken IHAVE promises and GRAFTs during backoff beyond
//     scoreBehaviourThreshold (P7): -1 × surplus², forgiven within 10
//     minutes.
//
// Replays the sequence-number validator refuses cost no score (it ignores
// them, seqno.go): an honest peer may forward a message late.
//
// gossipsub drops a peer with a negative score from its meshes at the next
// heartbeat; below the thresholds it stops gossiping with it, stops
// publishing to it, and finally ignores it. A scored router is started
// only by the service itself: one given with WithPubSub keeps its own
// configuration.

const (
	// scoreGossipThreshold: a peer below it neither gets our gossip nor
	// has its own heeded; 4 invalid messages (-16), or 12 peers on one
	// foreign address.
	scoreGossipThreshold = -10
	// scorePublishThreshold: we do not publish our own messages to a
	// peer below it; 8 invalid messages (-64).
	scorePublishThreshold = -50
	// scoreGraylistThreshold: every RPC of a peer below it is dropped
	// unread; 21 invalid messages (-441), a few dozen as a peer that
	// means harm sends in a moment and an honest one never does: honest
	// gossipsub peers check signatures and run the same validator before
	// they forward. Its penalty then decays below the threshold in
	// about 40 s, and one more invalid message graylists it again.
	scoreGraylistThreshold = -400

	// scoreInvalidDecay is the time an invalid message's count takes to
	// fall to 1%: an hour, so that a peer graylisted for a burst stays
	// graylisted long after it stops (a spammer's burst lasts seconds),
	// while a peer that once forwarded something odd is forgiven.
	scoreInvalidDecay = time.Hour
	// scoreRetain keeps the score of a peer that disconnected as long
	// as its penalty lasts, so reconnecting does not wash it.
	scoreRetain = scoreInvalidDecay

	// scoreIPColocation is how many peers of one IP address may be in
	// the node's topics before each is penalised: go-libp2p's resource
	// manager admits 8 inbound connections per IPv4 address, so peers
	// the node let in on its own never exceed it; more come only from
	// the node's own dials (a pipe's provider records naming many
	// identities at one address). Nine peers there score -1 each (out
	// of the mesh, still gossiped with), 12 fall below the gossip
	// threshold, 29 below the graylist.
	scoreIPColocation = 8

	// scoreBehaviourThreshold is how many broken IHAVE promises
	// (message IDs advertised and not sent when asked) and GRAFTs
	// during backoff a peer makes before it is penalised: an honest peer
	// under load breaks some when its message cache moves on; 31 within
	// the decay reach the graylist.
	scoreBehaviourThreshold = 10
	// scoreBehaviourDecay forgives those within 10 minutes.
	scoreBehaviourDecay = 10 * time.Minute

	// scoreInspectPeriod is how often the service reads the scores for
	// Stats: once per decay interval, when scores change on their own.
	scoreInspectPeriod = pubsub.DefaultDecayInterval
)

// peerScoreParams returns the router's score parameters. The node's own
// listen addresses are exempt from the IP colocation penalty: a swarm of
// nodes on one machine (a lab, a test on loopback) shares them. Topics
// are added as pipes join them (topicScoreParams); each router needs
// its own value, as the router adds to Topics.
func peerScoreParams(n network.Network) *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics:                      map[string]*pubsub.TopicScoreParams{},
		AppSpecificScore:            func(peer.ID) float64 { return 0 },
		AppSpecificWeight:           1,
		IPColocationFactorWeight:    -1,
		IPColocationFactorThreshold: scoreIPColocation,
		IPColocationFactorWhitelist: ownNets(n),
		BehaviourPenaltyWeight:      -1,
		BehaviourPenaltyThreshold:   scoreBehaviourThreshold,
		BehaviourPenaltyDecay:       pubsub.ScoreParameterDecay(scoreBehaviourDecay),
		DecayInterval:               pubsub.DefaultDecayInterval,
		DecayToZero:                 pubsub.DefaultDecayToZero,
		RetainScore:                 scoreRetain,
	}
}

// peerScoreThresholds returns the router's thresholds (see the constants).
// PX is accepted from any peer not penalised, as without scoring, and
// opportunistic grafting waits for a mesh whose median score is
// negative: scores are never positive.
func peerScoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:   scoreGossipThreshold,
		PublishThreshold:  scorePublishThreshold,
		GraylistThreshold: scoreGraylistThreshold,
	}
}

// topicScoreParams returns a propagate topic's score parameters: only
// invalid messages count (P4, weight -1: the thresholds are in invalid
// messages squared).
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight:                    1,
		TimeInMeshQuantum:              time.Second, // required; its weight is 0
		InvalidMessageDeliveriesWeight: -1,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(scoreInvalidDecay),
	}
}

// ownNets are the node's listen IP addresses, each a network of one.
func ownNets(n network.Network) []*net.IPNet {
	addrs, err := n.InterfaceListenAddresses()
	if err != nil {
		return nil
	}
	var nets []*net.IPNet
	for _, a := range addrs {
		ip, err := manet.ToIP(a)
		if err != nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		nets = append(nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(8*len(ip), 8*len(ip))})
	}
	return nets
}
