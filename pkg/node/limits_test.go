package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// TestLimits checks the arithmetic behind the limits: every inbound
// connection's peer holding its share of streams fits in the node's
// inbound streams, handshakes may use every inbound connection slot, and
// go-libp2p's service limits are applied.
func TestLimits(t *testing.T) {
	l := limits().ToPartialLimitConfig()
	sys, peer := l.System, l.PeerDefault
	if peer.StreamsInbound != MaxInboundStreamsPerPeer {
		t.Errorf("%d inbound streams per peer, want %d", peer.StreamsInbound, MaxInboundStreamsPerPeer)
	}
	if int(peer.StreamsInbound)*int(sys.ConnsInbound) > int(sys.StreamsInbound) {
		t.Errorf("%d inbound streams per peer × %d inbound connections > %d inbound streams", peer.StreamsInbound, sys.ConnsInbound, sys.StreamsInbound)
	}
	for p, n := range perPeerLimits {
		if n > MaxInboundStreamsPerPeer {
			t.Errorf("%s: %d streams per peer, over a peer's share", p, n)
		}
	}
	for p, pp := range l.ProtocolPeer { // go-libp2p's protocols as well as ours
		if got := l.Protocol[p].StreamsInbound; int(got) < int(pp.StreamsInbound)*int(sys.ConnsInbound) {
			t.Errorf("%s: %d inbound streams for %d inbound connections of %d", p, got, sys.ConnsInbound, pp.StreamsInbound)
		}
	}
	for svc, sp := range l.ServicePeer {
		if got := l.Service[svc].StreamsInbound; int(got) < int(sp.StreamsInbound)*int(sys.ConnsInbound) {
			t.Errorf("service %s: %d inbound streams for %d inbound connections of %d", svc, got, sys.ConnsInbound, sp.StreamsInbound)
		}
	}
	if l.Transient.ConnsInbound != sys.ConnsInbound || l.Transient.StreamsInbound != sys.StreamsInbound {
		t.Errorf("transient inbound connections %d and streams %d, system %d and %d", l.Transient.ConnsInbound,
			l.Transient.StreamsInbound, sys.ConnsInbound, sys.StreamsInbound)
	}
	if got := l.ProtocolPeer[ping.ID].StreamsInbound; got != 2 {
		t.Errorf("ping: %d inbound streams per peer, want go-libp2p's 2", got)
	}
}
