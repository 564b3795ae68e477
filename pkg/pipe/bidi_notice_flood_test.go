package pipe_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// A peer floods this node with Bidi connect requests for a pipe bound
// nowhere and reads none of the refusals, so the refusal queue stays
// full; a Bidi of this node whose Send then fails part-way still tells
// its other end, which receives what arrived, then io.EOF. Before, its x/
// went through that queue and was dropped: the other end waited until
// its ctx ended.
func TestBidiAbortNoticeUnderRefusalFlood(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	l, err := sb.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	to := pipe.ToPeers(nodes[1].AddrInfo())

	floodRefusals(t, sa, nodes[0], nodes[2])

	x, xb := connected(t, sa, l, to)
	defer x.Close()
	sendFailsThenEOF(t, x, xb)
}

// A peer sending bidirectional-pipe connect requests for a pipe bound
// nowhere, and reading none of the refusals, fills the refusal queue:
// the refusals dropped are counted.
func TestBidiRefusalsDroppedCounted(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa := newPipes(t, nodes[0])
	floodRefusals(t, sa, nodes[0], nodes[1])
}

// A peer that reads none of its refusals (floodRefusals) delays no
// other peer's: an honest peer beyond its share of connections is
// refused, and its Connect fails with ErrRefused at once. Before, every peer's
// refusals went through one queue whose sender waited 5 s on each of the
// flooder's: the honest peer's was dropped, and its Connect timed out (10 s, "did not accept").
func TestBidiRefusalNotDelayedByStalledPeer(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	victim := newPipes(t, nodes[0], pipe.WithBidisPerPeer(1))
	honest := newPipes(t, nodes[1])
	a := newAdv(t, adv.Unicast)
	l, err := victim.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptAll(t, l, 1)
	floodRefusals(t, victim, nodes[0], nodes[2])

	b, err := honest.Connect(ctx(t), a, pipe.ToPeers(nodes[0].AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer (<-accepted).Close()
	if _, err := honest.Connect(ctx(t), a, pipe.ToPeers(nodes[0].AddrInfo())); !errors.Is(err, pipe.ErrRefused) || strings.Contains(err.Error(), "did not accept") {
		t.Fatalf("a connection beyond the peer's 1: %v, want ErrRefused at once", err)
	}
}

// More peers than may have refusals sent to them at once (2 here,
// maxRefusalPeers in use) flood this node with connect requests for a
// pipe bound nowhere and read none of what it sends them: at most that
// many peers' refusals are being sent at any time, one goroutine each,
// and the others' are dropped, counted. Without the bound, every
// flooder held a goroutine sending its refusals.
func TestBidiRefusalPeersBounded(t *testing.T) {
	const bound = 2
	nodes := testutil.NewConnectedNodes(t, bound+2)
	ep, err := endpoint.New(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	victim, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Close(); ep.Close() })
	pipe.SetRefusalPeers(victim, bound)
	var most atomic.Int64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(pipe.RefusalPeers(victim)); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for _, h := range nodes[1:] {
		startRefusalFlood(t, nodes[0], h)
		// The stream to the flooder full, as the flood alone would
		// leave it only after thousands of refusals: each refusal
		// sender then holds its place.
		big := message.New(message.Bytes("", "fill", make([]byte, 16<<10)))
		for i := 0; ; i++ {
			if i == 1000 {
				t.Fatal("16 MiB queued to a peer that reads nothing")
			}
			sctx, cancel := context.WithTimeout(ctx(t), time.Second)
			err := ep.Send(sctx, endpoint.PeerAddress(h.ID(), "fill", ""), big)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.WaitFor(t, "every place taken", func() bool { return pipe.RefusalPeers(victim) >= bound })
	dropped := victim.Stats().BidiRefusalsDropped
	testutil.WaitFor(t, "1,000 more refusals dropped", func() bool { return victim.Stats().BidiRefusalsDropped >= dropped+1000 })
	close(stop)
	<-sampled
	if n := most.Load(); n > bound {
		t.Fatalf("refusals sent to %d peers at once; want at most %d", n, bound)
	}
}

// floodRefusals has node h flood victim (whose pipe service is s) with
// connect requests (startRefusalFlood) and returns once s has dropped
// 1,000 refusals: its queue for h is full and stays so.
func floodRefusals(t *testing.T, s *pipe.Service, victim, h *node.Node) {
	t.Helper()
	startRefusalFlood(t, victim, h)
	testutil.WaitFor(t, "1,000 refusals dropped", func() bool { return s.Stats().BidiRefusalsDropped >= 1000 })
}

// startRefusalFlood has node h send victim connect requests for a pipe
// bound nowhere until the test ends, its endpoint streams from victim
// held unread (a Send that fails is tried again).
func startRefusalFlood(t *testing.T, victim, h *node.Node) {
	t.Helper()
	hep, err := endpoint.New(h)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan network.Stream, 1024)
	h.Host().SetStreamHandler(endpoint.ProtocolID, func(s network.Stream) {
		select {
		case held <- s:
		default:
			s.Reset()
		}
	})
	fctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		wg.Wait()
		hep.Close()
		close(held)
		for s := range held {
			s.Reset()
		}
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; fctx.Err() == nil; i++ {
			dst := endpoint.PeerAddress(victim.ID(), pipe.BidiService, fmt.Sprintf("c/nowhere/flood%d", i))
			if err := hep.Send(fctx, dst, message.New()); err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if i%64 == 63 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
}

// TestBidiRefusalsToMuteDiallerCounted: a peer that speaks no endpoint
// protocol (a raw stream) sends connect requests for a pipe bound nowhere;
// the refusals to it cannot be sent, and every one is counted. Before, the
// refusal whose send failed was not: 5 requests, BidiRefusalsDropped 4
// (or fewer, as the requests and the failed sends interleave).
func TestBidiRefusalsToMuteDiallerCounted(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	victim := newPipes(t, nodes[0])
	st, err := nodes[1].Host().NewStream(ctx(t), nodes[0].ID(), endpoint.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	body, err := wire.Append(nil, message.New())
	if err != nil {
		t.Fatal(err)
	}
	var frames []byte
	for i := range 5 {
		service, param := pipe.BidiService, fmt.Sprintf("c/nowhere/conn%d", i)
		frames = binary.AppendUvarint(frames, uint64(len(service))+1)
		frames = append(frames, service...)
		frames = binary.AppendUvarint(frames, uint64(len(param)))
		frames = append(frames, param...)
		frames = binary.AppendUvarint(frames, uint64(len(body)))
		frames = append(frames, body...)
	}
	if _, err := st.Write(frames); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "5 refusals counted", func() bool {
		return victim.Stats().BidiRefusalsDropped == 5
	})
}
