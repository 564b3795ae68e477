package pipe_test

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"google.golang.org/protobuf/proto"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestPropagateReplayRefused is issue 21's row 6: a hostile peer that
// captured a signed propagate message publishes it again once gossipsub
// has forgotten it; the receiver does not deliver it a second time.
//
// Gossipsub forgets a message a TTL after seeing it, but sweeps only once
// a minute; the receiver here numbers every arrival as a new message
// (WithMessageIdFn), which is what every replay looks like once the seen
// cache has expired, without waiting for the sweep.
func TestPropagateReplayRefused(t *testing.T) {
	sc := newReplayScene(t)
	before := sc.sr.Stats().PropagateReplays
	sc.replay(t)
	for sc.sr.Stats().PropagateReplays == before {
		short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
		m, err := sc.in.Receive(short)
		cancel()
		if err == nil {
			t.Fatalf("replayed message delivered again: %q", text(m, "order"))
		}
	}
	short, cancel := context.WithTimeout(ctx(t), 500*time.Millisecond)
	defer cancel()
	if m, err := sc.in.Receive(short); err == nil {
		t.Fatalf("replayed message delivered again: %q", text(m, "order"))
	}
	t.Logf("replays refused: %d", sc.sr.Stats().PropagateReplays)
}

// replayScene is a propagate pipe whose author's first message a
// capturing member has kept, received once at a member (sr, in) whose
// router numbers every arrival as new, with a hostile peer at hand.
type replayScene struct {
	recv, hostile *node.Node
	sr            *pipe.Service
	in            *pipe.InputPipe
	ad            *adv.PipeAdvertisement
	captured      *pubsub.Message
}

func newReplayScene(t *testing.T) *replayScene {
	t.Helper()
	nodes := testutil.NewConnectedNodes(t, 4)
	author, recv, capturer, hostile := nodes[0], nodes[1], nodes[2], nodes[3]
	psCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop) // the routers stop with it, after the services
	var arrivals atomic.Uint64
	forgetful, err := pubsub.NewGossipSub(psCtx, recv.Host(), pubsub.WithMessageIdFn(func(*pb.Message) string {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], arrivals.Add(1))
		return string(b[:])
	}))
	if err != nil {
		t.Fatal(err)
	}
	sa, sr := newPipes(t, author), newPipes(t, recv, pipe.WithPubSub(forgetful))
	ad := newAdv(t, adv.Propagate)
	in, err := sr.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	spy, err := pubsub.NewGossipSub(psCtx, capturer.Host())
	if err != nil {
		t.Fatal(err)
	}
	topic, err := spy.Join(pipe.TopicPrefix + ad.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	if err := out.WaitMembers(ctx(t), 2); err != nil {
		t.Fatal(err)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "order", "pay 100"))); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "order") != "pay 100" {
		t.Fatalf("first delivery: %v, %v", m, err)
	}
	captured, err := sub.Next(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return &replayScene{recv: recv, hostile: hostile, sr: sr, in: in, ad: ad, captured: captured}
}

// replay has the hostile peer publish the captured message to the
// member, speaking gossipsub by hand: one RPC, signature and all.
func (sc *replayScene) replay(t *testing.T) {
	t.Helper()
	b, err := proto.Marshal(&pb.RPC{Publish: []*pb.Message{sc.captured.Message}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sc.hostile.Host().NewStream(ctx(t), sc.recv.ID(), "/meshsub/1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Write(append(binary.AppendUvarint(nil, uint64(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
}
