package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// rawHost is a misbehaving peer's lean go-libp2p host: TCP only, no
// resource limits or connection manager of its own, listening on listen
// if given, announcing announce (when given) in place of its own
// addresses.
func rawHost(t testing.TB, listen string, announce []ma.Multiaddr) host.Host {
	t.Helper()
	opts := []libp2p.Option{libp2p.Transport(tcp.NewTCPTransport), libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableRelay(), libp2p.DisableMetrics()}
	if listen == "" {
		opts = append(opts, libp2p.NoListenAddrs)
	} else {
		opts = append(opts, libp2p.ListenAddrStrings(listen))
	}
	if announce != nil {
		opts = append(opts, libp2p.AddrsFactory(func([]ma.Multiaddr) []ma.Multiaddr { return announce }))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// fakeAddrs is n distinct loopback addresses nobody listens on.
func fakeAddrs(n int) []ma.Multiaddr {
	addrs := make([]ma.Multiaddr, n)
	for i := range addrs {
		addrs[i] = ma.StringCast(fmt.Sprintf("/ip4/127.%d.%d.1/tcp/9", 1+i/200, i%200))
	}
	return addrs
}

// waitFor polls cond until it holds or ctx ends; it reports whether it
// held.
func waitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}
