package pipe_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// A peer of a propagate pipe's topic, running its own gossipsub, that
// publishes invalid messages (signatures that fail, or none) is
// graylisted after a few dozen of them: its later messages are dropped
// unread, counted, while an honest member's messages still arrive.
// Without peer scoring every one was checked and refused, for as long as
// it sent.
func TestPropagateInvalidSenderGraylisted(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name string
		join func(t *testing.T, h host.Host, topic string) *pubsub.Topic
	}{
		{"bad signatures", func(t *testing.T, h host.Host, name string) *pubsub.Topic {
			return corruptingPublisher(t, h.ID(), hostilePubSub(t, h, n), name)
		}},
		{"unsigned", func(t *testing.T, h host.Host, name string) *pubsub.Topic {
			return joinTopic(t, hostilePubSub(t, h, n, pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
				pubsub.WithMessageIdFn(func(m *pb.Message) string { return string(m.Data) })), name)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 3)
			member, honest, hostile := nodes[0], nodes[1], nodes[2]
			sm, sh := newPipes(t, member), newPipes(t, honest)
			ad := newAdv(t, adv.Propagate)
			in, err := sm.NewInputPipe(ad)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close() })
			out := publisher(t, sh, ad)
			t.Cleanup(func() { out.Close() })

			topic := tc.join(t, hostile.Host(), pipe.TopicPrefix+ad.ID.String())
			testutil.WaitFor(t, "the hostile peer to see the member", func() bool { return slices.Contains(topic.ListPeers(), member.ID()) })
			send := func(round int) {
				for i := range n {
					if err := topic.Publish(ctx(t), fmt.Appendf(nil, "forged %d.%d", round, i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			send(1)
			testutil.WaitFor(t, "every message refused or the peer graylisted", func() bool {
				st := sm.Stats()
				return st.PropagateRejected+st.PropagateInboundDropped >= n || st.PropagateGraylistedPeers > 0
			})
			st := sm.Stats()
			if st.PropagateGraylistedPeers == 0 {
				t.Fatalf("all %d invalid messages checked and refused one by one (PropagateRejected %d, dropped for a full validation queue %d); the peer is not graylisted",
					n, st.PropagateRejected, st.PropagateInboundDropped)
			}
			// Graylisted, the peer's next messages are dropped unread.
			send(2)
			testutil.WaitFor(t, "its next messages dropped", func() bool { return sm.Stats().PropagateGraylisted >= n })
			for i := range 5 {
				if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
					t.Fatal(err)
				}
				if m, err := in.Receive(ctx(t)); err != nil || text(m, "n") != fmt.Sprint(i) {
					t.Fatalf("honest member's message %d: %v, %v", i, m, err)
				}
			}
			end := sm.Stats()
			t.Logf("hostile peer sent %d invalid messages: %d checked and refused, %d dropped unread from the graylisted peer (%d peers graylisted); the honest member's 5 arrived",
				2*n, end.PropagateRejected, end.PropagateGraylisted, end.PropagateGraylistedPeers)
			if end.PropagateRejected >= n {
				t.Fatalf("%d invalid messages checked and refused, as many as the peer sent in its first round", end.PropagateRejected)
			}
		})
	}
}

// hostilePubSub starts a gossipsub router on h (with opts) whose outbound
// queues hold two rounds of n messages, so that all it publishes reaches
// the member however slowly the member reads; it stops when the test
// ends.
func hostilePubSub(t *testing.T, h host.Host, n int, opts ...pubsub.Option) *pubsub.PubSub {
	t.Helper()
	psCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ps, err := pubsub.NewGossipSub(psCtx, h, append([]pubsub.Option{pubsub.WithPeerOutboundQueueSize(2 * n)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// corruptingPublisher joins topic on ps so that what self publishes is
// signed, then its signature altered: a local validator runs after
// gossipsub checked the signature and before it sends the message, so
// every message the member gets carries a signature that fails.
func corruptingPublisher(t *testing.T, self peer.ID, ps *pubsub.PubSub, name string) *pubsub.Topic {
	t.Helper()
	corrupt := func(_ context.Context, from peer.ID, m *pubsub.Message) bool {
		if from == self && len(m.Signature) > 0 {
			m.Signature = append([]byte{m.Signature[0] ^ 1}, m.Signature[1:]...)
		}
		return true
	}
	if err := ps.RegisterTopicValidator(name, corrupt, pubsub.WithValidatorInline(true)); err != nil {
		t.Fatal(err)
	}
	return joinTopic(t, ps, name)
}

// joinTopic joins name on ps until the test ends.
func joinTopic(t *testing.T, ps *pubsub.PubSub, name string) *pubsub.Topic {
	t.Helper()
	topic, err := ps.Join(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topic.Close() })
	return topic
}
