package endpoint

import (
	"context"
	"errors"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
)

// The sender table. A node keeps a sender for each peer it sends to, and
// any peer can make it send: pipes answer whoever contacts them (a bidi
// accept, a refusal), and libp2p identities cost nothing to make. So the
// table is bounded: past maxSenders entries, the idle senders are retired
// (removed) until a quarter of the room is free again. A sender is idle
// when no writer holds its token, nothing is queued and nobody waits for
// room, and no message accepted on it is still in flight on a live
// stream: its stream was flushed, failed, was ended by the peer (its back
// channel ended), or carries nothing accepted since it opened. Retiring
// loses no accepted message and changes no order: whatever was accepted
// has left on a stream that is over, and the peer's next Send opens a new
// stream on a new sender, as after a Flush. Only senders with messages in
// flight on a live stream can keep the table above maxSenders, and those
// are bounded by the streams and connections libp2p admits.
//
// What a retired sender had still to report (messages that may be lost,
// refusals, a failure for the next Send) is kept as a report, summed, for
// the next Flush to the peer or the next sender made for it. Reports are
// bounded by maxSenders too; one dropped to make room is counted
// (Stats.ReportsDropped).

// maxSenders bounds the sender table. A node talks to a few hundred peers
// at once at most (libp2p's resource manager admits that many connections
// by default, and each sender is one stream); four thousand leaves room
// for ten times that before an idle sender is retired, which costs only
// a stream open on its peer's next Send. It matches maxResolved, the
// bound of Resolve's cache that feeds the table.
const maxSenders = maxResolved

// errRetired is what a retired sender answers a Send or Flush holding it,
// which then looks its peer up again. It never leaves the package.
var errRetired = errors.New("endpoint: sender retired")

// report is what a retired sender had not yet reported.
type report struct {
	lost    bool          // messages accepted on a stream that was reset may be lost
	dests   dests         // their destinations
	failed  error         // for the next Send (see checkLocked)
	refused *RefusedError // every refusal not yet reported, summed
}

// err is the report as Flush returns it; nil for a nil report.
func (r *report) err(p peer.ID) error {
	if r == nil {
		return nil
	}
	var err error
	if r.lost || r.failed != nil {
		err = r.dests.lostError(p)
	}
	if r.refused != nil {
		return joinerr.Join(err, r.refused)
	}
	return err
}

// addSenderLocked makes the sender for p, retiring idle senders first if
// the table is full, with s.mu held. The streams of retired senders are
// left in s.ending, for endRetired.
func (s *Service) addSenderLocked(p peer.ID) *sender {
	if len(s.senders) >= s.sweepAt {
		s.retireIdleLocked()
	}
	snd := newSender(s, p)
	if r := s.takeReportLocked(p); r != nil {
		snd.lost, snd.lostDests, snd.failed = r.lost, r.dests, r.failed
		if r.refused != nil {
			snd.refused.other = r.refused
			snd.refused.any.Store(true)
		}
	}
	s.senders[p] = snd
	return snd
}

// retireIdleLocked retires idle senders, with s.mu held, until a quarter
// of the table is free. The next sweep waits until the table has grown by
// a quarter of its bound again, so sweeping costs a few senders' worth of
// work per sender added, however many cannot be retired.
func (s *Service) retireIdleLocked() {
	target := s.maxSenders - s.maxSenders/4
	retired := false
	for p, snd := range s.senders {
		if len(s.senders) <= target {
			break
		}
		r, end, ok := snd.retire()
		if !ok {
			continue
		}
		if end != nil {
			s.ending = append(s.ending, end)
		}
		delete(s.senders, p)
		retired = true
		if r != nil {
			s.keepReportLocked(p, r)
		}
	}
	s.sweepAt = max(s.maxSenders, len(s.senders)+s.maxSenders/4)
	if !retired {
		return
	}
	// Drop the shortcuts to retired senders; one read before this still
	// works: the retired sender answers errRetired and Send looks again.
	for k, snd := range s.byAddr {
		if snd.isDead() {
			delete(s.byAddr, k)
		}
	}
	for i := range s.sendCache {
		if c := s.sendCache[i].Load(); c != nil && c.snd.isDead() {
			s.sendCache[i].CompareAndSwap(c, nil)
		}
	}
}

// keepReportLocked keeps r for p, with s.mu held, making room if needed.
func (s *Service) keepReportLocked(p peer.ID, r *report) {
	if len(s.reports) >= s.maxSenders {
		for q := range s.reports { // any one: map order is random
			delete(s.reports, q)
			s.stats.reportsDropped.Add(1)
			break
		}
	}
	s.reports[p] = r
}

// takeReportLocked returns and forgets p's report, nil if none.
func (s *Service) takeReportLocked(p peer.ID) *report {
	r := s.reports[p]
	if r != nil {
		delete(s.reports, p)
	}
	return r
}

func (snd *sender) isDead() bool {
	snd.mu.Lock()
	defer snd.mu.Unlock()
	return snd.dead
}

// retire marks snd dead if it is idle (see above) and returns what it had
// still to report (nil if nothing) and, if it had a stream, the call that
// ends it, to be made without s.mu held. It does not wait: ok is false if
// snd is not idle.
func (snd *sender) retire() (r *report, end func() error, ok bool) {
	select {
	case snd.lock <- struct{}{}:
	default:
		return nil, nil, false // a writer is busy
	}
	defer snd.release()
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if snd.closed || snd.dead || len(snd.pend) > 0 || snd.flushing || len(snd.waiters) > 0 {
		return nil, nil, false
	}
	ended := snd.back == nil || isClosed(snd.back.done)
	if !ended && (snd.st == nil || snd.unacked > 0) {
		// Messages in flight on a live stream, or refusals may still
		// come on a failed one.
		return nil, nil, false
	}
	if st := snd.st; st != nil {
		if ended {
			end = st.Reset
			if snd.unacked > 0 {
				snd.lost = true // as a failed write would have found
				snd.lostDests.merge(snd.dests)
			}
		} else {
			end = st.Close // nothing was accepted on it
		}
	}
	snd.watch.disarm()
	snd.dead = true
	snd.st, snd.back, snd.pend, snd.spare, snd.unacked, snd.dests = nil, nil, nil, nil, 0, dests{}
	r = &report{lost: snd.lost, dests: snd.lostDests, failed: snd.failed, refused: snd.sumRefusals()}
	if !r.lost && r.failed == nil && r.refused == nil {
		r = nil
	}
	return r, end, true
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sumRefusals returns and forgets all refusals, summed into one
// RefusedError for no destination in particular; nil if none.
func (snd *sender) sumRefusals() *RefusedError {
	r := &snd.refused
	if !r.any.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := &RefusedError{Peer: snd.peer}
	add := func(e *RefusedError) {
		sum.Count += e.Count
		sum.Code, sum.Reason = e.Code, e.Reason
	}
	for _, e := range r.byKey {
		add(e)
	}
	if r.other != nil {
		add(r.other)
	}
	clear(r.byKey)
	r.other = nil
	r.any.Store(false)
	return sum
}

// endGoingAway ends st, whose receiver said it is going away (a 'G'
// record, refuse.go), as Flush would but for no caller: what is queued on
// it is written, then its end, and the receiver's end awaited, so that
// its messages are delivered and the next Send opens a new stream. What
// may be lost is left for the next Flush to report. It holds the writer's
// token throughout, so a Flush waits for it; a receiver that takes longer
// than backWriteTimeout has the stream reset.
func (snd *sender) endGoingAway(st network.Stream, b *back) {
	ctx, cancel := context.WithTimeout(snd.svc.ctx, backWriteTimeout)
	defer cancel()
	if snd.acquire(ctx, nil, "ending the stream to") != nil {
		return // the service is closing, or a writer is stuck: its failure will tell
	}
	defer snd.release()
	snd.mu.Lock()
	if snd.dead || snd.closed || snd.st != st {
		snd.mu.Unlock()
		return // flushed, failed or replaced meanwhile
	}
	had, onStream := snd.unacked > 0, snd.dests
	batch, _ := snd.takeLocked()
	snd.st, snd.back, snd.unacked, snd.dests = nil, nil, 0, dests{}
	snd.pend, snd.spare = nil, nil
	snd.mu.Unlock()
	if testHookGoingAway != nil {
		testHookGoingAway()
	}
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	err := snd.watch.prepare(context.Background(), st, &snd.deadline)
	if err == nil && len(batch) > 0 {
		_, err = st.Write(batch)
	}
	if err == nil {
		err = st.CloseWrite()
	}
	if err == nil {
		<-b.done
		err = b.err
	}
	if err != nil {
		st.Reset()
		if had {
			snd.mu.Lock()
			snd.lost = true
			snd.lostDests.merge(onStream)
			snd.mu.Unlock()
		}
		return
	}
	st.Close()
}

// testHookGoingAway, if set (by tests), runs once endGoingAway holds the
// token and has taken the stream.
var testHookGoingAway func()

// streamEnded drops the queue's buffers once st's back channel has ended
// (the peer ended or reset the stream, or went away) if nothing is queued
// and no writer is busy: a sender whose peer is gone holds no buffer
// while it waits to report it or to be retired.
func (snd *sender) streamEnded(st network.Stream) {
	select {
	case snd.lock <- struct{}{}:
	default:
		return // the writer will find out
	}
	defer snd.release()
	snd.mu.Lock()
	if snd.st == st && len(snd.pend) == 0 && !snd.flushing {
		snd.pend, snd.spare = nil, nil
	}
	snd.mu.Unlock()
}

// endRetired ends the streams of senders retired since the last call. It
// runs without s.mu held: ending a stream writes to its connection.
func (s *Service) endRetired() {
	s.mu.Lock()
	ending := s.ending
	s.ending = nil
	s.mu.Unlock()
	for _, end := range ending {
		end()
	}
}
