package node_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// yamuxWindow is the receive window every yamux stream reserves when it
// opens (go-yamux's initialStreamWindow).
const yamuxWindow = 256 << 10

// systemMemory is the memory n's resource manager has reserved, all
// scopes together.
func systemMemory(n *node.Node) int64 {
	var m int64
	n.Host().Network().ResourceManager().ViewSystem(func(s network.ResourceScope) error {
		m = s.Stat().Memory
		return nil
	})
	return m
}

// echo writes msg on s and reads it back.
func echo(s network.Stream, msg string) error {
	if _, err := s.Write([]byte(msg)); err != nil {
		return err
	}
	b := make([]byte, len(msg))
	_, err := io.ReadFull(s, b)
	return err
}

// TestMemoryFullKeepsHonestConnection: an honest peer holds a
// connection with a stream in use; a hostile peer then opens streams the
// node does not read until the node's memory has no room for another
// stream's receive window. The honest peer opens another stream: the
// node refuses its window, counted (GateStats.MemoryRefused), and resets
// that stream only; the honest peer's connection and its first stream
// go on.
func TestMemoryFullKeepsHonestConnection(t *testing.T) {
	const limit = 16 * yamuxWindow
	n := testutil.NewNode(t, node.WithNodeMemoryLimit(limit))
	const echoProto, holdProto protocol.ID = "/test/echo/1.0.0", "/test/hold/1.0.0"
	echoing := func(s network.Stream) { io.Copy(s, s); s.Reset() }
	var holding atomic.Int64
	n.Host().SetStreamHandler(echoProto, echoing)
	n.Host().SetStreamHandler(holdProto, func(s network.Stream) { holding.Add(1); io.Copy(io.Discard, s); s.Reset() })
	// Only the test's streams open on the node: identify's are done.
	settled := func() bool {
		for _, c := range n.Host().Network().Conns() {
			for _, s := range c.GetStreams() {
				if p := s.Protocol(); p != echoProto && p != holdProto {
					return false
				}
			}
		}
		return true
	}

	honest := rawHost(t, "", nil)
	honest.SetStreamHandler(echoProto, echoing)
	if err := honest.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ctx := network.WithNoDial(within(t), "test")
	first, err := honest.NewStream(ctx, n.ID(), echoProto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Reset() })
	if err := echo(first, "before"); err != nil {
		t.Fatal(err)
	}

	hostile := rawHost(t, "", nil)
	if err := hostile.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	// Streams while a window fits, each waited for until the node holds
	// it (its window reserved).
	held := 0
	for waitFor(within(t), settled) && limit-systemMemory(n) >= yamuxWindow {
		s, err := hostile.NewStream(ctx, n.ID(), holdProto)
		if err != nil {
			t.Fatalf("hostile stream %d: %v", held, err)
		}
		t.Cleanup(func() { s.Reset() })
		if _, err := s.Write([]byte("held")); err != nil {
			t.Fatalf("hostile stream %d: %v", held, err)
		}
		held++
		if !waitFor(within(t), func() bool { return holding.Load() == int64(held) }) {
			t.Fatalf("hostile stream %d not held: the node's memory holds %d bytes", held, systemMemory(n))
		}
	}
	refused := n.GateStats().MemoryRefused

	second, err := honest.NewStream(ctx, n.ID(), echoProto)
	if err == nil {
		err = echo(second, "refused")
		second.Reset()
	}
	if err == nil {
		t.Fatalf("the node's memory (%d of %d bytes) had no room for a stream's window, yet a new stream echoed", systemMemory(n), limit)
	}
	t.Logf("with %d hostile streams held, the honest peer's new stream: %v", held, err)
	if got := n.GateStats().MemoryRefused; got <= refused {
		t.Fatalf("the honest peer's new stream failed (%v) with no memory refusal counted", err)
	}
	if c := n.Host().Network().Connectedness(honest.ID()); c != network.Connected {
		t.Fatalf("a refused stream window ended the honest peer's connection (%v)", c)
	}
	if err := echo(first, "after"); err != nil {
		t.Fatalf("the honest peer's first stream after its new one was refused: %v", err)
	}
	// A stream the node opens is refused alike: the open fails.
	if s, err := n.Host().NewStream(ctx, honest.ID(), echoProto); !errors.Is(err, network.ErrResourceLimitExceeded) {
		if err == nil {
			s.Reset()
		}
		t.Fatalf("the node opened a stream with no room for its window: %v", err)
	}
	if err := echo(first, "last"); err != nil {
		t.Fatalf("the honest peer's first stream after the node's open was refused: %v", err)
	}
}
