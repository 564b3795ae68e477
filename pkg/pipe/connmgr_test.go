package pipe_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestOutputPipesProtectTheirPeer: an output pipe keeps the connection
// manager from trimming the connection to the peer it sends to, for as
// long as one output pipe sends there; the receiving side values the
// sender above peers that only route.
func TestOutputPipesProtectTheirPeer(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	cmA, cmB := nodes[0].Host().ConnManager(), nodes[1].Host().ConnManager()
	b := nodes[1].ID()
	a1, a2 := newAdv(t, adv.Unicast), newAdv(t, adv.Unicast)
	for _, a := range []*adv.PipeAdvertisement{a1, a2} {
		in, err := sb.NewInputPipe(a)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
	}
	if cmA.IsProtected(b, "") {
		t.Fatal("protected before any pipe")
	}
	out1, err := sa.NewOutputPipe(ctx(t), a1)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := sa.NewOutputPipe(ctx(t), a2)
	if err != nil {
		t.Fatal(err)
	}
	if err := out1.Send(ctx(t), message.New(message.Text("", "n", "1"))); err != nil {
		t.Fatal(err)
	}
	if err := out1.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !cmA.IsProtected(b, "") {
		t.Fatal("the peer output pipes send to is not protected")
	}
	if ti := cmB.GetTagInfo(nodes[0].ID()); ti == nil || ti.Tags["pipe-sender"] == 0 {
		t.Fatalf("the receiver did not tag the sender: %+v", ti)
	}
	out1.Close()
	if !cmA.IsProtected(b, "") {
		t.Fatal("protection ended while another output pipe sends there")
	}
	out2.Close()
	out2.Close()
	if cmA.IsProtected(b, "") {
		t.Fatal("still protected after every output pipe closed")
	}
}

// TestSenderTaggedAgainAfterReconnecting: the receiver tags a peer that
// sends on its input pipes; the connection manager forgets the tag when
// the peer's last connection closes, and once the peer connects and sends
// on the same pipe again, it is tagged again.
func TestSenderTaggedAgainAfterReconnecting(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	cmB, a := nodes[1].Host().ConnManager(), nodes[0].ID()
	ad := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tagged := func() bool { ti := cmB.GetTagInfo(a); return ti != nil && ti.Tags["pipe-sender"] > 0 }
	for round := range 2 {
		out, err := sa.NewOutputPipe(ctx(t), ad)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := out.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
				t.Fatal(err)
			}
		}
		if err := out.Flush(ctx(t)); err != nil {
			t.Fatal(err)
		}
		out.Close()
		if !tagged() {
			t.Fatalf("round %d: the receiver did not tag the sender", round)
		}
		if round == 1 {
			break
		}
		nodes[1].Host().Network().ClosePeer(a)
		testutil.WaitFor(t, "the sender to be forgotten", func() bool { return !tagged() && !pipe.SenderTagged(sb, a) })
		if err := nodes[0].Host().Connect(ctx(t), peer.AddrInfo{ID: nodes[1].ID(), Addrs: nodes[1].Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
}

func speaksGossipsub(protos []protocol.ID) bool {
	return slices.ContainsFunc(protos, func(p protocol.ID) bool { return strings.HasPrefix(string(p), "/meshsub/") })
}

// TestGossipsubStartsWithTheFirstPropagatePipe: a node with no propagate
// pipe runs no gossipsub; one that binds later is reached by a member
// whose gossipsub started before it.
func TestGossipsubStartsWithTheFirstPropagatePipe(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	un, err := sb.NewInputPipe(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	defer un.Close()
	for _, n := range nodes {
		if speaksGossipsub(n.Host().Mux().Protocols()) {
			t.Fatalf("%s runs gossipsub with no propagate pipe", n.ID())
		}
	}
	ad := newAdv(t, adv.Propagate)
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if !speaksGossipsub(nodes[0].Host().Mux().Protocols()) {
		t.Fatal("no gossipsub after opening a propagate output pipe")
	}
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := out.WaitMembers(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "n", "late"))); err != nil {
		t.Fatal(err)
	}
	m, err := in.Receive(ctx(t))
	if err != nil || text(m, "n") != "late" {
		t.Fatalf("late member got %v, %v", m, err)
	}
}
