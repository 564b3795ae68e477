package endpoint_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// TestUnfinishedFramesBoundedByBudget is issue 21's row 1 at a quarter of
// the default scale: a peer opens the most streams it may, sends on each a
// maximum-size frame but its last byte, and stops. Unfinished frames count
// against the per-peer budget (twice the maximum message by default), so
// the receiver holds about two of them, not eight; the rest wait, unread,
// in the flow-control windows.
//
// With P2PMSG_DEFAULT_SCALE=1 it runs at the default limits (64 MiB
// messages), as the attack did: about a gigabyte of traffic.
func TestUnfinishedFramesBoundedByBudget(t *testing.T) {
	maxMsg := 16 << 20
	var opts []endpoint.Option
	if os.Getenv("P2PMSG_DEFAULT_SCALE") == "1" {
		maxMsg = wire.DefaultMaxMessageSize
	} else {
		opts = append(opts, endpoint.WithMaxMessageSize(int64(maxMsg)))
	}
	nodes := testutil.NewConnectedNodes(t, 2)
	b, err := endpoint.New(nodes[1], opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ch, l := collector(1)
	b.Register("x", "", l)
	frame := testutil.EndpointFrame(t, "x", "", message.New(message.Bytes("", "b", make([]byte, maxMsg-64))))
	if len(frame) > maxMsg+16 {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	before := testutil.LiveHeap()
	var wg sync.WaitGroup
	var streams []network.Stream
	done := make(chan struct{}, 8)
	for range 8 {
		st, err := nodes[0].Host().NewStream(ctx(t), nodes[1].ID(), endpoint.ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.Write(frame[:len(frame)-1])
			done <- struct{}{}
		}()
	}
	defer func() {
		for _, st := range streams {
			st.Reset()
		}
		wg.Wait()
	}()
	// Wait for the first two frames to be all but complete at the
	// receiver, then watch the heap while the others do what they can.
	for range 2 {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("no frame got through within a minute")
		}
	}
	var peak int64
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, testutil.LiveHeap()-before)
	}
	// The bound: the default per-peer budget, plus 32 MiB of flow-control
	// windows, plus the attacker's own frame, which lives in this process.
	bound := int64(2*maxMsg + 1<<20 + 32<<20 + len(frame))
	t.Logf("receiver heap grew by at most %d MiB (bound %d MiB)", peak>>20, bound>>20)
	if peak > bound {
		t.Fatalf("heap grew by %d MiB, over the budget's bound of %d MiB", peak>>20, bound>>20)
	}
	select {
	case <-ch:
		t.Fatal("an unfinished frame was delivered")
	default:
	}
}

// TestStalledFrameTimesOut: a frame that stops arriving is reset once the
// frame timeout passes, counted, and its budget freed for the next stream.
func TestStalledFrameTimesOut(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1], endpoint.WithFrameTimeout(300*time.Millisecond),
		endpoint.WithMaxMessageSize(1<<20), endpoint.WithMemoryBudget(1<<20+4096, 1<<20+4096))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ch, l := collector(1)
	b.Register("x", "", l)
	frame := testutil.EndpointFrame(t, "x", "", message.New(message.Bytes("", "b", make([]byte, 1<<20-256))))
	st, err := nodes[0].Host().NewStream(ctx(t), nodes[1].ID(), endpoint.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	if _, err := st.Write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}
	// The reset reaches the attacker: its reads of the back channel fail.
	readErr := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, st); readErr <- err }()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("the stalled stream was closed, not reset")
		}
	case <-time.After(time.Minute):
		t.Fatal("the stalled frame was not reset within a minute")
	}
	if s := b.Stats(); s.FramesTimedOut != 1 || s.MalformedFrames != 0 {
		t.Fatalf("stats %+v, want one frame timed out and none malformed", s)
	}
	// The budget held by the stalled frame is free again: a full-size
	// message gets through.
	to := endpoint.PeerAddress(nodes[1].ID(), "x", "")
	if err := a.Send(ctx(t), to, message.New(message.Bytes("", "b", make([]byte, 1<<20-256)))); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
}

// TestBudgetBackpressureLosesNothing: a listener that keeps messages
// (Hold) fills its sender's budget; the receiver then stops reading and the
// sender stalls, and once the listener lets go everything arrives, in
// order.
func TestBudgetBackpressureLosesNothing(t *testing.T) {
	const budget, size, count = 640 << 10, 100 << 10, 40
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1], endpoint.WithMaxMessageSize(256<<10), endpoint.WithMemoryBudget(budget, budget))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var mu sync.Mutex
	var held, peak int64
	var releases []func()
	var got []string
	letGo := false
	b.Register("x", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		e, _ := d.Message.Get("", "i")
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(e.Data))
		if letGo {
			return
		}
		n := d.Size()
		d.Hold()
		held += n
		peak = max(peak, held)
		releases = append(releases, func() { d.Unhold(); d.Unhold(); held -= n })
	}))
	to := endpoint.PeerAddress(nodes[1].ID(), "x", "")
	sent := make(chan error, 1)
	go func() {
		for i := range count {
			m := message.New(message.Text("", "i", fmt.Sprint(i)), message.Bytes("", "pad", make([]byte, size)))
			if err := a.Send(ctx(t), to, m); err != nil {
				sent <- err
				return
			}
		}
		sent <- a.Flush(ctx(t), nodes[1].ID())
	}()
	for b.Stats().BudgetWaits == 0 {
		select {
		case err := <-sent:
			t.Fatalf("all sent without the budget filling: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	if peak > budget {
		t.Errorf("listener held %d bytes, over the %d-byte budget", peak, budget)
	}
	letGo = true
	for _, r := range releases {
		r()
	}
	mu.Unlock()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != count {
		t.Fatalf("%d of %d messages delivered", len(got), count)
	}
	for i, s := range got {
		if s != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %s", i, s)
		}
	}
}

// TestTooLargeFailsAtSender is issue 21's row 10: a message over the
// receiver's limit fails at the sender with an error naming the limit,
// and the stream stays usable.
func TestTooLargeFailsAtSender(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1], endpoint.WithMaxMessageSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ch, l := collector(1)
	b.Register("x", "", l)
	to := endpoint.PeerAddress(nodes[1].ID(), "x", "")
	err = a.Send(ctx(t), to, message.New(message.Bytes("", "big", make([]byte, 2<<20))))
	var le *endpoint.LimitError
	if !errors.As(err, &le) || !errors.Is(err, endpoint.ErrTooLarge) || le.Limit != 1<<20 || le.Size <= 2<<20 || le.Peer != nodes[1].ID() {
		t.Fatalf("Send of 2 MiB to a 1 MiB receiver: %v", err)
	}
	t.Logf("%v", err)
	if err := a.Send(ctx(t), to, message.New(message.Text("", "t", "small"))); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatal(err)
	}
	if e, _ := recv(t, ch).Message.Get("", "t"); string(e.Data) != "small" {
		t.Fatalf("got %q", e.Data)
	}
}

// TestRefusalsReachTheSender: messages nobody takes are reported to their
// sender, by Flush and by the next Send to the same destination.
func TestRefusalsReachTheSender(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	peerB := nodes[1].ID()
	nobody := endpoint.PeerAddress(peerB, "nobody", "p")
	// A refusal may come back before a later Send, which then reports it
	// and sends nothing: what the Sends and Flush report together is
	// every message sent, each once.
	var re *endpoint.RefusedError
	sent, reported := 0, 0
	for sent < 3 {
		switch err := a.Send(ctx(t), nobody, message.New()); {
		case err == nil:
			sent++
		case errors.As(err, &re) && re.Code == endpoint.RefusedNoListener && re.Service == "nobody":
			reported += re.Count
		default:
			t.Fatal(err)
		}
	}
	err := a.Flush(ctx(t), peerB)
	if !errors.As(err, &re) || !errors.Is(err, endpoint.ErrRefused) || re.Count != sent-reported || re.Code != endpoint.RefusedNoListener ||
		re.Service != "nobody" || re.Param != "p" || re.Peer != peerB {
		t.Fatalf("Flush after 3 messages to no listener, %d refusals reported by Send: %v", reported, err)
	}
	if err := a.Flush(ctx(t), peerB); err != nil {
		t.Fatalf("refusals reported twice: %v", err)
	}

	n := 0
	b.Register("picky", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		n++
		d.Refuse("queue full")
	}))
	picky := endpoint.PeerAddress(peerB, "picky", "")
	if err := a.Send(ctx(t), picky, message.New()); err != nil {
		t.Fatal(err)
	}
	for a.Stats().RefusalsReceived != 4 {
		time.Sleep(5 * time.Millisecond)
	}
	err = a.Send(ctx(t), picky, message.New())
	if !errors.As(err, &re) || re.Count != 1 || re.Code != endpoint.RefusedByListener || re.Reason != "queue full" {
		t.Fatalf("Send after a refusal: %v", err)
	}
	if err := a.Flush(ctx(t), peerB); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); n != 1 || s.RefusalsSent != 4 || s.NoListener != 3 {
		t.Fatalf("listener ran %d times (want 1: the refused Send sends nothing), stats %+v", n, s)
	}
}

// TestRefusalsCostNoMoreThanFrames: a sender names a destination no
// listener has, with the longest service and param, and then sends
// frames of the smallest message that repeat it without naming it (2 +
// 9 bytes each). Each is refused, and the sender told, but the receiver
// must not write each refusal back at length (2 KiB for an 11-byte
// frame): its answers take no more bytes than the frames, and every
// refusal is in them.
func TestRefusalsCostNoMoreThanFrames(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	b := newService(t, nodes[1])
	st, err := nodes[0].Host().NewStream(ctx(t), nodes[1].ID(), endpoint.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	const frames = 20000
	svc, param := strings.Repeat("s", endpoint.MaxNameLen), strings.Repeat("p", endpoint.MaxNameLen)
	w := testutil.EndpointFrame(t, svc, param, message.New())
	empty, err := wire.Append(nil, message.New())
	if err != nil {
		t.Fatal(err)
	}
	repeat := append([]byte{0, byte(len(empty))}, empty...)
	for range frames - 1 {
		w = append(w, repeat...)
	}
	go func() { st.Write(w); st.CloseWrite() }()
	// Read the answers as a sender of another implementation would.
	answers, err := io.ReadAll(st)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(bytes.NewReader(answers))
	str := func() {
		l, _ := binary.ReadUvarint(r)
		r.Discard(int(l))
	}
	refusals := 0
	for {
		k, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		switch k {
		case 'H':
			binary.ReadUvarint(r)
			binary.ReadUvarint(r)
		case 'R':
			r.ReadByte()
			str()
			str()
			str()
			refusals++
		case 'S':
			refusals++
		default:
			t.Fatalf("record %q", k)
		}
	}
	sent := b.Stats().RefusalsSent
	t.Logf("%d frames in %d bytes: %d refusals answered in %d bytes (%d counted sent)", frames, len(w), refusals, len(answers), sent)
	if refusals != frames || sent != frames {
		t.Fatalf("%d refusals answered, %d counted, for %d frames refused", refusals, sent, frames)
	}
	if len(answers) > len(w) {
		t.Fatalf("%d bytes of frames answered with %d bytes", len(w), len(answers))
	}
}

// TestHostileBackChannel: a receiver that answers with garbage costs the
// sender an error, not a panic or a hang.
func TestHostileBackChannel(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	answers := [][]byte{
		{'H', 1},                      // truncated hello
		{'R', 1, 0, 0, 0},             // a refusal before the hello
		{'H', 1, 0x80, 0x80, 0x80, 1}, // a hello, then
		append([]byte{'H', 1, 10, 'R', 1}, binary.AppendUvarint(nil, 1<<40)...), // a lying length
		{'H', 1, 10, 'Z'}, // an unknown record
		{'H', 1, 10, 'S'}, // "the previous refusal again" before any
	}
	for i, ans := range answers {
		nodes[1].Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
			st.Write(ans)
			io.Copy(io.Discard, st)
			st.Close()
		})
		to := endpoint.PeerAddress(nodes[1].ID(), "x", "")
		// The lie can reach the sender before its message has gone, in
		// which case the Send fails; otherwise the Flush does.
		if err := a.Send(ctx(t), to, message.New(message.Bytes("", "b", bytes.Repeat([]byte{1}, 100)))); err != nil {
			t.Logf("answer %d: Send: %v", i, err)
			continue
		}
		if err := a.Flush(ctx(t), nodes[1].ID()); err == nil && i != 2 {
			t.Errorf("answer %d: Flush succeeded", i)
		} else {
			t.Logf("answer %d: %v", i, err)
		}
	}
	nodes[1].Host().RemoveStreamHandler(endpoint.ProtocolID)
}

// TestReleaseEndsTheCharge: a listener that calls Release twice misuses
// the API, but must not leave its sender's bytes charged for good (small
// messages are recycled whole, and a second Release recycled one the
// reader was still to discharge); and a held message released ends its
// hold, since it can no longer be used.
func TestReleaseEndsTheCharge(t *testing.T) {
	for _, tc := range []struct {
		name string
		// listener delivers to got, for n messages.
		listener func(t *testing.T, got *sync.WaitGroup) endpoint.Listener
	}{
		{"Release twice in the listener", func(_ *testing.T, got *sync.WaitGroup) endpoint.Listener {
			return endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
				d.Release()
				d.Release()
				got.Done()
			})
		}},
		{"Release a held message", func(t *testing.T, got *sync.WaitGroup) endpoint.Listener {
			held := make(chan *endpoint.Delivery, 16)
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case d := <-held:
						d.Release() // no Unhold
						got.Done()
					case <-done:
						return
					}
				}
			})
			t.Cleanup(func() { close(done); wg.Wait() })
			return endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
				d.Hold()
				held <- d
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			a := newService(t, nodes[0])
			// Room for about 80 of the messages below.
			b, err := endpoint.New(nodes[1], endpoint.WithMaxMessageSize(16<<10), endpoint.WithMemoryBudget(40<<10, 40<<10))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			const n = 1000
			var got sync.WaitGroup
			got.Add(n)
			b.Register("x", "", tc.listener(t, &got))
			to := endpoint.PeerAddress(nodes[1].ID(), "x", "")
			for i := range n {
				if err := a.Send(ctx(t), to, message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
				t.Fatalf("flushing %d messages: %v", n, err)
			}
			got.Wait()
		})
	}
}

// Peers that trickle just over 1 KiB per frame timeout into maximum-size
// frames hold their charges while an honest peer's frame waits for the
// service's budget: the slow frames are shed (reset, counted), and the
// honest message arrives. Before, it waited as long as they trickled
// (a 64 MiB frame at that pace: days).
func TestSlowFramesShed(t *testing.T) {
	const maxMsg = 1 << 20
	nodes := testutil.NewConnectedNodes(t, 4)
	perPeer := int64(2*maxMsg + 4096)
	victim, err := endpoint.New(nodes[0], endpoint.WithMaxMessageSize(maxMsg),
		endpoint.WithMemoryBudget(perPeer, 2*perPeer), endpoint.WithFrameTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Close() })
	ch, l := collector(16)
	victim.Register("x", "", l)
	frame := testutil.EndpointFrame(t, "x", "", message.New(message.Bytes("", "b", make([]byte, maxMsg-256))))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for _, attacker := range nodes[1:3] {
		for range 2 { // two frames each: both peers' budgets, and the service's
			st, err := attacker.Host().NewStream(ctx(t), nodes[0].ID(), endpoint.ProtocolID)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer st.Reset()
				const step = 1100 // over minProgress every 200 ms, ten times what the frame timeout asks
				st.Write(frame[:4096])
				for off := 4096; off+step < len(frame); off += step {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := st.Write(frame[off : off+step]); err != nil {
						return
					}
				}
			}()
		}
	}
	time.Sleep(5 * time.Second) // over two frame timeouts: nothing waits, nothing is shed
	if s := victim.Stats(); s.FramesShed != 0 || s.FramesTimedOut != 0 {
		t.Fatalf("frames cut while nothing waited: %+v", s)
	}
	honest := newService(t, nodes[3])
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := honest.Send(sctx, endpoint.PeerAddress(nodes[0].ID(), "x", ""), message.New(message.Bytes("", "b", make([]byte, 64<<10)))); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		d.Release()
	case <-sctx.Done():
		t.Fatalf("an honest peer's message waited 20 s behind peers trickling into full-size frames: %+v", victim.Stats())
	}
	if s := victim.Stats(); s.FramesShed == 0 {
		t.Fatalf("delivered, but no frame was shed: %+v", s)
	}
}

// A frame is shed only for a wait it causes: a peer waiting for its own
// budget (its messages held by the application) does not cut another
// peer's slow frame.
func TestSlowFrameNotShedForAnotherPeersWait(t *testing.T) {
	const maxMsg = 1 << 20
	nodes := testutil.NewConnectedNodes(t, 3)
	perPeer := int64(2*maxMsg + 4096)
	victim, err := endpoint.New(nodes[0], endpoint.WithMaxMessageSize(maxMsg),
		endpoint.WithMemoryBudget(perPeer, 8*perPeer), endpoint.WithFrameTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Close() })
	var mu sync.Mutex
	var held []func()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, release := range held {
			release()
		}
	}()
	victim.Register("x", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		d.Hold() // an application that keeps what it gets
		mu.Lock()
		held = append(held, d.Unhold)
		mu.Unlock()
	}))
	frame := testutil.EndpointFrame(t, "x", "", message.New(message.Bytes("", "b", make([]byte, maxMsg-256))))
	st, err := nodes[1].Host().NewStream(ctx(t), nodes[0].ID(), endpoint.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	defer func() { close(stop); <-done; st.Reset() }()
	go func() { // slow, as a slow link is
		defer close(done)
		st.Write(frame[:4096])
		for off := 4096; off+1100 < len(frame); off += 1100 {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			if _, err := st.Write(frame[off : off+1100]); err != nil {
				return
			}
		}
	}()
	other := newService(t, nodes[2])
	for range 3 { // the third waits for its peer's budget
		sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		other.Send(sctx, endpoint.PeerAddress(nodes[0].ID(), "x", ""), message.New(message.Bytes("", "b", make([]byte, maxMsg-256))))
		cancel()
	}
	time.Sleep(4 * time.Second)
	if s := victim.Stats(); s.BudgetWaits == 0 || s.FramesShed != 0 {
		t.Fatalf("want a wait and no frame shed: %+v", s)
	}
}
