package socket_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// TestPoolBeyondTheNodesSocketStreams: a client keeps a pool of sockets
// to one server, all accepted and held open, and dials one more than the
// server's node lets one peer hold (node.WithSocketStreamsPerPeer). The
// node resets that stream as its protocol is negotiated and counts it;
// the dialler learns it as a refusal (ErrRefused) that says why and
// names the bound. With the bound one higher the same pool gets in.
func TestPoolBeyondTheNodesSocketStreams(t *testing.T) {
	const pool = 4
	for _, tc := range []struct {
		name      string
		transport string
		bound     int
		wantErr   error
	}{
		{"TCP at the bound", testutil.LoopbackTCP, pool, socket.ErrRefused},
		{"QUIC at the bound", testutil.LoopbackQUIC, pool, socket.ErrRefused},
		{"bound raised", testutil.LoopbackTCP, pool + 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := testutil.NewNode(t, node.WithListenAddrs(tc.transport), node.WithSocketStreamsPerPeer(tc.bound))
			client := testutil.NewNode(t, node.WithListenAddrs(tc.transport))
			if err := client.Connect(ctx(t), server.AddrInfo()); err != nil {
				t.Fatal(err)
			}
			ss, cs := newSockets(t, server), newSockets(t, client)
			a := newAdv(t, adv.Unicast)
			l, err := ss.Listen(a)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			to := pipe.ToPeers(server.AddrInfo())
			for i := range pool {
				c, err := cs.Dial(ctx(t), a, to)
				if err != nil {
					t.Fatalf("socket %d of the pool: %v", i, err)
				}
				defer c.Close()
				s, err := l.AcceptContext(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			}
			refused := server.GateStats().StreamsRefused
			c, err := cs.Dial(ctx(t), a, to)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("socket %d of a pool to a node allowing %d: %v, want %v", pool+1, tc.bound, err, tc.wantErr)
			}
			want := uint64(1)
			if err == nil {
				c.Close()
				want = 0
			} else if msg := err.Error(); !strings.HasPrefix(msg, socket.ErrRefused.Error()) ||
				!strings.Contains(msg, "node.MaxSocketStreamsPerPeer") {
				t.Fatalf("the refusal says %q: want it to lead with the refusal and name the bound", msg)
			}
			if got := server.GateStats().StreamsRefused - refused; got != want {
				t.Fatalf("the server counted %d streams refused, want %d", got, want)
			}
		})
	}
}
