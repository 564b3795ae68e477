package socket

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"time"
)

// Accept waits for the next connection (see AcceptContext). It
// implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptContext(context.Background())
	if err != nil {
		return nil, err // not a typed nil *Conn in the interface
	}
	return c, nil
}

// backlogged waits in a listener's backlog for Accept: a libp2p
// connection, already answered, or a JXTA connect request, which Accept
// answers.
type backlogged struct {
	c   *Conn
	req *jxtaRequest
	at  place
}

// place is whose place in the backlog a connection or request takes.
type place struct {
	who  string       // the peer: "p2p:" or "jxta:" and its ID
	host netip.Prefix // the remote host it came from (hostkey); zero when unknown
}

// takenEntry is what Accept took from the backlog and has not returned: a
// connection ready to return (c), a JXTA connect request whose answer is
// being sent (answering), or one waiting until no other answer to its
// host is. It keeps its place in the backlog until Accept returns it or
// it is dropped.
type takenEntry struct {
	b         backlogged
	answering bool
	started   time.Time // of the answer being sent
	c         *Conn
}

// answerGrace is how long Accept waits on the JXTA connect answers being
// sent before it starts answering another host's request too. An answer
// is a message of a few KiB written on the connection its request came
// on, so it goes out as soon as its bytes are in the socket's buffer: one
// still being sent a quarter of a second later has a peer that does not
// read (or a connection being dialled over a slow path). Waiting that
// long keeps Accept from answering requests it will not return (each
// answered connection holds receive buffers before the application takes
// it), while a host whose answers stall delays those behind it by no
// more than that.
const answerGrace = 250 * time.Millisecond

// AcceptContext is Accept bounded by ctx.
//
// JXTA connect requests are answered here, as JxtaServerSocket.accept
// does, but Accept does not wait on any one answer: while an answer is
// being sent it goes on through the backlog, so that a JXTA peer that
// does not take its answers (it stopped reading its connection) holds up
// the requests from its host, not every dialler behind them. Answers go
// out one at a time per remote host, the unit of the backlog's shares (a
// peer ID costs nothing, a host a machine), and another host's request
// is answered only while every answer being sent has been held up for
// answerGrace: an answered connection holds receive buffers, so Accept
// answers more requests than it returns only while answers are held up,
// and at most one per host. Accept returns the connection taken earliest
// among those ready: a libp2p connection, or a JXTA one whose answer was
// sent.
//
// An answer is bounded by what its peer waits for it (15 s after the
// request arrived) and by Close, not by ctx: when ctx ends, Accept
// returns and the answers it started go on; the connections they make
// wait, keeping their places in the backlog, for the next Accept, and
// Close resets those no Accept took (JXTAStats.Abandoned). A request
// that cannot be answered in time is dropped and counted
// (JXTAStats.Unanswered). Accept with a ctx that has already ended takes
// nothing from the backlog.
func (l *Listener) AcceptContext(ctx context.Context) (*Conn, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, changed, wake, err := l.next()
		if c != nil {
			return l.svc.handOut(c), nil
		}
		if err != nil {
			return nil, err
		}
		var grace <-chan time.Time
		if wake > 0 {
			grace = time.After(wake) // unreferenced once this wait ends: collected
		}
		select {
		case b := <-l.backlog:
			l.take(b)
		case <-changed:
		case <-grace:
		case <-l.done:
			return nil, l.closedErr()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *Listener) closedErr() error {
	return &net.OpError{Op: "accept", Net: Network, Addr: l.Addr(), Err: ErrClosed}
}

// take moves b from the backlog to l.taken, or lets it go if l closed.
func (l *Listener) take(b backlogged) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.discard(b)
		return
	}
	l.taken = append(l.taken, &takenEntry{b: b, c: b.c})
	l.signal()
	l.mu.Unlock()
}

// signal wakes the Accepts waiting for taken to change; l.mu is held.
func (l *Listener) signal() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// next returns the earliest taken connection that is ready. Without one,
// it starts answering the earliest taken JXTA request whose host has no
// answer being sent, if no other answer is or all have been held up for
// answerGrace, drops the requests whose peer stopped waiting, and returns
// a channel closed when taken changes next and, while a request waits for
// the grace to pass, how long that is.
func (l *Listener) next() (*Conn, <-chan struct{}, time.Duration, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, 0, l.closedErr()
	}
	for i, e := range l.taken {
		if e.c != nil {
			l.taken = slices.Delete(l.taken, i, i+1)
			l.mu.Unlock()
			l.unreserve(e.b.at)
			return e.c, nil, 0, nil
		}
	}
	now := time.Now()
	var newest time.Time // the latest start of an answer being sent
	for _, e := range l.taken {
		if e.answering && e.started.After(newest) {
			newest = e.started
		}
	}
	var wake time.Duration
	var expired []backlogged
	kept := l.taken[:0]
	for _, e := range l.taken {
		switch {
		case e.answering:
		case !now.Before(e.b.req.deadline):
			expired = append(expired, e.b)
			continue
		case l.answering[e.b.at.host]:
		case newest.IsZero() || now.Sub(newest) >= answerGrace:
			l.startAnswer(e, now)
			newest = now
		case wake == 0:
			wake = answerGrace - now.Sub(newest)
		}
		kept = append(kept, e)
	}
	clear(l.taken[len(kept):])
	l.taken = kept
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	changed := l.changed
	l.mu.Unlock()
	for _, b := range expired {
		l.unreserve(b.at)
		l.svc.dropRequest(b.req)
	}
	return nil, changed, wake, nil
}

// startAnswer answers e's request in the background; l.mu is held.
func (l *Listener) startAnswer(e *takenEntry, now time.Time) {
	if l.answering == nil {
		l.answering = map[netip.Prefix]bool{}
	}
	e.answering, e.started = true, now
	l.answering[e.b.at.host] = true
	l.answers.Add(1)
	go l.answer(e)
}

// answer sends the answer to e's request: its connection is then ready
// for Accept, unless l closed meanwhile.
func (l *Listener) answer(e *takenEntry) {
	defer l.answers.Done()
	c, err := l.svc.answerJXTA(l, e.b.req)
	l.mu.Lock()
	delete(l.answering, e.b.at.host)
	e.answering = false
	ready := err == nil && !l.closed
	if ready {
		e.c = c
	} else {
		l.taken = slices.DeleteFunc(l.taken, func(x *takenEntry) bool { return x == e })
	}
	l.signal()
	l.mu.Unlock()
	switch {
	case ready:
	case err == nil: // l closed while the answer went out
		c.st.Reset()
		l.svc.jxtaAbandoned.Add(1)
	default:
		l.unreserve(e.b.at)
	}
}

// Close stops listening; connections not yet accepted are reset, JXTA
// connect requests not yet answered are dropped (counted in
// JXTAStats.Unanswered) and answers being sent are cut short (counted
// there too). JXTA connections answered but not yet returned by Accept
// are reset (counted in JXTAStats.Abandoned). Closing it again fails with
// ErrClosed, as a TCP listener's second Close does; the socket service's
// Close closes its listeners.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: Network, Addr: l.Addr(), Err: ErrClosed}
	}
	l.closed = true
	close(l.done)
	var ready []*Conn
	var unanswered []*jxtaRequest
	for _, e := range l.taken {
		switch {
		case e.answering: // answer sees l closed
		case e.c != nil:
			ready = append(ready, e.c)
			if e.b.req != nil {
				l.svc.jxtaAbandoned.Add(1)
			}
		default:
			unanswered = append(unanswered, e.b.req)
		}
	}
	l.taken = nil
	l.mu.Unlock()
	l.release()
	l.svc.mu.Lock()
	if l.svc.listeners[l.key] == l {
		delete(l.svc.listeners, l.key)
	}
	l.svc.mu.Unlock()
	for _, c := range ready {
		c.st.Reset()
	}
	for _, req := range unanswered {
		l.svc.dropRequest(req)
	}
	for {
		select {
		case b := <-l.backlog:
			l.discard(b)
		default:
			l.answers.Wait()
			return nil
		}
	}
}

// discard lets go of what Accept will not take.
func (l *Listener) discard(b backlogged) {
	if b.c != nil {
		b.c.st.Reset()
	} else {
		l.svc.dropRequest(b.req)
	}
}
