package socket_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// sendRequests sends n connect requests from fresh client pipes of h for
// pipe a at addr and returns those pipes.
func sendRequests(t *testing.T, h *hostileJXTA, addr string, a *adv.PipeAdvertisement, n int) []*adv.PipeAdvertisement {
	t.Helper()
	from := make([]*adv.PipeAdvertisement, n)
	for i := range from {
		var err error
		if from[i], err = adv.New(adv.Unicast, "hostile.remote", ""); err != nil {
			t.Fatal(err)
		}
		if err := h.t.Send(ctx(t), addr, "PipeService", a.ID.String(), h.connectRequest(t, from[i], true)); err != nil {
			t.Fatal(err)
		}
	}
	return from
}

// closeAll closes cs at once: each waits for a closeACK the hostile peer
// never sends.
func closeAll(cs []*socket.Conn) {
	done := make(chan struct{})
	for _, c := range cs {
		go func() { c.Close(); done <- struct{}{} }()
	}
	for range cs {
		<-done
	}
}

// A JXTA peer's connect requests wait unanswered in the backlog until
// Accept takes them, as with JXSE's JxtaServerSocket: the peer learns no
// socket pipe to send to, so requests the application never accepts hold
// no socket and no receive buffer (answered on arrival, 40 of them let one
// peer fill 320 MiB). One peer holds a quarter of the backlog, its
// requests beyond that are refused. Accept answers each it takes; Close
// drops the rest, counted, and forgets them.
func TestJXTABacklogHoldsNoSockets(t *testing.T) {
	s, l, a, addr, h := hostileListener(t, "hostile-backlog")
	const socks = 64 / 4
	from := sendRequests(t, h, addr, a, socks+1)
	until(t, "the requests in the backlog", func() bool { return s.JXTAStats().Refused == 1 })
	if n := socket.BacklogLen(l); n != socks {
		t.Fatalf("%d requests in the backlog, want the peer's share, %d", n, socks)
	}
	time.Sleep(500 * time.Millisecond) // for answers to arrive, were any sent
	if n := h.answers.Load(); n != 0 {
		t.Fatalf("%d of %d connect requests answered before Accept", n, socks)
	}

	var accepted []*socket.Conn
	defer func() { closeAll(accepted) }()
	pipes := map[string]bool{}
	for range 2 {
		c, err := l.AcceptContext(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		accepted = append(accepted, c)
		pipes[h.answer(t)] = true
	}
	if len(pipes) != 2 || h.answers.Load() != 2 {
		t.Fatalf("2 accepted: %d answers, %d socket pipes", h.answers.Load(), len(pipes))
	}

	l.Close()
	if st := s.JXTAStats(); st.Unanswered != socks-2 || st.Refused != 1 || socket.BacklogLen(l) != 0 {
		t.Fatalf("after Close: %+v, %d in the backlog; want %d unanswered", st, socket.BacklogLen(l), socks-2)
	}
	// A request Close dropped is forgotten: sent again to a new listener,
	// it is a new request, not a repeat.
	l2, err := s.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := h.t.Send(ctx(t), addr, "PipeService", a.ID.String(), h.connectRequest(t, from[socks-1], true)); err != nil {
		t.Fatal(err)
	}
	until(t, "the request in the new backlog", func() bool { return socket.BacklogLen(l2) == 1 })
	if st := s.JXTAStats(); st.Repeated != 0 {
		t.Fatalf("a request dropped at Close counted as repeated: %+v", st)
	}
}

// A connect request that waited in the backlog longer than its peer
// waits for the answer is dropped unanswered and counted; the same
// request sent again is a new one.
func TestJXTAExpiredConnectRequestUnanswered(t *testing.T) {
	const wait = 300 * time.Millisecond
	s, l, a, addr, h := hostileListener(t, "hostile-expired", socket.WithJXTAAnswerWait(wait))
	h.request(t, addr, a, true)
	until(t, "the request in the backlog", func() bool { return socket.BacklogLen(l) == 1 })
	time.Sleep(2 * wait)
	short, cancel := context.WithTimeout(ctx(t), 500*time.Millisecond)
	defer cancel()
	if c, err := l.AcceptContext(short); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Accept of an expired request: %v, want no connection", err)
	}
	if st := s.JXTAStats(); st.Unanswered != 1 || h.answers.Load() != 0 {
		t.Fatalf("%+v, %d answers; want 1 unanswered, no answer", st, h.answers.Load())
	}

	// Not answered here: on a loaded machine the request could expire
	// again before Accept reached it.
	h.request(t, addr, a, true)
	until(t, "the request in the backlog again", func() bool { return socket.BacklogLen(l) == 1 })
	if st := s.JXTAStats(); st.Repeated != 0 || st.Unanswered != 1 {
		t.Fatalf("%+v; want the request sent again taken as new", st)
	}
}

// Accept with a context that has ended takes no connect request from the
// backlog: the next Accept answers it.
func TestJXTACancelledAcceptKeepsRequest(t *testing.T) {
	s, l, a, addr, h := hostileListener(t, "hostile-cancelled")
	h.request(t, addr, a, true)
	until(t, "the request in the backlog", func() bool { return socket.BacklogLen(l) == 1 })
	cancelled, cancel := context.WithCancel(ctx(t))
	cancel()
	if _, err := l.AcceptContext(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept with a cancelled context: %v", err)
	}
	if n := socket.BacklogLen(l); n != 1 {
		t.Fatalf("%d requests in the backlog after a cancelled Accept, want 1", n)
	}
	c, err := l.AcceptContext(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll([]*socket.Conn{c})
	h.answer(t)
	if st := s.JXTAStats(); st.Unanswered != 0 {
		t.Fatalf("%+v", st)
	}
}
