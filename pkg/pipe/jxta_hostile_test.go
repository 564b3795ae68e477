package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// A peer that was never asked sends "found, here" answers for the query
// IDs it guesses while a resolution asks only H: it never wins (with
// query IDs counted up from 1 it won 1 to 4 of every 10).
func TestJXTAUnaskedPeerCannotAnswer(t *testing.T) {
	hs, hIdent := jxtaPipes(t)
	a := seededAdv(t, "unasked-answer")
	unbind, err := hs.ListenJXTA(a, func(*pipe.Received) {})
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()
	hAddr := hs.Endpoint().JXTA().Addrs()[0]
	as, _ := jxtaPipes(t)
	aAddr := as.Endpoint().JXTA().Addrs()[0]

	zIdent, _ := jxtatcp.NewIdentity()
	z, err := jxtatcp.New(zIdent, func(*jxtatcp.Incoming) {})
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	answer := func(qid int) *message.Message {
		pr := "<?xml version=\"1.0\"?><jxta:PipeResolver xmlns:jxta=\"http://jxta.org\"><MsgType>Answer</MsgType><PipeId>" + a.ID.String() +
			"</PipeId><Type>JxtaUnicast</Type><Peer>" + zIdent.ID().String() + "</Peer><Found>true</Found></jxta:PipeResolver>"
		pr = strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(pr)
		doc := "<?xml version=\"1.0\"?><jxta:ResolverResponse xmlns:jxta=\"http://jxta.org\"><HandlerName>JxtaPipeResolver</HandlerName><QueryID>" +
			strconv.Itoa(qid) + "</QueryID><Response>" + pr + "</Response></jxta:ResolverResponse>"
		return message.New(message.Element{Namespace: "jxta", Name: "jxta-NetGroupIRes", MIME: message.XMLUTF8, Data: []byte(doc)})
	}
	const rounds = 10
	zctx, stop := context.WithCancel(context.Background())
	defer stop()
	var sent atomic.Int64
	go func() {
		for zctx.Err() == nil {
			for qid := 1; qid <= rounds+2; qid++ {
				if z.Send(zctx, aAddr, pipe.JXTAResolverService, "jxta-NetGroupIRes", answer(qid)) == nil {
					sent.Add(1)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	hijacked := 0
	for range rounds {
		p, err := as.ResolveJXTA(ctx(t), a, hAddr)
		if err != nil {
			t.Fatal(err)
		}
		if p != hIdent.ID() {
			hijacked++
		}
	}
	stop()
	t.Logf("Z sent %d answers; %d of %d resolutions among [H] resolved to Z", sent.Load(), hijacked, rounds)
	if hijacked > 0 {
		t.Fatalf("%d of %d resolutions asking only H were answered by Z, a peer never asked", hijacked, rounds)
	}
}

// hostileBidi is a JXTA peer (a real jxtatcp transport) that opens a
// reliable JxtaBiDiPipe by hand and then misbehaves.
type hostileBidi struct {
	h          *jxtatcp.Transport
	addr       string // the p2pmsg node's JXTA address
	serverPipe string
	acked      atomic.Int64 // highest cumulative ack received
	blocks     atomic.Int64 // blocks received
}

func openHostileBidi(t *testing.T, ctx context.Context, opts ...pipe.Option) (*hostileBidi, *pipe.Bidi) {
	t.Helper()
	ep, _ := jxtatest.NewEndpoint(t)
	s, err := pipe.New(ep, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, _ := adv.New(adv.Unicast, "bidi", "")
	l, err := s.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hb := &hostileBidi{addr: ep.JXTA().Addrs()[0]}
	ident, _ := jxtatcp.NewIdentity()
	resp := make(chan *message.Message, 1)
	hb.h, err = jxtatcp.New(ident, func(in *jxtatcp.Incoming) {
		if _, ok := in.Message.Get("JXTABIP", "remPipe"); ok {
			resp <- in.Message
		}
		for e := range in.Message.Namespace(jxtarel.Namespace) {
			if e.Name != "ack" {
				hb.blocks.Add(1)
			} else if cum, _, err := jxtarel.ParseAck(e.Data); err == nil && int64(cum) > hb.acked.Load() {
				hb.acked.Store(int64(cum))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.h.Close() })
	mine, _ := adv.New(adv.Unicast, "hostile", "")
	advXML, _ := mine.Marshal()
	pa := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><jxta:PA xmlns:jxta="http://jxta.org"><PID>%s</PID></jxta:PA>`, ident.ID())
	open := message.New(message.Text("JXTABIP", "reliable", "true"), message.Text("JXTABIP", "direct", "false"),
		message.Element{Namespace: "JXTABIP", Name: "reqPipe", MIME: message.XMLUTF8, Data: advXML},
		message.Element{Namespace: "JXTABIP", Name: "remPeer", MIME: message.XMLUTF8, Data: []byte(pa)})
	if err := hb.h.Send(ctx, hb.addr, pipe.JXTAPipeService, a.ID.String(), open); err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	select {
	case m := <-resp:
		e, _ := m.Get("JXTABIP", "remPipe")
		rp, err := adv.Parse(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		hb.serverPipe = rp.ID.String()
	case <-time.After(10 * time.Second):
		t.Fatal("no open response")
	}
	return hb, b
}

// block sends m, signed, as reliable block seq.
func (hb *hostileBidi) block(t *testing.T, ctx context.Context, seq int, m *message.Message) {
	t.Helper()
	inner, err := hb.h.MarshalSigned(m)
	if err != nil {
		t.Fatal(err)
	}
	blk := message.New(message.Element{Namespace: jxtarel.Namespace, Name: fmt.Sprint(seq), MIME: jxtarel.BlockMIME, Data: inner})
	if err := hb.h.Send(ctx, hb.addr, pipe.JXTAPipeService, hb.serverPipe, blk); err != nil {
		t.Fatal(err)
	}
}

// A JXTA peer that closes its BiDi pipe first without acknowledging the
// message sent to it: Close says it may not have arrived (it returned nil).
func TestJXTABidiCloseAfterRemoteCloseReportsUnacknowledged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hb, b := openHostileBidi(t, ctx)
	if err := b.Send(ctx, message.New(message.Text("app", "n", "important"))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); hb.blocks.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	hb.block(t, ctx, 1, message.New(message.Text("JXTABIP", "close", "close"))) // as JXSE closes
	if _, err := b.Receive(ctx); err == nil {
		t.Fatal("no EOF")
	}
	t0 := time.Now()
	err := b.Close()
	t.Logf("blocks the peer got %d (it acknowledged none); Close after %v: %v", hb.blocks.Load(), time.Since(t0).Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("Close returned nil: the message sent was never acknowledged")
	}
}

// A JXTA BiDi message acknowledged to the peer stays receivable when the
// Bidi ends before the queue has room for it (a Send timed out on a full
// window): it was dropped, the peer told it was delivered.
func TestJXTABidiAcknowledgedMessageKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hb, b := openHostileBidi(t, ctx, pipe.WithQueueLen(1))
	for seq := 1; seq <= 3; seq++ {
		hb.block(t, ctx, seq, message.New(message.Text("app", "n", "m"+strconv.Itoa(seq))))
	}
	for deadline := time.Now().Add(10 * time.Second); hb.acked.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	var err error
	for i := 0; i < 51 && err == nil; i++ { // the window is 50; the peer acknowledges nothing
		sctx, c := context.WithTimeout(ctx, 500*time.Millisecond)
		err = b.Send(sctx, message.New(message.Text("app", "out", strconv.Itoa(i))))
		c()
	}
	t.Logf("Send: %v", err)
	var got []string
	for {
		rctx, c := context.WithTimeout(ctx, 2*time.Second)
		m, err := b.Receive(rctx)
		c()
		if err != nil {
			t.Logf("Receive: %v", err)
			break
		}
		e, _ := m.Get("app", "n")
		got = append(got, string(e.Data))
	}
	if int(hb.acked.Load()) > len(got) {
		t.Fatalf("the peer was acknowledged %d messages, the application received %v", hb.acked.Load(), got)
	}
}

// One JXTA host sends to a pipe nobody reads over several connections:
// its frames wait in the pipe's handler for queue room and held the JXTA
// transport's whole memory budget, so another host's message to a pipe
// that is read never arrived. They hold that host's share; the other
// host's message arrives, and the first host's messages are all there
// once the application reads them: it was stalled, nothing was dropped.
func TestJXTAOneHostHoldsOnlyItsShareOfTheBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A host's share of the transport's 256 KiB: 128 KiB, two messages.
	ep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithMaxMessageSize(64<<10), jxtatcp.WithMemoryBudget(256<<10))
	s, err := pipe.New(ep, pipe.WithQueueLen(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := ep.JXTA().Addrs()[0]
	slow, read, inSlow, inRead := unreadAndReadPipes(t, s)

	newPeer := func(ident *jxtatcp.Identity, opts ...jxtatcp.Option) *jxtatcp.Transport {
		tr, err := jxtatcp.New(ident, func(*jxtatcp.Incoming) {}, append(opts, jxtatcp.WithMaxMessageSize(64<<10))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	newIdent := func() *jxtatcp.Identity {
		ident, err := jxtatcp.NewIdentity()
		if err != nil {
			t.Fatal(err)
		}
		return ident
	}
	big := message.New(message.Bytes("x", "pad", make([]byte, 62<<10)))
	hostile := newIdent()
	if err := newPeer(hostile).Send(ctx, addr, pipe.JXTAPipeService, slow.ID.String(), big); err != nil {
		t.Fatal(err) // queued
	}
	const more = 4 // two wait in the handler, two for the budget
	var sends sync.WaitGroup
	errs := make(chan error, more)
	for range more {
		c := newPeer(hostile)
		sends.Go(func() { errs <- c.Send(ctx, addr, pipe.JXTAPipeService, slow.ID.String(), big) })
	}
	sends.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}} // another host
	honest := newPeer(newIdent(), jxtatcp.WithDialer(d.DialContext))
	if err := honest.Send(ctx, addr, pipe.JXTAPipeService, read.ID.String(), message.New(message.Bytes("x", "hello", make([]byte, 16<<10)))); err != nil {
		t.Fatal(err)
	}
	short, c := context.WithTimeout(ctx, 30*time.Second)
	defer c()
	if _, err := inRead.Receive(short); err != nil {
		t.Fatalf("another host's message to a pipe that is read did not arrive in 30 s (%v): one host holds the JXTA transport's whole budget (%+v)", err, ep.JXTA().Stats())
	}
	for i := range 1 + more {
		if _, err := inSlow.Receive(ctx); err != nil {
			t.Fatalf("the stalled host's message %d of %d: %v", i+1, 1+more, err)
		}
	}
}

// A JXTA peer's messages count their bytes in a pipe's queue: they
// counted none, so the queue's byte bound never held them back (ten 1 MiB
// messages queued under a 1 MiB bound; with the defaults, 64 of 64 MiB).
func TestJXTAMessagesCountTheirBytesInTheQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, _ := jxtatest.NewEndpoint(t)
	s, err := pipe.New(ep, pipe.WithQueueBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := adv.New(adv.Unicast, "unread", "")
	in, err := s.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	// The sender's kernel may hold all it sends unsent (no
	// WithUnsentLimit): its Sends return while the receiver stalls.
	tr, err := jxtatcp.New(ident, func(*jxtatcp.Incoming) {}, jxtatcp.WithUnsentLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const sent = 3
	for range sent {
		// Sends return once written: the socket buffers take what the
		// stalled reader does not.
		if err := tr.Send(ctx, ep.JXTA().Addrs()[0], pipe.JXTAPipeService, a.ID.String(), message.New(message.Bytes("x", "pad", make([]byte, 1<<20)))); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ep.JXTA().Stats().Received < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%+v after 30 s, want 2 received", ep.JXTA().Stats())
		}
	}
	time.Sleep(200 * time.Millisecond) // room for more, were they let in
	if n, got := pipe.QueueLen(in), ep.JXTA().Stats().Received; n != 1 || got != 2 {
		t.Fatalf("%d of 1 MiB queued under a 1 MiB bound, %d received; want 1 queued and the second waiting", n, got)
	}
	for i := range sent {
		if _, err := in.Receive(ctx); err != nil {
			t.Fatalf("message %d of %d: %v", i+1, sent, err)
		}
	}
}

// A JXTA host sends to a pipe nobody reads, whose queue has room for all
// it sends: its queued messages are held against the host's share of the
// JXTA transport's memory budget, as a libp2p peer's are against its
// endpoint budget. They were held by nothing once queued (all 20 queued,
// and with as many pipes as it likes, as much as their queues take); now
// the host stalls once its queued messages fill its share (256 KiB here),
// another host's message still arrives, and all of the first host's
// messages are there once the pipe is read.
func TestJXTAQueuedMessagesHoldTheirHostsShare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const share = 256 << 10 // a quarter of the 1 MiB budget
	ep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithMaxMessageSize(64<<10), jxtatcp.WithMemoryBudget(4*share))
	s, err := pipe.New(ep, pipe.WithQueueLen(64), pipe.WithQueueBytes(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	unread, read, inUnread, inRead := unreadAndReadPipes(t, s)
	addr := ep.JXTA().Addrs()[0]
	peerFrom := func(ip string) *jxtatcp.Transport {
		ident, err := jxtatcp.NewIdentity()
		if err != nil {
			t.Fatal(err)
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		tr, err := jxtatcp.New(ident, func(*jxtatcp.Incoming) {}, jxtatcp.WithMaxMessageSize(64<<10), jxtatcp.WithDialer(d.DialContext))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}

	const sent, size = 20, 30 << 10
	hostile := peerFrom("127.0.0.2")
	sendErr := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < sent && err == nil; i++ {
			err = hostile.Send(ctx, addr, pipe.JXTAPipeService, unread.ID.String(), message.New(message.Bytes("x", "pad", make([]byte, size))))
		}
		sendErr <- err
	}()
	jx := ep.JXTA()
	for deadline := time.Now().Add(30 * time.Second); jx.Stats().BudgetWaits == 0 && jx.Stats().Received < sent; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%+v after 30 s: neither all received nor one waiting", jx.Stats())
		}
	}
	n := pipe.QueueLen(inUnread)
	t.Logf("%d queued", n)
	if n*size > share {
		t.Fatalf("%d messages of %d KiB queued from one host, over its %d KiB share (%+v)", n, size>>10, share>>10, jx.Stats())
	}

	if err := peerFrom("127.0.0.3").Send(ctx, addr, pipe.JXTAPipeService, read.ID.String(), message.New(message.Text("x", "n", "hello"))); err != nil {
		t.Fatal(err)
	}
	short, c := context.WithTimeout(ctx, 30*time.Second)
	defer c()
	if _, err := inRead.Receive(short); err != nil {
		t.Fatalf("another host's message did not arrive in 30 s (%v): %+v", err, jx.Stats())
	}
	for i := range sent {
		if _, err := inUnread.Receive(ctx); err != nil {
			t.Fatalf("the stalled host's message %d of %d: %v", i+1, sent, err)
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
}

// unreadAndReadPipes binds two unicast input pipes on s, one the test
// leaves unread and one it reads, closed when the test ends.
func unreadAndReadPipes(t *testing.T, s *pipe.Service) (unread, read *adv.PipeAdvertisement, inUnread, inRead *pipe.InputPipe) {
	t.Helper()
	unread, _ = adv.New(adv.Unicast, "not-read-now", "")
	read, _ = adv.New(adv.Unicast, "read", "")
	var err error
	if inUnread, err = s.NewInputPipe(unread); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inUnread.Close() })
	if inRead, err = s.NewInputPipe(read); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inRead.Close() })
	return unread, read, inUnread, inRead
}

// A JXTA peer that closes its reliable BiDi pipe with a plain close
// message (JXSE sends its close as the next reliable block): Receive
// returns every message that came before it, in order, then io.EOF; if
// a block was missing, with a later one held, it fails with
// jxtarel.ErrIncomplete instead, not io.EOF, which would pass the part
// for the whole and drop the held message in silence (the first row
// passed before too).
func TestJXTABidiPlainClose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocks  []int // sent as messages "m1", "m2", …
		want    []string
		wantErr error
	}{
		{"in order", []int{1, 2, 3}, []string{"m1", "m2", "m3"}, io.EOF},
		{"block missing", []int{1, 3}, []string{"m1"}, jxtarel.ErrIncomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			hb, b := openHostileBidi(t, ctx, pipe.WithQueueLen(1))
			for _, seq := range tc.blocks {
				hb.block(t, ctx, seq, message.New(message.Text("app", "n", "m"+strconv.Itoa(seq))))
			}
			// The close comes after the blocks, on the same connection.
			if err := hb.h.Send(ctx, hb.addr, pipe.JXTAPipeService, hb.serverPipe, message.New(message.Text("JXTABIP", "close", "close"))); err != nil {
				t.Fatal(err)
			}
			var got []string
			var err error
			for {
				rctx, c := context.WithTimeout(ctx, 20*time.Second)
				var m *message.Message
				m, err = b.Receive(rctx)
				c()
				if err != nil {
					break
				}
				e, _ := m.Get("app", "n")
				got = append(got, string(e.Data))
			}
			t.Logf("received %v, then %v", got, err)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || !errors.Is(err, tc.wantErr) {
				t.Fatalf("received %v, then %v; want %v, then %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
