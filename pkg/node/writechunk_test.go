package node_test

import (
	"context"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// WriteChunk bounds writes on yamux over TLS only: to a TLS record's
// worth, less yamux's 12-byte frame header.
func TestWriteChunk(t *testing.T) {
	for _, tc := range []struct {
		name, listen, security string
		want                   int
	}{
		{"tcp/tls", testutil.LoopbackTCP, node.SecurityTLS, 16<<10 - 12},
		{"tcp/noise", testutil.LoopbackTCP, node.SecurityNoise, 0},
		{"quic", testutil.LoopbackQUIC, node.SecurityTLS, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []node.Option{node.WithListenAddrs(tc.listen), node.WithSecurity(tc.security)}
			a, b := testutil.NewNode(t, opts...), testutil.NewNode(t, opts...)
			if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
				t.Fatal(err)
			}
			conns := a.Host().Network().ConnsToPeer(b.ID())
			if len(conns) != 1 {
				t.Fatalf("%d connections, want 1", len(conns))
			}
			if got := node.WriteChunk(conns[0]); got != tc.want {
				t.Fatalf("WriteChunk = %d, want %d (%+v)", got, tc.want, conns[0].ConnState())
			}
		})
	}
}
