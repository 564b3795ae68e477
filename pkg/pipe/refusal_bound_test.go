package pipe_test

import (
	"errors"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestForgedRefusalsForOpenPipeCounted: hostile binders of their own
// pipes answer every stream with refusals naming a pipe open here that
// was never sent to them. Nothing sent on that pipe went to them, so
// the refusals are no pipe's: they are counted stray, not kept for the
// pipe's lifetime (before, each hostile identity left an entry until the
// pipe closed, and a later binding of the pipe to that peer would have
// reported the forgery as its own loss), and the pipe's Flush reports
// nothing.
func TestForgedRefusalsForOpenPipeCounted(t *testing.T) {
	const hostiles = 4
	nodes := testutil.NewConnectedNodes(t, 2+hostiles)
	v, p := nodes[0], nodes[1]
	sv, sp := newPipes(t, v), newPipes(t, p)
	advX, _, outX := unicast(t, sv, sp, pipe.ToPeers(p.AddrInfo()))
	if err := outX.Send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
		t.Fatal(err)
	}
	if err := outX.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	forged := refusalRecord(pipe.DataService, pipe.Key(advX.ID))
	for _, h := range nodes[2:] {
		_, _, outY := unicast(t, sv, newPipes(t, h), pipe.ToPeers(h.AddrInfo()))
		h.Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
			rec := []byte{'H', 1, 0x80, 0x80, 0x80, 0x20} // hello: version 1, 64 MiB
			for range 100 {
				rec = append(rec, forged...)
			}
			st.Write(rec)
			io.Copy(io.Discard, st)
			st.Close()
		})
		if err := outY.Send(ctx(t), message.New(message.Text("", "n", "y"))); err != nil {
			t.Fatal(err)
		}
		outY.Flush(ctx(t))
	}
	if _, _, kept := pipe.SentIndex(sv); kept != 0 {
		t.Errorf("refusals kept for %d (peer, pipe) pairs after forgeries from peers the pipe never sent to; want 0", kept)
	}
	if n := sv.Stats().StrayRefusals; n < hostiles {
		t.Errorf("Stats.StrayRefusals %d, want the forgeries of %d peers counted", n, hostiles)
	}
	if err := outX.Flush(ctx(t)); err != nil {
		t.Errorf("Flush of the pipe the forgeries named: %v, want nil", err)
	}
}

// TestBoundToBounded: binders of one pipe that come and go make its
// output pipe rebind to peer after peer. It remembers at most maxBoundTo
// of them (2 here); past that it takes every peer's refusals and losses
// for its pipe as its own, and what the service keeps for it goes when
// it closes.
func TestBoundToBounded(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 4)
	sv := newPipes(t, nodes[0])
	pipe.SetMaxBoundTo(sv, 2)
	a := newAdv(t, adv.Unicast)
	inputs := map[string]*pipe.InputPipe{}
	var peers []peer.AddrInfo
	for _, n := range nodes[1:] {
		in, err := newPipes(t, n).NewInputPipe(a)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		inputs[n.Host().ID().String()] = in
		peers = append(peers, n.AddrInfo())
	}
	out, err := sv.NewOutputPipe(ctx(t), a, pipe.ToPeers(peers...))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	send := func(text string) error {
		err := out.Send(ctx(t), message.New(message.Text("", "n", text)))
		if err == nil {
			err = out.Flush(ctx(t))
		}
		return err
	}
	seen := map[string]bool{}
	for round := 0; len(seen) < len(inputs); round++ {
		if round == 20 {
			t.Fatalf("20 messages reached %d of the 3 binders", len(seen))
		}
		if err := send("to a binder"); err != nil && !errors.Is(err, endpoint.ErrRefused) {
			t.Fatal(err)
		}
		bound := out.RemotePeer().String()
		if seen[bound] || inputs[bound] == nil {
			continue // the refusal that made it rebind came after this Send
		}
		seen[bound] = true
		n, all := pipe.BoundTo(out)
		if n > 2 {
			t.Fatalf("the output pipe remembers %d peers; want at most 2", n)
		}
		if len(seen) < 3 {
			if all || n != len(seen) {
				t.Fatalf("after %d binders: remembers %d peers (all %v); want %d", len(seen), n, all, len(seen))
			}
			inputs[bound].Close() // the binder goes: the next message is refused, and the pipe rebinds
			continue
		}
		if !all {
			t.Fatalf("after 3 binders: remembers %d peers, not all; want all", n)
		}
	}
	if sent, all, _ := pipe.SentIndex(sv); sent != 0 || all != 1 {
		t.Errorf("the service counts %d (peer, pipe) pairs and %d pipes taking every peer's; want 0 and 1", sent, all)
	}
	out.Close()
	if sent, all, kept := pipe.SentIndex(sv); sent != 0 || all != 0 || kept != 0 {
		t.Errorf("after Close the service keeps %d (peer, pipe) pairs, %d pipes, %d refusal counts; want none", sent, all, kept)
	}
}

// TestRefusalsGoWithTheirPipe: a refusal another Flush learnt of for an
// output pipe that then closes without flushing has nobody left to
// report it to, and goes with the pipe even while another output pipe of
// the same pipe, to another peer, stays open (before, it was kept until
// that one closed too: a pipe that rebinds across churning peers kept
// one entry per peer for its lifetime).
func TestRefusalsGoWithTheirPipe(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	sa, sb, sc := newPipes(t, nodes[0]), newPipes(t, nodes[1]), newPipes(t, nodes[2])
	k, x := newAdv(t, adv.Unicast), newAdv(t, adv.Unicast)
	for _, in := range []struct {
		s *pipe.Service
		a *adv.PipeAdvertisement
	}{{sb, k}, {sc, x}} {
		p, err := in.s.NewInputPipe(in.a)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
	}
	inC, err := sc.NewInputPipe(k)
	if err != nil {
		t.Fatal(err)
	}
	open := func(a *adv.PipeAdvertisement, to int) *pipe.OutputPipe {
		o, err := sa.NewOutputPipe(ctx(t), a, pipe.ToPeers(nodes[to].AddrInfo()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		return o
	}
	toB, toC, xToC := open(k, 1), open(k, 2), open(x, 2)
	for _, o := range []*pipe.OutputPipe{toB, toC, xToC} {
		if err := o.Send(ctx(t), message.New(message.Text("", "n", "1"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := xToC.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	inC.Close()
	if err := toC.Send(ctx(t), message.New(message.Text("", "n", "refused"))); err != nil {
		t.Fatal(err)
	}
	if err := xToC.Send(ctx(t), message.New(message.Text("", "n", "2"))); err != nil {
		t.Fatal(err)
	}
	if err := xToC.Flush(ctx(t)); err != nil { // learns of toC's refusal
		t.Fatal(err)
	}
	if _, _, kept := pipe.SentIndex(sa); kept != 1 {
		t.Fatalf("refusal counts kept: %d, want toC's", kept)
	}
	toC.Close()
	if _, _, kept := pipe.SentIndex(sa); kept != 0 {
		t.Errorf("refusal counts kept after their pipe closed: %d, want 0", kept)
	}
	if err := toB.Flush(ctx(t)); err != nil {
		t.Errorf("Flush of the pipe to the peer that took its message: %v", err)
	}
}
