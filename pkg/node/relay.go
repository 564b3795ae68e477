package node

import (
	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
)

// RelayMaxReservationsPerIP bounds the reservations a relay (see
// WithRelayService) grants peers connecting from one IP address, unless
// set otherwise (WithRelayReservationsPerIP): go-libp2p's default, enough
// for the peers behind one home NAT.
const RelayMaxReservationsPerIP = 8

// relayResources are the relay service's limits: go-libp2p's defaults,
// each relayed connection within RelayMaxDuration and RelayMaxData, and
// as many reservations in all as the node admits inbound connections
// (rcmgr's system limit, 252 on a 24 GiB machine). A reservation is a map
// entry that lives as long as its peer's connection (the relay drops it
// when the peer disconnects), so the connections bound the reservations
// already; go-libp2p's own total of 128 let 16 IP addresses with 8
// identities each take every reservation, and honest peers were refused
// for the hour they last. What still bounds a flood is
// RelayMaxReservationsPerIP (or perIP, when set) and the connections
// themselves.
func relayResources(limiter rcmgr.Limiter, perIP int) relay.Resources {
	rc := relay.DefaultResources()
	rc.Limit = &relay.RelayLimit{Duration: RelayMaxDuration, Data: RelayMaxData}
	rc.MaxReservationsPerIP = RelayMaxReservationsPerIP
	if perIP > 0 {
		// An address's peers share its AS (32 by default) too.
		rc.MaxReservationsPerIP = perIP
		rc.MaxReservationsPerASN = max(rc.MaxReservationsPerASN, perIP)
	}
	if in := limiter.GetSystemLimits().GetConnLimit(network.DirInbound); in > rc.MaxReservations {
		rc.MaxReservations = in
	}
	return rc
}
