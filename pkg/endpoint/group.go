package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// ErrGroupClosed: a Send made through a SendGroup was cut short, or
// refused, because the group was closed.
var ErrGroupClosed = errors.New("endpoint: send group closed")

// A SendGroup gives the Sends made through it an end of their own besides
// their ctx: closing the group makes those waiting return, as net.Conn's
// Close does a blocked Write. It is for a connection-like sender above the
// endpoint (a pipe, say) whose Close must release its Sends, and whose
// Sends are too frequent to each carry a context derived for the purpose
// (deriving and registering one costs about as much as a small Send).
//
// The group costs a Send that does not wait nothing but a flag's load (and
// a pointer's, when the Send writes itself): its end is looked at only
// where a Send waits (for room in the peer's queue, for the stream's
// writer, for the stream to open, for a write the receiver stalls).
type SendGroup struct {
	svc    *Service
	ctx    context.Context // ends with Close; for waits that need a context
	cancel context.CancelFunc
	closed atomic.Bool
	// used is the sender the group's Sends have written on, directly or
	// as a large message (writer), and many says they wrote on more than
	// one. Close then interrupts that one sender rather than visit every
	// sender of the service: a pipe or a Bidi writes to one peer, and a
	// service with thousands of peers would pay a visit to each at every
	// pipe's Close.
	used atomic.Pointer[sender]
	many atomic.Bool
}

// NewSendGroup returns an open group of Sends on s.
func (s *Service) NewSendGroup() *SendGroup {
	ctx, cancel := context.WithCancel(context.Background())
	return &SendGroup{svc: s, ctx: ctx, cancel: cancel}
}

// Send is s.Send, also cut short by g's Close: a Send waiting then fails
// with ErrGroupClosed, its message not sent, and so does every Send
// through g after Close. A small message whose direct write had begun
// when Close came is sent in full (its rest queued), and Send succeeds; a
// large message cut short resets the stream, as when ctx ends (see
// Service.Send). Nothing else queued for the peer is lost. Sends to JXTA
// peers over JXTA's own transport are cut short by ctx only.
func (g *SendGroup) Send(ctx context.Context, addr Address, m *message.Message) error {
	if g.closed.Load() {
		return fmt.Errorf("endpoint: sending to %s: %w", addr.Addr, ErrGroupClosed)
	}
	return g.svc.send(ctx, g, addr, m)
}

// Close ends the group: Sends waiting through it return, and later ones
// fail, with ErrGroupClosed. It does not wait for them.
func (g *SendGroup) Close() {
	if g.closed.Swap(true) {
		return
	}
	g.cancel()
	if !g.many.Load() {
		if snd := g.used.Load(); snd != nil {
			snd.interrupt(g)
		}
		return
	}
	g.svc.mu.RLock()
	senders := make([]*sender, 0, len(g.svc.senders))
	for _, snd := range g.svc.senders {
		senders = append(senders, snd)
	}
	g.svc.mu.RUnlock()
	for _, snd := range senders {
		snd.interrupt(g)
	}
}

// done is the channel that g's Close closes; nil (never ready) when g is
// nil, a plain Send.
func (g *SendGroup) done() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.ctx.Done()
}

// write marks snd as writing for g, if any: snd.writer is g, and Close
// must visit snd. A Send marks before it prepares its write and looks at
// g once prepared, so either it sees g closed or Close sees the mark.
func (g *SendGroup) write(snd *sender) {
	snd.writer = g
	if g == nil {
		return
	}
	if u := g.used.Load(); u == snd || u == nil && g.used.CompareAndSwap(nil, snd) {
		return
	}
	g.many.Store(true)
}

// isClosed reports whether g, if any, is closed.
func (g *SendGroup) isClosed() bool { return g != nil && g.closed.Load() }

// cut returns ErrGroupClosed if a write that failed with err was cut
// short by g's Close, which moves the write deadline into the past (see
// interrupt), else nil.
func (g *SendGroup) cut(err error) error {
	var te interface{ Timeout() bool }
	if err != nil && g.isClosed() && errors.As(err, &te) && te.Timeout() {
		return ErrGroupClosed
	}
	return nil
}

// testHookInterrupt, if set (by tests), runs as interrupt visits a
// sender.
var testHookInterrupt func()

// interrupt stops a write in progress through g, one Send's direct or
// large write, by moving the stream's write deadline into the past; the
// next write's prepare puts it back. The writing Send marked itself
// (writer) before it prepared the write and looks at g once prepared, so
// either it sees g closed or this sees its mark, after the deadline was
// set for the write.
func (snd *sender) interrupt(g *SendGroup) {
	if testHookInterrupt != nil {
		testHookInterrupt()
	}
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if snd.writer == g && snd.st != nil {
		snd.watch.fire(snd.st)
	}
}
