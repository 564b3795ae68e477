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
	defer in.Close()
	spy, err := pubsub.NewGossipSub(psCtx, capturer.Host())
	if err != nil {
		t.Fatal(err)
	}
	topic, err := spy.Join(pipe.TopicPrefix + ad.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
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
	// The hostile peer speaks gossipsub by hand: one RPC publishing the
	// captured message, signature and all.
	before := sr.Stats().PropagateReplays
	rpc := &pb.RPC{Publish: []*pb.Message{captured.Message}}
	b, err := proto.Marshal(rpc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := hostile.Host().NewStream(ctx(t), recv.ID(), "/meshsub/1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(append(binary.AppendUvarint(nil, uint64(len(b))), b...)); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for sr.Stats().PropagateReplays == before {
		short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
		m, err := in.Receive(short)
		cancel()
		if err == nil {
			t.Fatalf("replayed message delivered again: %q", text(m, "order"))
		}
	}
	short, cancel := context.WithTimeout(ctx(t), 500*time.Millisecond)
	defer cancel()
	if m, err := in.Receive(short); err == nil {
		t.Fatalf("replayed message delivered again: %q", text(m, "order"))
	}
	t.Logf("replays refused: %d", sr.Stats().PropagateReplays)
}
