package pipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
)

// Possible losses. The endpoint keeps one stream per peer, shared by
// every output pipe and Bidi sending to that peer, and reports a reset
// under their messages once, to whichever flushes the peer first
// (endpoint.LostError, naming the messages' destinations). That Flush
// keeps its own part and hands the rest to the pipes named, for their
// next Flush; a loss that names no destination in particular goes to
// every output pipe that sent to the peer since its last Flush, and to
// every Bidi with it that sent anything. Pipes closed since have nobody
// to report to. A peer's Flushes run one at a time with that sorting
// (flushPeer): a loss one Flush hands to another pipe is then noted
// before that pipe's own Flush of the peer looks for it.

// sortLoss hands the possible loss e reports, if e is one, to the output
// pipes and Bidis it names other than self (an *OutputPipe or *Bidi);
// loss says e is one, mine that it names self too.
func (s *Service) sortLoss(e error, self any) (loss, mine bool) {
	var le *endpoint.LostError
	if !errors.As(e, &le) {
		return false, false
	}
	s.mu.Lock()
	outputs := mapKeys(s.openOutputs)
	var bidis []*Bidi
	for k, b := range s.bidiNotes {
		if k.peer == le.Peer {
			bidis = append(bidis, b)
		}
	}
	s.mu.Unlock()
	for _, o := range outputs {
		if o != self && o.named(le) {
			o.noteLost(le.Peer)
		}
	}
	for _, b := range bidis {
		if b != self && b.named(le) {
			b.noteLost()
		}
	}
	switch self := self.(type) {
	case *OutputPipe:
		mine = self.named(le)
	case *Bidi:
		mine = self.named(le)
	}
	return true, mine
}

// named reports whether le is o's: it names o's pipe and o has sent to
// its peer (the same pipe bound on other peers has output pipes here
// too, each to its own peer), or no destination in particular and o sent
// to its peer since o's last Flush, or a Flush of o is flushing that peer
// (the loss may be that Flush's own).
func (o *OutputPipe) named(le *endpoint.LostError) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !le.Others {
		_, ok := o.boundTo[le.Peer]
		return (ok || o.boundToAll) && le.Has(DataService, o.key)
	}
	_, ok := o.sentTo[le.Peer]
	return ok || o.flushing[le.Peer] > 0
}

// maxBoundTo bounds the peers an output pipe remembers having sent to;
// one that has sent to more takes every loss and refusal naming its key
// as its own. Far more than the binders of one pipe an application runs
// (a pool of workers binding one advertisement); each past it costs a
// map entry per pipe for its lifetime.
const maxBoundTo = 64

// noteLost keeps, for o's next Flush, that its messages to p may be lost.
func (o *OutputPipe) noteLost(p peer.ID) {
	o.lost.CompareAndSwap(nil, &endpoint.LostError{Peer: p, Dests: []endpoint.Destination{{Service: DataService, Param: o.key}}})
}

// takeLost returns the loss kept for o, nil if none, unless err already
// reports one.
func (o *OutputPipe) takeLost(err error) error {
	le := o.lost.Swap(nil)
	if le == nil || errors.Is(err, endpoint.ErrMaybeLost) {
		return nil
	}
	return le
}

// named reports whether le is b's: it names one of b's messages (data or
// control), or no destination in particular and b sent something.
func (b *Bidi) named(le *endpoint.LostError) bool {
	if le.Others {
		return b.sent.Load()
	}
	for _, d := range le.Dests {
		if _, _, conn, ok := parseBidiParam(d.Param); ok && d.Service == BidiService && conn == b.conn {
			return true
		}
	}
	return false
}

// noteLost keeps, for b's next Flush or Close, that its messages may be
// lost.
func (b *Bidi) noteLost() {
	b.lost.CompareAndSwap(nil, &endpoint.LostError{Peer: b.remote, Dests: []endpoint.Destination{{Service: BidiService, Param: b.dst.Param}}})
}

// flushLock is one peer's Flush token; n counts its holder and waiters,
// under Service.mu, so that it is dropped when unused.
type flushLock struct {
	ch chan struct{}
	n  int
}

// flushPeer flushes the endpoint to p and sorts what it reports (sort:
// refusals and losses, for the pipes they belong to), one Flush of p at
// a time. It fails only if ctx ends while another Flush of p holds the
// token; otherwise it returns what sort does.
func (s *Service) flushPeer(ctx context.Context, p peer.ID, sort func(error) error) error {
	s.mu.Lock()
	l := s.flushLocks[p]
	if l == nil {
		l = &flushLock{ch: make(chan struct{}, 1)}
		if s.flushLocks == nil {
			s.flushLocks = map[peer.ID]*flushLock{}
		}
		s.flushLocks[p] = l
	}
	l.n++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if l.n--; l.n == 0 {
			delete(s.flushLocks, p)
		}
		s.mu.Unlock()
	}()
	select {
	case l.ch <- struct{}{}:
	default:
		if testHookFlushWaits != nil {
			testHookFlushWaits()
		}
		select {
		case l.ch <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("pipe: flushing to %s: %w", p, ctx.Err())
		}
	}
	defer func() { <-l.ch }()
	err := s.ep.Flush(ctx, p)
	if testHookPeerFlushed != nil {
		testHookPeerFlushed()
	}
	if err == nil {
		return nil
	}
	return sort(err)
}

// Test hooks, set by tests: testHookFlushWaits runs when a Flush of a
// peer waits for another's, testHookPeerFlushed when the endpoint's
// Flush returned, before its report is sorted.
var testHookFlushWaits, testHookPeerFlushed func()
