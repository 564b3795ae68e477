package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// TestRelayReservationsNotExhausted: a relay node; a hostile process
// reserves from 16 loopback addresses with RelayMaxReservationsPerIP
// identities each (128, go-libp2p's total: honest peers were refused
// every reservation, for the hour each lasts). A ninth identity from one
// of them is refused; an honest peer from another address, and one from
// the first, get a reservation.
func TestRelayReservationsNotExhausted(t *testing.T) {
	reserve := relayNode(t)
	const ips = 16
	for ip := 2; ip < 2+ips; ip++ {
		for range node.RelayMaxReservationsPerIP {
			if err := reserve(rawHost(t, fmt.Sprintf("/ip4/127.0.0.%d/tcp/0", ip), nil)); err != nil {
				t.Fatalf("hostile reservation from 127.0.0.%d: %v", ip, err)
			}
		}
	}
	var refused client.ReservationError
	if err := reserve(rawHost(t, "/ip4/127.0.0.2/tcp/0", nil)); !errors.As(err, &refused) {
		t.Fatalf("reservation %d from one address: %v, want it refused", node.RelayMaxReservationsPerIP+1, err)
	}
	for _, src := range []string{"/ip4/127.0.0.99/tcp/0", "/ip4/127.0.0.1/tcp/0"} {
		if err := reserve(rawHost(t, src, nil)); err != nil {
			t.Fatalf("after %d hostile reservations from %d addresses, an honest one from %s: %v",
				ips*node.RelayMaxReservationsPerIP, ips, src, err)
		}
	}
}

// TestRelayReservationsPerIPSet: a relay set to grant 12 reservations per
// IP address grants 12 identities from one address theirs, beyond
// go-libp2p's 8 (a lab swarm's private peers, all on 127.0.0.1, were
// refused from the ninth on), and refuses the thirteenth; out of range,
// the option is refused.
func TestRelayReservationsPerIPSet(t *testing.T) {
	const perIP = 12
	reserve := relayNode(t, node.WithRelayReservationsPerIP(perIP))
	for i := range perIP {
		if err := reserve(rawHost(t, "/ip4/127.0.0.2/tcp/0", nil)); err != nil {
			t.Fatalf("reservation %d of %d from one address: %v", i+1, perIP, err)
		}
	}
	var refused client.ReservationError
	if err := reserve(rawHost(t, "/ip4/127.0.0.2/tcp/0", nil)); !errors.As(err, &refused) {
		t.Fatalf("reservation %d from one address: %v, want it refused", perIP+1, err)
	}
	for _, n := range []int{0, 4097} {
		if _, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithRelayReservationsPerIP(n)); !errors.Is(err, node.ErrBadOption) {
			t.Errorf("WithRelayReservationsPerIP(%d): %v, want ErrBadOption", n, err)
		}
	}
}

// relayNode starts a relay node with opts, once its relay service runs,
// and returns how a host reserves on it (within 2 minutes).
func relayNode(t *testing.T, opts ...node.Option) (reserve func(host.Host) error) {
	t.Helper()
	relay := testutil.NewNode(t, append([]node.Option{node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// The relay service starts once the host sees itself reachable.
	if !waitFor(ctx, func() bool { return slices.Contains(relay.Host().Mux().Protocols(), proto.ProtoIDv2Hop) }) {
		t.Fatal("the relay service never started")
	}
	return func(h host.Host) error {
		if err := h.Connect(ctx, relay.AddrInfo()); err != nil {
			return err
		}
		_, err := client.Reserve(ctx, h, relay.AddrInfo())
		return err
	}
}
