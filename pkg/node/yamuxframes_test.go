package node_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// drained makes sure the node's yamux has handled every frame h sent
// it so far: one connection's frames are handled in order, and an echo
// on a new stream comes back after them.
func drained(t *testing.T, h host.Host, n *node.Node, echoProto protocol.ID) {
	t.Helper()
	s, err := h.NewStream(network.WithNoDial(within(t), "test"), n.ID(), echoProto)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	if err := echo(s, "drained"); err != nil {
		t.Fatal(err)
	}
}

// TestSmallFramesReset: an ordinary go-libp2p peer writes 1-byte frames
// (one Write each) on 8 streams whose handler holds them unread. Each
// stream is reset once its frames would cost more than a receive window
// beyond their bytes (8,193 frames), the writer told ("stream reset"),
// each reset counted (GateStats.FramesReset), the connection kept.
func TestSmallFramesReset(t *testing.T) {
	const holdProto, echoProto protocol.ID = "/test/hold/1.0.0", "/test/echo/1.0.0"
	n := testutil.NewNode(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	n.Host().SetStreamHandler(holdProto, func(s network.Stream) { <-release; s.Reset() })
	n.Host().SetStreamHandler(echoProto, func(s network.Stream) { io.Copy(s, s); s.Close() })

	h := rawHost(t, "", nil)
	if err := h.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ctx := network.WithNoDial(within(t), "test")
	before := heapInUse()
	const streams = 8
	written := make([]int, streams)
	errs := make([]error, streams)
	var writers sync.WaitGroup
	for i := range streams {
		s, err := h.NewStream(ctx, n.ID(), holdProto)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Reset() })
		deadline, _ := ctx.Deadline()
		s.SetWriteDeadline(deadline)
		writers.Add(1)
		go func() {
			defer writers.Done()
			b := []byte{'x'}
			for written[i] < 2*yamuxWindow {
				if _, errs[i] = s.Write(b); errs[i] != nil {
					return
				}
				written[i]++
			}
		}()
	}
	writers.Wait()
	drained(t, h, n, echoProto)
	grown := int64(heapInUse()) - int64(before)
	t.Logf("8 streams of 1-byte frames held unread: heap %+.1f MiB; written %v", float64(grown)/(1<<20), written)
	for i, err := range errs {
		if !errors.Is(err, network.ErrReset) {
			t.Errorf("stream %d: %d 1-byte frames written, then %v; want a reset", i, written[i], err)
		}
	}
	if got := n.GateStats().FramesReset; got != streams {
		t.Errorf("%d streams reset for their frames counted, want %d", got, streams)
	}
	if c := n.Host().Network().Connectedness(h.ID()); c != network.Connected {
		t.Fatalf("the connection ended (%v)", c)
	}
}

// TestHonestFramesNotReset: an honest peer fills an unread stream's
// window with 100-byte frames, and sends 100,000 1-byte frames to a
// reader that keeps up (the peer waits for it every 1,000): neither is
// reset, every byte arrives. 100,000 is twelve times the ~8,000 unread
// 1-byte frames that cost a window: frames read and not released would
// have the stream reset long before the end (a million took up to 87 s
// under -race and CI's load, to no more effect).
func TestHonestFramesNotReset(t *testing.T) {
	const holdProto, readProto, echoProto protocol.ID = "/test/hold/1.0.0", "/test/read/1.0.0", "/test/echo/1.0.0"
	n := testutil.NewNode(t)
	release := make(chan struct{})
	count := func(s network.Stream) {
		m, _ := io.Copy(io.Discard, s)
		s.Write([]byte(strconv.FormatInt(m, 10)))
		s.Close()
	}
	n.Host().SetStreamHandler(holdProto, func(s network.Stream) { <-release; count(s) })
	n.Host().SetStreamHandler(readProto, func(s network.Stream) {
		b := make([]byte, 1000)
		for {
			if _, err := io.ReadFull(s, b); err != nil {
				s.Reset()
				return
			}
			if _, err := s.Write(b[:1]); err != nil {
				return
			}
		}
	})
	n.Host().SetStreamHandler(echoProto, func(s network.Stream) { io.Copy(s, s); s.Close() })
	h := rawHost(t, "", nil)
	if err := h.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ctx := network.WithNoDial(within(t), "test")

	t.Run("100-byte frames unread", func(t *testing.T) {
		s, err := h.NewStream(ctx, n.ID(), holdProto)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		frame := make([]byte, 100)
		const frames = yamuxWindow / 100
		for range frames {
			if _, err := s.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
		drained(t, h, n, echoProto) // all frames buffered, unread
		close(release)
		s.CloseWrite()
		got, err := io.ReadAll(s)
		if err != nil || string(got) != strconv.Itoa(frames*100) {
			t.Fatalf("the node read %q (%v), want %d", got, err, frames*100)
		}
	})

	t.Run("1-byte frames read at once", func(t *testing.T) {
		s, err := h.NewStream(ctx, n.ID(), readProto)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		b, ack := []byte{'x'}, make([]byte, 1)
		for range 100 {
			for range 1000 {
				if _, err := s.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := io.ReadFull(s, ack); err != nil {
				t.Fatal(err)
			}
		}
	})
	if got := n.GateStats().FramesReset; got != 0 {
		t.Fatalf("%d streams of an honest peer reset for their frames", got)
	}
}

// TestResetErrorSaysItOnce: a stream whose connection closes fails its
// Read and Write with an error that matches network.ErrReset and says
// "stream reset" once. Before, go-libp2p's form prefixed network.ErrReset
// to go-yamux's error, both "stream reset": "stream reset: stream reset:
// connection closed: EOF", a doubling that reached users' errors.
func TestResetErrorSaysItOnce(t *testing.T) {
	const proto protocol.ID = "/test/hold/1.0.0"
	nodes := testutil.NewConnectedNodes(t, 2)
	held := make(chan network.Stream, 1)
	nodes[1].Host().SetStreamHandler(proto, func(s network.Stream) { held <- s })
	s, err := nodes[0].Host().NewStream(network.WithNoDial(within(t), "test"), nodes[1].ID(), proto)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	<-held
	nodes[1].Host().Network().ClosePeer(nodes[0].ID())
	_, rerr := s.Read(make([]byte, 1))
	_, werr := s.Write([]byte("y"))
	for op, err := range map[string]error{"Read": rerr, "Write": werr} {
		if !errors.Is(err, network.ErrReset) || strings.Count(err.Error(), "stream reset") != 1 {
			t.Errorf("%s after the connection closed: %q; want network.ErrReset, saying 'stream reset' once", op, err)
		}
	}
}
