package pipe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestJXTAQueryFlood: a JXTA peer's binding queries that name another
// peer as the querier are refused, not answered to that peer; and a peer
// that floods queries for a pipe bound here while it reads nothing holds
// at most maxJXTAAnswersPerHost answers (a goroutine each) in flight,
// the other queries dropped and counted; a querier on another host is
// still answered (the flooder's host held all maxJXTAAnswers before).
func TestJXTAQueryFlood(t *testing.T) {
	ctx, s, ep, a := unsignedJXTAPipes(t, "flooded")
	marks := make(chan struct{}, 2)
	unbind, err := s.ListenJXTA(a, func(*Received) { marks <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()

	// The flooder stops reading once it has a message: its handler
	// blocks its connection's reader until the test ends.
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	fl, err := jxtatcp.New(ident, func(*jxtatcp.Incoming) { <-block }, jxtatcp.WithUnsigned())
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	defer close(block) // first: our answers drain before the rest closes
	addr := ep.JXTA().Addrs()[0]
	send := func(service, param string, m *message.Message) {
		t.Helper()
		if err := fl.Send(ctx, addr, service, param, m); err != nil {
			t.Fatal(err)
		}
	}
	// mark waits until every message sent before it was handled: the
	// transport hands a connection's messages over in order.
	mark := func() {
		t.Helper()
		send("PipeService", a.ID.String(), message.New(message.Text("flood", "mark", "")))
		select {
		case <-marks:
		case <-ctx.Done():
			t.Fatal("mark not received")
		}
	}

	other, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	send(JXTAResolverService, jxtaQueryParam, (&jxtaResolver{self: other.ID()}).queryMessage(1, a))
	mark()
	if got := s.Stats().JXTARefused; got != 1 {
		t.Fatalf("a query naming another querier: %d refused, want 1", got)
	}

	base := runtime.NumGoroutine()
	// Enough answers to fill both sides' socket buffers many times over.
	const n = 6000
	q := (&jxtaResolver{self: ident.ID()}).queryMessage(2, a)
	for range n {
		send(JXTAResolverService, jxtaQueryParam, q)
	}
	mark()
	extra := runtime.NumGoroutine() - base
	refused := s.Stats().JXTARefused - 1
	if extra > maxJXTAAnswersPerHost+32 {
		t.Fatalf("%d goroutines more after %d queries not read: answers in flight not bounded", extra, n)
	}
	if refused == 0 {
		t.Fatalf("no query refused: the flood never filled the answers in flight (%d goroutines more)", extra)
	}
	t.Logf("%d queries: %d refused, %d goroutines more", n, refused, extra)

	// A querier on another host, whose answers are read.
	hi, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan struct{}, 1)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	honest, err := jxtatcp.New(hi, func(in *jxtatcp.Incoming) {
		if in.Service == JXTAResolverService && in.Param == jxtaResponseParam {
			select {
			case answered <- struct{}{}:
			default:
			}
		}
	}, jxtatcp.WithUnsigned(), jxtatcp.WithDialer(d.DialContext))
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	before := s.Stats().JXTARefused
	if err := honest.Send(ctx, addr, JXTAResolverService, jxtaQueryParam, (&jxtaResolver{self: hi.ID()}).queryMessage(3, a)); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 20*time.Second) // the flooder's answers wait 30 s
	defer cancel()
	select {
	case <-answered:
	case <-wait.Done():
		t.Fatalf("another host's query was not answered while the flooder's answers wait (%d more refused)", s.Stats().JXTARefused-before)
	}
}

// TestJXTAOpenFlood: a JXTA peer that opens JxtaBiDiPipes to a listener
// faster than Accept takes them costs at most the listener's backlog of
// connections being set up or queued; the other opens are refused and
// counted, and a later Accept still gets a queued one.
func TestJXTAOpenFlood(t *testing.T) {
	ctx, s, l, open := jxtaOpener(t, "open-flood")
	const n = 200
	for range n {
		open(nil) // a new client pipe each time
	}
	backlog := uint64(s.opts.backlog)
	for s.Stats().JXTARefused < n-backlog && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.Stats().JXTARefused; got != n-backlog {
		t.Fatalf("%d opens refused, want %d (a backlog of %d)", got, n-backlog, backlog)
	}
	s.mu.Lock()
	set := len(s.jxtaBidis)
	s.mu.Unlock()
	if set > int(backlog) {
		t.Fatalf("%d JxtaBiDiPipes set up for a backlog of %d", set, backlog)
	}
	b, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// unsignedJXTAPipes is a pipe service on a JXTA peer that takes unsigned
// messages (so a flooding peer costs no signatures), a unicast pipe
// advertisement named name, and a ctx for the test.
func unsignedJXTAPipes(t *testing.T, name string) (context.Context, *Service, *endpoint.Service, *adv.PipeAdvertisement) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithUnsigned(), jxtatcp.WithAcceptUnsigned())
	s, err := New(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := adv.New(adv.Unicast, name, "")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, s, ep, a
}

// JXTA BiDi pipes whose peer hung up before Accept reached them are
// skipped by Accept and torn down: before, each kept its reliable layer
// (3 goroutines), its pipe and its table entries until the service
// closed.
func TestJXTASkippedBidisTornDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep, _ := jxtatest.NewEndpoint(t)
	s, err := New(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := adv.New(adv.Unicast, "bidi-leak", "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := ep.JXTA().Addrs()[0]

	runtime.GC()
	base := runtime.NumGoroutine()
	const opens = 10
	for i := range opens {
		ident, err := jxtatcp.NewIdentity()
		if err != nil {
			t.Fatal(err)
		}
		h, err := jxtatcp.New(ident, func(*jxtatcp.Incoming) {})
		if err != nil {
			t.Fatal(err)
		}
		me, _ := adv.New(adv.Unicast, "hostile", "")
		advXML, _ := me.Marshal()
		pa := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><jxta:PA xmlns:jxta="http://jxta.org"><PID>%s</PID></jxta:PA>`, ident.ID())
		req := message.New(message.Text(bidiNS, bidiReliable, "true"), message.Text(bidiNS, bidiDirect, "false"),
			message.Element{Namespace: bidiNS, Name: bidiReqPipe, MIME: message.XMLUTF8, Data: advXML},
			message.Element{Namespace: bidiNS, Name: bidiRemPeer, MIME: message.XMLUTF8, Data: []byte(pa)})
		if err := h.Send(ctx, addr, JXTAPipeService, a.ID.String(), req); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(l.accept) < 1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		h.Close()
		time.Sleep(100 * time.Millisecond)
		short, c := context.WithTimeout(ctx, 500*time.Millisecond)
		b, err := l.Accept(short)
		c()
		if err == nil {
			t.Fatalf("open %d: Accept returned a Bidi whose peer is gone: %v", i, b)
		}
	}
	time.Sleep(500 * time.Millisecond)
	s.mu.Lock()
	bidis, opensKept, pipes := len(s.jxtaBidis), len(s.jxtaOpens), len(s.jxtaPipes)
	s.mu.Unlock()
	grown := runtime.NumGoroutine() - base
	t.Logf("after %d opens whose peer hung up, all skipped by Accept: %d Bidis, %d opens, %d JXTA pipes bound, %d more goroutines",
		opens, bidis, opensKept, pipes, grown)
	if bidis > 0 || opensKept > 0 || pipes > 1 || grown > 4 {
		t.Fatalf("skipped JXTA Bidis were not torn down: %d Bidis, %d opens, %d pipes bound, +%d goroutines", bidis, opensKept, pipes, grown)
	}
}

// TestJXTAQueryFloodFromFourHosts: peers on four hosts stop reading and
// flood binding queries. Their answers in flight do not take every slot:
// the last quarter is kept for hosts with none in flight, so a querier on
// a fifth host is answered (four such hosts held all 32 before).
//
// Each flooder queries until a hundred of its queries in a row are
// refused: its answers then wait, unread, in its slots (8 for each of the
// first three hosts, one for the fourth). They wait 30 s at most: under
// load, 6,000 queries from each host took 40-70 s and the first hosts'
// slots were free again when the fifth host asked, which it then was
// whether or not any were kept for it. A round in which the flooders no
// longer held three quarters of the slots when the fifth host's query
// was handled proves nothing either way, and is flooded again.
func TestJXTAQueryFloodFromFourHosts(t *testing.T) {
	ctx, s, ep, a := unsignedJXTAPipes(t, "flooded-by-four")
	marks := make(chan struct{}, 1)
	unbind, err := s.ListenJXTA(a, func(*Received) { marks <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()
	addr := ep.JXTA().Addrs()[0]
	block := make(chan struct{})
	defer close(block) // first: our answers drain before the rest closes
	peerOn := func(ip string, handle func(*jxtatcp.Incoming)) (*jxtatcp.Transport, *jxtatcp.Identity) {
		t.Helper()
		ident, err := jxtatcp.NewIdentity()
		if err != nil {
			t.Fatal(err)
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		tr, err := jxtatcp.New(ident, handle, jxtatcp.WithUnsigned(), jxtatcp.WithDialer(d.DialContext))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr, ident
	}
	// marked sends a mark after what tr sent: every message before it was
	// handled once it is (the transport hands a connection's messages
	// over in order).
	marked := func(tr *jxtatcp.Transport) {
		t.Helper()
		if err := tr.Send(ctx, addr, "PipeService", a.ID.String(), message.New(message.Text("flood", "mark", ""))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-marks:
		case <-ctx.Done():
			t.Fatal("mark not received")
		}
	}
	// flooders is how many slots the four flooding hosts hold.
	flooders := func() (n int) {
		s.jxta.mu.Lock()
		defer s.jxta.mu.Unlock()
		for h := range 4 {
			n += s.jxta.hostAnswers[netip.MustParsePrefix(fmt.Sprintf("127.0.0.%d/32", 2+h))]
		}
		return n
	}
	for round := 0; ; round++ {
		queries := 0
		for h := range 4 {
			fl, ident := peerOn(fmt.Sprintf("127.0.0.%d", 2+h), func(*jxtatcp.Incoming) { <-block })
			q := (&jxtaResolver{self: ident.ID()}).queryMessage(int32(10*round+h+10), a)
			for batch, refused := 0, uint64(0); batch == 0 || s.Stats().JXTARefused-refused < 100; batch++ {
				refused = s.Stats().JXTARefused
				for range 100 {
					if err := fl.Send(ctx, addr, JXTAResolverService, jxtaQueryParam, q); err != nil {
						t.Fatal(err)
					}
				}
				queries += 100
				marked(fl)
			}
		}
		answered := make(chan struct{}, 1)
		honest, hi := peerOn("127.0.0.6", func(in *jxtatcp.Incoming) {
			if in.Service == JXTAResolverService && in.Param == jxtaResponseParam {
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		})
		before := s.Stats().JXTARefused
		if err := honest.Send(ctx, addr, JXTAResolverService, jxtaQueryParam, (&jxtaResolver{self: hi.ID()}).queryMessage(3, a)); err != nil {
			t.Fatal(err)
		}
		marked(honest)
		// The flood is over: the flooders' slots only come free from now
		// on, and held as many when the query was handled.
		held := flooders()
		if refused := s.Stats().JXTARefused - before; refused > 0 {
			t.Fatalf("a fifth host's query was refused while four hosts held %d of the %d slots", held, maxJXTAAnswers)
		}
		select {
		case <-answered:
		case <-ctx.Done():
			t.Fatal("a fifth host's query, given a slot, was not answered")
		}
		t.Logf("round %d: %d queries from four hosts; they held %d slots when a fifth host's query was answered", round, queries, held)
		if held >= maxJXTAAnswers-maxJXTAAnswersPerHost {
			return
		}
		for flooders() > 0 { // the next round once these answers have ended (30 s at most)
			select {
			case <-ctx.Done():
				t.Fatalf("the flooders' answers did not end (%d slots held)", flooders())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// TestJXTAAnswerRoutesToPublicAddress: a node behind NAT or a port
// forward (jxtatcp.WithPublicAddress) gives a JXTA querier that address
// first in its answer's route, then its listener's; the answer carried
// only the listeners' addresses, private ones a JXSE peer elsewhere
// cannot reach.
func TestJXTAAnswerRoutesToPublicAddress(t *testing.T) {
	const public = "tcp://203.0.113.7:9711"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithUnsigned(), jxtatcp.WithPublicAddress(public))
	s, err := New(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := adv.New(adv.Unicast, "behind-nat", "")
	if err != nil {
		t.Fatal(err)
	}
	unbind, err := s.ListenJXTA(a, func(*Received) {})
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()

	ident, q, answers := jxtaQuerier(t)
	listener := ep.JXTA().Addrs()[0]
	if err := q.Send(ctx, listener, JXTAResolverService, jxtaQueryParam, (&jxtaResolver{self: ident.ID()}).queryMessage(1, a)); err != nil {
		t.Fatal(err)
	}
	var doc []byte
	select {
	case doc = <-answers:
	case <-ctx.Done():
		t.Fatal("no answer")
	}
	resp, err := parseDoc(doc, "ResolverResponse")
	if err != nil {
		t.Fatal(err)
	}
	pbp, err := parseDoc([]byte(childText(resp, "Response")), "PipeResolver")
	if err != nil {
		t.Fatal(err)
	}
	pa, err := parseDoc([]byte(childText(pbp, "PeerAdv")), "PA")
	if err != nil {
		t.Fatal(err)
	}
	var route []string
	for _, ea := range pa.FindElements("//EA") {
		route = append(route, ea.Text())
	}
	if want := []string{public, listener}; !slices.Equal(route, want) {
		t.Fatalf("the answer routes to %q, want %q", route, want)
	}
}

// TestJXTAQueryTagBomb: a JXTA peer's binding query for a pipe bound here,
// padded with 2,000 empty elements or with one element of 2,000
// attributes (a document parsing costs by the element and by the
// attribute: 64 KiB of elements took 5.8 ms and 2.5 MB), is refused
// unparsed and counted; the same query unpadded is answered. Before, it
// was parsed and answered (since 5bec930, padded with attributes).
func TestJXTAQueryTagBomb(t *testing.T) {
	for what, pad := range markupBombs {
		t.Run(what, func(t *testing.T) { testJXTAQueryBomb(t, pad) })
	}
}

func testJXTAQueryBomb(t *testing.T, pad []byte) {
	ctx, s, ep, a := unsignedJXTAPipes(t, "tag-bomb")
	unbind, err := s.ListenJXTA(a, func(*Received) {})
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()
	ident, peer, answers := jxtaQuerier(t)
	addr := ep.JXTA().Addrs()[0]
	q := (&jxtaResolver{self: ident.ID()}).queryMessage(1, a)
	e, _ := q.Get(message.JXTANamespace, jxtaQueryParam)
	end := []byte("</jxta:ResolverQuery>")
	i := bytes.LastIndex(e.Data, end)
	if i < 0 {
		t.Fatalf("no %s in the query %q", end, e.Data)
	}
	padded := slices.Concat(e.Data[:i], pad, e.Data[i:])
	bomb := message.New(message.Element{Namespace: message.JXTANamespace, Name: jxtaQueryParam, MIME: e.MIME, Data: padded})
	if err := peer.Send(ctx, addr, JXTAResolverService, jxtaQueryParam, bomb); err != nil {
		t.Fatal(err)
	}
	// The transport hands a connection's messages over in order: once
	// the plain query (2) is answered, the padded one (1) was handled.
	if err := peer.Send(ctx, addr, JXTAResolverService, jxtaQueryParam, (&jxtaResolver{self: ident.ID()}).queryMessage(2, a)); err != nil {
		t.Fatal(err)
	}
	select {
	case doc := <-answers:
		if qid, _, err := parsePBPAnswer(doc); err != nil || qid != 2 {
			t.Fatalf("the padded query was answered (query %d, %v)", qid, err)
		}
	case <-ctx.Done():
		t.Fatal("the plain query was not answered")
	}
	if got := s.Stats().JXTARefused; got != 1 {
		t.Fatalf("%d refused, want the padded query's 1", got)
	}
}

// TestJXTAOpenTagBomb: a JXTA peer opens a JxtaBiDiPipe with its pipe
// advertisement padded with 2,000 empty elements, or with one element of
// 2,000 attributes (unknown elements are allowed; parsing costs by the
// element and by the attribute): the open is refused unparsed and
// counted, and a plain open after it is accepted. Before, it was parsed
// and set up (since 2d8ce07, padded with attributes).
func TestJXTAOpenTagBomb(t *testing.T) {
	for what, pad := range markupBombs {
		t.Run(what, func(t *testing.T) {
			ctx, s, l, open := jxtaOpener(t, "open-tag-bomb")
			open(pad)
			open(nil)
			// The transport hands a connection's messages over in order:
			// once the plain open is accepted, the padded one was handled.
			b, err := l.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := s.Stats().JXTARefused; got != 1 {
				t.Fatalf("%d opens refused, want the padded one's 1", got)
			}
		})
	}
}

// markupBombs are paddings a document's parsing costs much for, by the
// element or by the attribute, each beyond the bounds of markup.
var markupBombs = map[string][]byte{
	"2,000 elements":   bytes.Repeat([]byte("<x/>"), 2000),
	"2,000 attributes": attributeBomb(2000),
}

// attributeBomb is one empty element of n attributes.
func attributeBomb(n int) []byte {
	b := []byte("<x")
	for i := range n {
		b = fmt.Appendf(b, ` a%d=""`, i)
	}
	return append(b, "/>"...)
}

// jxtaOpener is a JxtaBiDiPipe listener on an unsignedJXTAPipes service
// and open, which has a JXTA peer open a connection to it by hand, from
// a new client pipe whose advertisement is padded with pad before its
// end. The listener closes at the end of the test.
func jxtaOpener(t *testing.T, name string) (context.Context, *Service, *Listener, func(pad []byte)) {
	t.Helper()
	ctx, s, ep, a := unsignedJXTAPipes(t, name)
	l, err := s.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	fl, err := jxtatcp.New(ident, func(*jxtatcp.Incoming) {}, jxtatcp.WithUnsigned())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	d, pa := newDoc("PA")
	pa.CreateElement("PID").SetText(ident.ID().String())
	peerAdv := docBytes(d)
	open := func(pad []byte) {
		t.Helper()
		client, err := adv.New(adv.Unicast, "client", "")
		if err != nil {
			t.Fatal(err)
		}
		cx, _ := client.Marshal()
		end := []byte("</jxta:PipeAdvertisement>")
		i := bytes.LastIndex(cx, end)
		if i < 0 {
			t.Fatalf("no %s in %q", end, cx)
		}
		cx = slices.Concat(cx[:i], pad, cx[i:])
		m := message.New(message.Text(bidiNS, bidiReliable, "true"),
			message.Element{Namespace: bidiNS, Name: bidiReqPipe, MIME: message.XMLUTF8, Data: cx},
			message.Element{Namespace: bidiNS, Name: bidiRemPeer, MIME: message.XMLUTF8, Data: peerAdv})
		if err := fl.Send(ctx, ep.JXTA().Addrs()[0], "PipeService", a.ID.String(), m); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, s, l, open
}

// jxtaQuerier is a JXTA peer (unsigned) that asks a pipe resolver by
// hand; answers carries the documents of the answers it gets. It closes
// at the end of the test.
func jxtaQuerier(t *testing.T) (*jxtatcp.Identity, *jxtatcp.Transport, <-chan []byte) {
	t.Helper()
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan []byte, 4)
	q, err := jxtatcp.New(ident, func(in *jxtatcp.Incoming) {
		if e, ok := in.Message.Get(message.JXTANamespace, jxtaResponseParam); ok && in.Service == JXTAResolverService {
			select {
			case answers <- bytes.Clone(e.Data):
			default:
			}
		}
	}, jxtatcp.WithUnsigned())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return ident, q, answers
}
