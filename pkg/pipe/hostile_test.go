package pipe_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestMovedBindingLosesNothingSilently is issue 21's row 5: the input pipe
// moves from B to C while A's output pipe is open. Every message A sends
// is delivered at C or reported to A as not delivered.
func TestMovedBindingLosesNothingSilently(t *testing.T) {
	const count = 100
	nodes := testutil.NewConnectedNodes(t, 3)
	sa, sb, sc := newPipes(t, nodes[0]), newPipes(t, nodes[1]), newPipes(t, nodes[2])
	ad := newAdv(t, adv.Unicast)
	inB, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.Send(ctx(t), message.New(message.Text("", "n", "first"))); err != nil {
		t.Fatal(err)
	}
	if err := out.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if m, err := inB.Receive(ctx(t)); err != nil || text(m, "n") != "first" {
		t.Fatalf("B: %v, %v", m, err)
	}
	inB.Close()
	var atC atomic.Int64
	inC, err := sc.NewInputPipe(ad, pipe.WithHandler(func(*pipe.Received) { atC.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer inC.Close()

	reported := 0
	account := func(err error) {
		var ue *pipe.UndeliveredError
		switch {
		case err == nil:
		case errors.As(err, &ue):
			if !errors.Is(err, endpoint.ErrRefused) {
				t.Errorf("%v does not unwrap to endpoint.ErrRefused", err)
			}
			reported += ue.Count
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	// The first half goes to B before A hears of any refusal; the second
	// half to C once A has; a last one after Flush goes to C too.
	for i := range count + 1 {
		if i == count/2 {
			// Let B's refusals reach A: the next Send learns of them,
			// resolves again and goes to C.
			for sa.Endpoint().Stats().RefusalsReceived == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if i == count {
			account(out.Flush(ctx(t)))
		}
		err := out.Send(ctx(t), message.New(message.Text("", "n", strconv.Itoa(i))))
		if err != nil {
			reported++ // this one was not sent
		}
		account(err)
	}
	account(out.Flush(ctx(t)))
	t.Logf("%d delivered at C, %d reported not delivered", atC.Load(), reported)
	if got := int(atC.Load()) + reported; got != count+1 {
		t.Fatalf("%d delivered + %d reported = %d of %d messages: the rest were lost silently", atC.Load(), reported, got, count+1)
	}
	if out.RemotePeer() != nodes[2].ID() || atC.Load() == 0 {
		t.Fatalf("output pipe sends to %s, want C, which got %d messages", out.RemotePeer(), atC.Load())
	}
}

// TestUnreadPipeBoundedInBytes is issue 21's row 2: a peer fills an input
// pipe that the application does not read with large messages. The queue
// is bounded in bytes (WithQueueBytes) as well as in messages, and the
// sender then stalls: the receiver's heap stays far below a queue of
// 4 MiB messages.
func TestUnreadPipeBoundedInBytes(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	_, in, out := unicast(t, newPipes(t, nodes[0]), newPipes(t, nodes[1]))
	before := testutil.LiveHeap()
	big := message.New(message.Bytes("", "b", make([]byte, 4<<20)))
	var sent atomic.Int64
	sctx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			if out.Send(sctx, big) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	defer func() { cancel(); <-done }()
	for sent.Load() < 4 {
		time.Sleep(10 * time.Millisecond)
	}
	var peak int64
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, testutil.LiveHeap()-before)
	}
	// The queue's bytes, a message waiting to enter it, 32 MiB of
	// flow-control windows, the sender's message and slack.
	bound := int64(pipe.DefaultQueueBytes + 4<<20 + 32<<20 + 4<<20 + 8<<20)
	t.Logf("%d messages of 4 MiB sent; receiver heap grew by at most %d MiB (bound %d MiB)", sent.Load(), peak>>20, bound>>20)
	if peak > bound {
		t.Fatalf("heap grew by %d MiB with an unread pipe, over %d MiB", peak>>20, bound>>20)
	}
	cancel()
	<-done
	// Once the application reads, the stalled sender gets going again.
	for range 3 {
		if _, err := in.Receive(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFullJXTABidiLetsTheEndpointClose: a peer opens an unreliable
// JxtaBiDiPipe (over libp2p: the endpoint lets any peer speak JXTA's pipe
// protocol) and fills the Bidi's queue, so the endpoint's reader waits for
// room. It must wait on the endpoint's listener context, not the pipe
// service's, or endpoint.Close, which ends that context and then waits
// for its readers, never returns.
func TestFullJXTABidiLetsTheEndpointClose(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	hostile, err := endpoint.New(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hostile.Close() })
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := endpoint.New(nodes[1], endpoint.WithJXTA(ident, ""))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pipe.New(ep, pipe.WithQueueLen(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(); ep.Close() })
	a := newAdv(t, adv.Unicast)
	l, err := sb.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	// The hostile peer's own pipe, where the open's answer comes.
	mine := newAdv(t, adv.Unicast)
	answers := make(chan *message.Message, 4)
	hostile.Register(pipe.JXTAPipeService, mine.ID.String(), endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		answers <- d.Message
	}))
	mineXML, err := mine.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pa := `<?xml version="1.0" encoding="UTF-8"?><jxta:PA xmlns:jxta="http://jxta.org"><PID>` +
		nodes[0].JXTAPeerID().String() + `</PID></jxta:PA>`
	open := message.New(message.Text("JXTABIP", "reliable", "false"),
		message.Element{Namespace: "JXTABIP", Name: "reqPipe", MIME: message.XMLUTF8, Data: mineXML},
		message.Element{Namespace: "JXTABIP", Name: "remPeer", MIME: message.XMLUTF8, Data: []byte(pa)})
	if err := hostile.Send(ctx(t), endpoint.PeerAddress(nodes[1].ID(), pipe.JXTAPipeService, a.ID.String()), open); err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var resp *message.Message
	select {
	case resp = <-answers:
	case <-ctx(t).Done():
		t.Fatal("no answer to the open")
	}
	h, err := pipe.ParseJXTAHandshake(resp, "JXTABIP", "remPipe", "reliable")
	if err != nil {
		t.Fatal(err)
	}
	to := endpoint.PeerAddress(nodes[1].ID(), pipe.JXTAPipeService, h.Pipe.ID.String())
	for i := range 3 { // one queued, one waiting for room, one behind it
		if err := hostile.Send(ctx(t), to, message.New(message.Text("", "n", strconv.Itoa(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for pipe.BidiQueueLen(b) < 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the reader waits for room
	closed := make(chan error, 1)
	go func() { closed <- ep.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		sb.Close() // lets the reader, then ep.Close, go
		<-closed
		t.Fatal("endpoint.Close blocked for 10 s behind a JXTA Bidi's full queue")
	}
}

// refusalRecord is one refusal on the endpoint's back channel, as a
// receiver writes it: for service/param, no listener there.
func refusalRecord(service, param string) []byte {
	b := []byte{'R', endpoint.RefusedNoListener}
	for _, s := range []string{service, param, ""} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// TestForgedRefusalsHideNoRealOne: a hostile binder of one pipe answers
// every stream with 256 refusals for pipes that do not exist. They must
// not take the room a real refusal needs: when an honest peer refuses a
// message on pipe X and another output pipe's Flush to that peer learns
// of it, X's Flush still reports it.
func TestForgedRefusalsHideNoRealOne(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 3)
	v, p, h := nodes[0], nodes[1], nodes[2]
	sv, sp, sh := newPipes(t, v), newPipes(t, p), newPipes(t, h)
	advY := newAdv(t, adv.Unicast)
	inY, err := sh.NewInputPipe(advY)
	if err != nil {
		t.Fatal(err)
	}
	defer inY.Close()
	var round atomic.Int64
	h.Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
		r := round.Add(1)
		rec := []byte{'H', 1, 0x80, 0x80, 0x80, 0x20} // hello: version 1, 64 MiB
		for i := range 256 {
			rec = append(rec, refusalRecord(pipe.DataService, fmt.Sprintf("junk-%d-%d", r, i))...)
		}
		st.Write(rec)
		io.Copy(io.Discard, st)
		st.Close()
	})
	outY, err := sv.NewOutputPipe(ctx(t), advY, pipe.ToPeers(h.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	defer outY.Close()
	for range 17 { // 4,352 forged refusals
		if err := outY.Send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
		outY.Flush(ctx(t))
	}
	advX, advZ := newAdv(t, adv.Unicast), newAdv(t, adv.Unicast)
	inX, err := sp.NewInputPipe(advX)
	if err != nil {
		t.Fatal(err)
	}
	inZ, err := sp.NewInputPipe(advZ)
	if err != nil {
		t.Fatal(err)
	}
	defer inZ.Close()
	outX, err := sv.NewOutputPipe(ctx(t), advX, pipe.ToPeers(p.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	defer outX.Close()
	outZ, err := sv.NewOutputPipe(ctx(t), advZ, pipe.ToPeers(p.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	defer outZ.Close()
	inX.Close() // X is no longer bound at P: P refuses what comes for it
	if err := outX.Send(ctx(t), message.New(message.Text("", "n", "refused"))); err != nil {
		t.Fatalf("Send on X: %v", err)
	}
	if err := outZ.Send(ctx(t), message.New(message.Text("", "n", "z"))); err != nil {
		t.Fatal(err)
	}
	outZ.Flush(ctx(t)) // learns of X's refusal from the endpoint
	if err := outX.Flush(ctx(t)); !errors.Is(err, endpoint.ErrRefused) {
		t.Fatalf("the refused message on X: its Send returned nil and its Flush %v", err)
	}
	if n := sv.Stats().StrayRefusals; n < 4096 {
		t.Errorf("Stats.StrayRefusals %d, want the forged ones counted", n)
	}
}
