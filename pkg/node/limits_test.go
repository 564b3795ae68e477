package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// TestLimits checks the arithmetic behind the limits, at the default
// socket bound and at those WithSocketStreamsPerPeer may set: every
// inbound connection's peer holding its share of streams fits in the
// node's inbound streams, handshakes may use every inbound connection
// slot, go-libp2p's service limits are applied, and a peer's socket
// streams fit in its share and the node's, both ways.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name                string
		socketStreams, want int // the socket's per-peer bound and a peer's share
	}{
		{"default", MaxSocketStreamsPerPeer, MaxInboundStreamsPerPeer},
		{"lowered", 1, MaxInboundStreamsPerPeer},
		{"raised", 256, MaxInboundStreamsPerPeer + 256 - MaxSocketStreamsPerPeer},
		{"largest", maxSocketStreams, MaxInboundStreamsPerPeer + maxSocketStreams - MaxSocketStreamsPerPeer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLimits(t, tc.socketStreams, tc.want)
		})
	}
}

func checkLimits(t *testing.T, socketStreams, share int) {
	l := limits(socketStreams).ToPartialLimitConfig()
	sys, peer := l.System, l.PeerDefault
	if int(peer.StreamsInbound) != share {
		t.Errorf("%d inbound streams per peer, want %d", peer.StreamsInbound, share)
	}
	if int(peer.StreamsInbound)*int(sys.ConnsInbound) > int(sys.StreamsInbound) {
		t.Errorf("%d inbound streams per peer × %d inbound connections > %d inbound streams", peer.StreamsInbound, sys.ConnsInbound, sys.StreamsInbound)
	}
	for p, n := range perPeerLimits(socketStreams) {
		if n > share {
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
	// The socket's bound, both ways, is not cut by a wider scope.
	sock := l.ProtocolPeer[socketProtocol]
	if int(sock.StreamsInbound) != socketStreams || int(sock.StreamsOutbound) < socketStreams ||
		int(sock.Streams) < int(sock.StreamsInbound+sock.StreamsOutbound) {
		t.Errorf("socket streams per peer %+v, want %d each way", sock, socketStreams)
	}
	for name, r := range map[string]struct{ in, out, all int }{
		"peer":     {int(peer.StreamsInbound), int(peer.StreamsOutbound), int(peer.Streams)},
		"protocol": {int(l.Protocol[socketProtocol].StreamsInbound), int(l.Protocol[socketProtocol].StreamsOutbound), int(l.Protocol[socketProtocol].Streams)},
		"system":   {int(sys.StreamsInbound), int(sys.StreamsOutbound), int(sys.Streams)},
	} {
		if r.in < socketStreams || r.out < socketStreams || r.all < share {
			t.Errorf("%s: %d inbound, %d outbound, %d streams: under %d socket streams, share %d", name, r.in, r.out, r.all, socketStreams, share)
		}
	}
}
