package node

import (
	"context"
	"fmt"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/routing"
)

// DHTProtocolPrefix keeps p2pmsg's Kademlia DHT apart from IPFS's public
// one: its protocol is /p2pmsg/kad/1.0.0.
const DHTProtocolPrefix protocol.ID = "/p2pmsg"

// DHTMode says whether a node's DHT answers queries for others.
type DHTMode int

// DHT modes.
const (
	// DHTAuto serves others once the node finds itself publicly reachable
	// (go-libp2p's AutoNAT decides), and is a client until then.
	DHTAuto DHTMode = iota
	// DHTServer always serves: for LANs, tests and infrastructure nodes.
	DHTServer
	// DHTClient only queries.
	DHTClient
)

// WithDHT gives the node a Kademlia DHT (go-libp2p-kad-dht) under
// DHTProtocolPrefix, bootstrapped from the WithBootstrapPeers peers. Pipes
// publish and find their bindings there as provider records. Default: no
// DHT.
func WithDHT(mode DHTMode) Option {
	return func(c *config) error {
		if mode < DHTAuto || mode > DHTClient {
			return fmt.Errorf("%w: DHT mode %d", ErrBadOption, mode)
		}
		c.dht, c.dhtMode = true, mode
		return nil
	}
}

// startDHT starts the DHT with its records in store. Pipes use provider
// records only, so value records (PUT_VALUE, any peer's signed public
// key, one more thing to bound) are off: this DHT is p2pmsg's own, under
// its own protocol, which is when kad-dht allows it. Its answers name
// at most DHTMaxAddrsPerPeer addresses of each peer (see dhtHost), and
// its routing table holds at most MaxRoutingPeersPerHost peers of one
// remote host (see routingHosts).
func startDHT(ctx context.Context, h host.Host, mode DHTMode, bootstrap []peer.AddrInfo, store *providerStore, rt *routingHosts) (*dht.IpfsDHT, error) {
	m := map[DHTMode]dht.ModeOpt{DHTAuto: dht.ModeAuto, DHTServer: dht.ModeServer, DHTClient: dht.ModeClient}[mode]
	d, err := dht.New(newDHTHost(h), dht.Mode(m), dht.ProtocolPrefix(DHTProtocolPrefix), dht.BootstrapPeers(bootstrap...),
		dht.Datastore(store), dht.DisableValues(), dht.RoutingTablePeerDiversityFilter(rt))
	if err != nil {
		return nil, fmt.Errorf("node: DHT: %w", err)
	}
	if err := d.Bootstrap(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("node: DHT bootstrap: %w", err)
	}
	return d, nil
}

// Routing returns the node's DHT, or nil if it was started without
// WithDHT.
func (n *Node) Routing() routing.Routing {
	if n.dht == nil {
		return nil
	}
	return n.dht
}

// RefreshRouting fills the DHT's routing table from the peers the node is
// connected to now and waits until done; a no-op without a DHT. Nodes
// refresh on their own every ten minutes; call this after connecting to
// new peers when a lookup cannot wait.
func (n *Node) RefreshRouting(ctx context.Context) error {
	if n.dht == nil {
		return nil
	}
	select {
	case err := <-n.dht.RefreshRoutingTable():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
