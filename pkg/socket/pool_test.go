package socket_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// poolRig is a server node listening for sockets on a unicast pipe and a
// client node connected to it, with its socket service and the pipe.
func poolRig(t *testing.T, serverOpts, clientOpts []node.Option) (server, client *node.Node, cs *socket.Service, l *socket.Listener, a *adv.PipeAdvertisement, to pipe.ResolveOption) {
	t.Helper()
	server, client = testutil.NewNode(t, serverOpts...), testutil.NewNode(t, clientOpts...)
	if err := client.Connect(ctx(t), server.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ss := newSockets(t, server)
	cs = newSockets(t, client)
	a = newAdv(t, adv.Unicast)
	l, err := ss.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return server, client, cs, l, a, pipe.ToPeers(server.AddrInfo())
}

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
			server, _, cs, l, a, to := poolRig(t,
				[]node.Option{node.WithListenAddrs(tc.transport), node.WithSocketStreamsPerPeer(tc.bound)},
				[]node.Option{node.WithListenAddrs(tc.transport)})
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

// TestPoolBeyondThisNodesOwnStreams: a client keeps a pool of sockets to
// a server that lets one peer hold more than the client's own node lets
// it open to one peer (go-libp2p's 128 outbound streams of a protocol, or
// node.WithSocketStreamsPerPeer if higher). The dial beyond is refused by
// the client's own resource manager, counted there, and the error says so
// and names the option, which raises the bound.
func TestPoolBeyondThisNodesOwnStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []node.Option
		want int
	}{
		{"default", nil, 128},
		{"raised", []node.Option{node.WithSocketStreamsPerPeer(160)}, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, client, cs, l, a, to := poolRig(t, []node.Option{node.WithSocketStreamsPerPeer(256)}, tc.opts)
			for held := 0; ; held++ {
				refused := client.GateStats().StreamsRefused
				c, err := cs.Dial(ctx(t), a, to)
				if err != nil {
					if held != tc.want {
						t.Fatalf("socket %d: %v; want %d held", held+1, err, tc.want)
					}
					if !errors.Is(err, network.ErrResourceLimitExceeded) || errors.Is(err, socket.ErrRefused) {
						t.Fatalf("socket %d: %v, want this node's own limit", held+1, err)
					}
					if msg := err.Error(); !strings.Contains(msg, "this node's own") || !strings.Contains(msg, "node.WithSocketStreamsPerPeer") {
						t.Fatalf("socket %d: %q: want it to say whose limit and name the option", held+1, msg)
					}
					if got := client.GateStats().StreamsRefused - refused; got != 1 {
						t.Fatalf("the client counted %d streams refused, want 1", got)
					}
					return
				}
				defer c.Close()
				s, err := l.AcceptContext(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if held > tc.want {
					t.Fatalf("the client's own node let it hold %d sockets to one peer, want %d", held+1, tc.want)
				}
			}
		})
	}
}
