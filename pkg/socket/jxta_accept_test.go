package socket_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// bindingQuery is JXTA's pipe binding query for pipe a from peer src, as
// a JXSE output pipe sends it to resolve a.
func bindingQuery(src id.ID, a *adv.PipeAdvertisement) *message.Message {
	pbp := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><jxta:PipeResolver xmlns:jxta="http://jxta.org">`+
		`<MsgType>Query</MsgType><PipeId>%s</PipeId><Type>%s</Type></jxta:PipeResolver>`, a.ID, a.Type)
	var esc bytes.Buffer
	xml.EscapeText(&esc, []byte(pbp))
	q := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><jxta:ResolverQuery xmlns:jxta="http://jxta.org">`+
		`<HandlerName>JxtaPipeResolver</HandlerName><QueryID>1</QueryID><HC>0</HC><SrcPeerID>%s</SrcPeerID>`+
		`<Query>%s</Query></jxta:ResolverQuery>`, src, esc.String())
	return message.New(message.Element{Namespace: message.JXTANamespace, Name: "jxta-NetGroupORes", MIME: message.XMLUTF8, Data: []byte(q)})
}

// stalledJXTA is a JXTA peer on 127.0.0.1 that stops reading its
// connection to the pipe service ps at addr, then makes ps send it more
// than the connection's buffers hold (binding queries for a, each
// answered), so that anything more ps sends it waits: the connection's
// writer is stuck for the transport's write timeout (30 s). It returns
// the peer, to send connect requests with (it counts the connect
// responses it reads), and resume, which has it read again.
func stalledJXTA(t *testing.T, ep *endpoint.Service, ps *pipe.Service, addr string, a *adv.PipeAdvertisement) (h *hostileJXTA, resume func()) {
	t.Helper()
	h = &hostileJXTA{}
	var err error
	if h.ident, err = jxtatcp.NewIdentity(); err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	handler := func(in *jxtatcp.Incoming) {
		<-block
		if _, ok := in.Message.Get("JXTASOC", "remPipe"); ok {
			h.answers.Add(1)
		}
	}
	// A receive buffer of fixed size: autotuned, it would grow and let
	// more answers through whenever the connection looked stuck
	// (fixedReceiveBuffer says why not the smallest).
	d := &net.Dialer{Control: fixedReceiveBuffer}
	if h.t, err = jxtatcp.New(h.ident, handler, jxtatcp.WithUnsigned(), jxtatcp.WithDialer(d.DialContext)); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { close(block) }) }
	t.Cleanup(func() { h.t.Close() })
	t.Cleanup(resume) // first: Close waits for the handler
	// The answers in flight are bounded (8 for one host): queries beyond
	// them are refused while answers wait. The connection looks stuck
	// once two whole batches of queries, refused in part, leave the count
	// of messages ps's transport has sent where it was: none of the
	// answers in flight gets out. On a loaded machine that may be a
	// writer that is only slow, whose next answers then go out (and
	// Accept's answer with them, CI once): it is stuck when a second more
	// passes and still none of them does.
	q := bindingQuery(h.ident.ID(), a)
	sent := func() uint64 { return ep.JXTA().Stats().Sent }
	last, still := sent(), 0
	for batch := 0; still < 2 || !unchanged(sent, last, time.Second); batch++ {
		if batch == 1000 {
			t.Fatalf("%d binding queries did not stall the connection: %+v", batch*100, ps.Stats())
		}
		refused := ps.Stats().JXTARefused
		for range 100 {
			if err := h.t.Send(ctx(t), addr, pipe.JXTAResolverService, "jxta-NetGroupORes", q); err != nil {
				t.Fatal(err)
			}
		}
		// The next batch waits until ps has read this one. Unpaced, the
		// queries ran thousands ahead of ps's reading, queued in the
		// kernels' buffers, and ps, reading them in order at a few
		// hundred a second or fewer under -race and load, reached the
		// hostile peer's next write after its 30 s write timeout.
		handled := uint64(batch+1) * 100
		untilOr(t, "the binding queries read", func() bool { return ep.JXTA().Stats().Received >= handled },
			func() string {
				return fmt.Sprintf("%d of %d read; %+v", ep.JXTA().Stats().Received, handled, ps.Stats())
			})
		if now := sent(); now == last && ps.Stats().JXTARefused > refused {
			still++
		} else {
			last, still = now, 0
		}
	}
	return h, resume
}

// unchanged reports whether count stays at n for d.
func unchanged(count func() uint64, n uint64, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(d / 20) {
		if count() != n {
			return false
		}
	}
	return count() == n
}

// unsignedJXTAListener listens on the pipe seeded by seed, on a socket
// service of its own whose endpoint is an unsigned JXTA peer (a flood of
// queries costs no signatures). The listener closes at the end of the
// test.
func unsignedJXTAListener(t *testing.T, seed string, opts ...socket.Option) (*endpoint.Service, *pipe.Service, *socket.Service, *socket.Listener, *adv.PipeAdvertisement) {
	t.Helper()
	ep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithUnsigned())
	ps, s := socketsOn(t, ep, opts...)
	a := seeded(t, seed)
	l, err := s.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return ep, ps, s, l, a
}

// A JXTA peer that stopped reading its connection sends connect requests
// up to its share of the backlog (16), then an honest libp2p peer dials
// and an honest JXTA peer asks to connect, both from another host. Each
// answer to the hostile peer waits for its stalled connection until the
// request's deadline (15 s after it arrived; 25 s here). Before, Accept answered the
// requests in turn and waited on each: it accepted no one for as long as
// its context lasted (here 10 s), until the answers' deadline. Now Accept
// goes on while a host's answer is being sent: it returns both honest
// connections while the hostile peer's answers still wait, and Close
// drops those, counted.
func TestJXTAPeerNotReadingDoesNotStallAccept(t *testing.T) {
	// Requests wait 25 s here, not 15: longer than the test's setup and
	// Accept bound together, however loaded the machine, and shorter than
	// the stall (30 s), so that the hostile answers are sure to pend.
	ep, ps, s, l, a := unsignedJXTAListener(t, "hostile-stalled-answers", socket.WithJXTAAnswerWait(25*time.Second))
	addr := ep.JXTA().Addrs()[0]

	const share = 64 / 4
	hostile, _ := stalledJXTA(t, ep, ps, addr, a)
	sendRequests(t, hostile, addr, a, share)
	until(t, "the hostile requests in the backlog", func() bool { return socket.BacklogLen(l) == share })

	honestNode := testutil.NodeOnHost(t, "127.0.0.2", ep.Node())
	dialled, err := newSockets(t, honestNode).Dial(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}} // another host
	honestJXTA := newHostileJXTA(t, jxtatcp.WithUnsigned(), jxtatcp.WithDialer(d.DialContext))
	honestJXTA.request(t, addr, a, true)
	until(t, "the honest connection and request in the backlog", func() bool { return socket.BacklogLen(l) == share+2 })

	// The bound on the test is shorter than the hostile requests' wait:
	// Accept must not wait for their answers to time out.
	actx, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	var accepted []*socket.Conn
	defer func() { closeAll(accepted) }()
	hostileAccepted, gotP2P, gotJXTA := 0, false, false
	for !gotP2P || !gotJXTA {
		c, err := l.AcceptContext(actx)
		if err != nil {
			t.Fatalf("Accept: %v, after %d of the hostile peer's connections; the honest libp2p connection accepted: %v, the honest JXTA peer's: %v (%+v)",
				err, hostileAccepted, gotP2P, gotJXTA, s.JXTAStats())
		}
		accepted = append(accepted, c)
		switch r := c.RemoteAddr().(socket.Addr); {
		case r.Peer == honestNode.ID():
			gotP2P = true
		case r.JXTAPeer == honestJXTA.ident.ID():
			gotJXTA = true
		default:
			hostileAccepted++
		}
	}
	honestJXTA.answer(t)
	st := s.JXTAStats()
	t.Logf("both honest connections accepted after %d of the hostile peer's; %+v", hostileAccepted, st)
	if hostileAccepted == share {
		t.Fatal("every hostile answer went out: the connection never stalled, the test proved nothing")
	}
	if st.Unanswered != 0 {
		t.Fatalf("%+v: hostile answers timed out before the honest connections were accepted", st)
	}
	l.Close()
	st = s.JXTAStats()
	if got := st.Unanswered + st.Abandoned; got != uint64(share-hostileAccepted) {
		t.Fatalf("after Close: %+v; want the %d hostile requests not accepted unanswered or abandoned", st, share-hostileAccepted)
	}
}

// An answer Accept started goes on when Accept's context ends: Accept
// returns at once, and the connection the answer makes waits for the
// next Accept, or is reset and counted by Close. Meanwhile the host's
// other requests wait unanswered: one answer at a time per host, and none
// while no Accept runs. Before, the answer was cut short with Accept's
// context and the request counted unanswered.
func TestJXTAAnswerOutlivesAcceptContext(t *testing.T) {
	for _, next := range []string{"Accept", "Close"} {
		t.Run(next, func(t *testing.T) {
			ep, ps, s, l, a := unsignedJXTAListener(t, "answer-outlives-"+next)
			addr := ep.JXTA().Addrs()[0]
			stalling := time.Now()
			hostile, resume := stalledJXTA(t, ep, ps, addr, a)
			stalledAt := ep.JXTA().Stats().Sent
			sendRequests(t, hostile, addr, a, 3)
			until(t, "the requests in the backlog", func() bool { return socket.BacklogLen(l) == 3 })
			short, cancel := context.WithTimeout(ctx(t), time.Second)
			defer cancel()
			if c, err := l.AcceptContext(short); !errors.Is(err, context.DeadlineExceeded) {
				if err == nil {
					c.Close()
				}
				t.Fatalf("Accept while the answer cannot be sent: %v, want its context's end; the transport sent %d messages at the stall, %d now",
					err, stalledAt, ep.JXTA().Stats().Sent)
			}
			stalledFor := time.Since(stalling)
			resume()
			// On failure, what became of the answer: dropped for its
			// request's age (Unanswered), or its connection closed
			// under a write stalled past the write timeout.
			untilOr(t, "the answer", func() bool { return hostile.answers.Load() == 1 }, func() string {
				return fmt.Sprintf("(%v since the stall began; socket %+v; transport %+v)", stalledFor, s.JXTAStats(), ep.JXTA().Stats())
			})
			if n, st := socket.BacklogLen(l), s.JXTAStats(); n != 3 || st.Unanswered != 0 {
				t.Fatalf("%d waiting for Accept, %+v; want 3, none unanswered", n, st)
			}
			if next == "Accept" {
				c, err := l.AcceptContext(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				defer closeAll([]*socket.Conn{c})
				if c.RemoteAddr().(socket.Addr).JXTAPeer != hostile.ident.ID() {
					t.Fatalf("accepted %v", c.RemoteAddr())
				}
			}
			l.Close()
			want := socket.JXTAStats{Unanswered: 2, Abandoned: 1}
			if next == "Accept" {
				want.Abandoned = 0
			}
			if st := s.JXTAStats(); st != want || hostile.answers.Load() != 1 {
				t.Fatalf("after Close: %+v, %d answers; want %+v, 1 answer", st, hostile.answers.Load(), want)
			}
		})
	}
}

// jxtaOnHost is a raw unsigned JXTA peer whose connections come from ip,
// a host of its own on loopback.
func jxtaOnHost(t *testing.T, ip string) *hostileJXTA {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return newHostileJXTA(t, jxtatcp.WithUnsigned(), jxtatcp.WithDialer(d.DialContext))
}

// TestJXTAOneAcceptAnswersOne: JXTA peers on 16 hosts each send one
// connect request, and the application accepts once. Accept must answer
// about as many requests as it returns: each answered connection holds
// receive buffers its peer may fill before the application takes it
// (answering every host's request at once, one Accept made 15 such
// connections, 8 MiB each once their peers sent). Requests it did not
// answer are counted Unanswered at Close, connections it answered and
// did not return Abandoned.
func TestJXTAOneAcceptAnswersOne(t *testing.T) {
	const k = 16
	ep, _, s, l, a := unsignedJXTAListener(t, "one-accept-answers-one")
	addr := ep.JXTA().Addrs()[0]
	for i := range k {
		sendRequests(t, jxtaOnHost(t, fmt.Sprintf("127.0.0.%d", 2+i)), addr, a, 1)
	}
	until(t, "requests in the backlog", func() bool { return socket.BacklogLen(l) == k })
	c, err := l.AcceptContext(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll([]*socket.Conn{c})
	l.Close()
	st := s.JXTAStats()
	// An answer held up for the grace lets another start: a loaded
	// machine may make a few, never most.
	if st.Abandoned+st.Unanswered != k-1 || st.Abandoned >= k/2 {
		t.Fatalf("one Accept returned 1 connection of %d requests; after Close: %d answered and not returned (Abandoned), %d unanswered",
			k, st.Abandoned, st.Unanswered)
	}
}
