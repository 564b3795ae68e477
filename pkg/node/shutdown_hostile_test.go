package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// TestShutdownRelayedWaits checks that Shutdown waits for the answer on a
// relayed connection too (a limited one, which the endpoint, sockets and
// pipes use): A reaches B only through a relay, writes a stream and its
// end, and shuts down; B reads it whole. (Shutdown's stream was refused
// on a limited connection, and it closed at once.)
func TestShutdownRelayedWaits(t *testing.T) {
	const proto, size, rounds = "/test/sink", 8 << 20, 5
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	r := testutil.NewNode(t, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
	for round := range rounds {
		b := testutil.NewNode(t, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
		a := testutil.NewNode(t)
		if err := b.Connect(ctx, r.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Reserve(ctx, r.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		got := node.Sink(b, proto, nil)
		circuit := ma.StringCast(r.Addrs()[0].String() + "/p2p-circuit")
		if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range a.Host().Network().ConnsToPeer(b.ID()) {
			if !c.Stat().Limited {
				t.Fatalf("A-B connection %v is not limited", c.RemoteMultiaddr())
			}
		}
		node.SendAndEnd(t, ctx, a, b.ID(), proto, size)
		if err := a.Shutdown(ctx); err != nil {
			t.Fatalf("round %d: Shutdown: %v", round, err)
		}
		if r := <-got; r.Err != nil || r.N != size {
			t.Fatalf("round %d: Shutdown returned nil, but B read %d of %d bytes, then %v", round, r.N, size, r.Err)
		}
	}
}

// TestShutdownUnderMemoryPressure checks that a node whose memory is full
// says that Shutdown could not confirm what it wrote: streams that a peer
// holds open unread (the node's limit is small here so that a few fill
// it), whether another peer's or B's own, leave A no room for its stream
// to B, and Shutdown reports the refusal rather than return nil while B
// may not have read what A wrote. (It took the refusal for nothing to
// wait for, closed at once, and returned nil.)
func TestShutdownUnderMemoryPressure(t *testing.T) {
	for _, holder := range []string{"another peer", "the peer itself"} {
		t.Run(holder, func(t *testing.T) {
			const rounds = 3
			for round := range rounds {
				shutdownUnderMemoryPressure(t, holder == "the peer itself", round)
			}
		})
	}
}

func shutdownUnderMemoryPressure(t *testing.T, byPeer bool, round int) {
	const proto, hold, size = "/test/sink", "/test/hold", 8 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := testutil.NewNode(t, node.WithNodeMemoryLimit(6<<20))
	b := testutil.NewNode(t)
	done := make(chan struct{})
	defer close(done)
	// B reads A's stream whole but keeps its own side open: its end would
	// let A's yamux forget the stream and free its window, and Shutdown,
	// finding room, would rightly confirm a peer that read everything.
	b.Host().SetStreamHandler(proto, func(s network.Stream) {
		io.Copy(io.Discard, s)
		<-done
		s.Close()
	})
	if err := a.Connect(ctx, b.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	st, err := a.Host().NewStream(ctx, b.ID(), proto)
	if err != nil {
		t.Fatal(err)
	}
	holder := b.Host()
	if !byPeer {
		holder = rawHost(t, "", nil)
		if err := holder.Connect(ctx, a.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	// The holder opens streams A holds unread until A refuses a stream of
	// its own (to B) for memory.
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("A's memory never filled")
		}
		p := protocol.ID(fmt.Sprintf("%s/%d", hold, i%8))
		if i < 8 {
			a.Host().SetStreamHandler(p, func(s network.Stream) { <-done; s.Reset() })
		}
		if s, err := holder.NewStream(ctx, a.ID(), p); err == nil {
			s.Write([]byte{0})
		}
		time.Sleep(5 * time.Millisecond)
		s, err := a.Host().Network().ConnsToPeer(b.ID())[0].NewStream(ctx)
		if err != nil {
			break
		}
		s.Reset()
	}
	node.WriteAndEnd(t, st, size)
	err = a.Shutdown(ctx)
	if !errors.Is(err, network.ErrResourceLimitExceeded) {
		t.Fatalf("round %d: Shutdown: %v, want it to say the node's memory refused its stream", round, err)
	}
}
