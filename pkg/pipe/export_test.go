package pipe

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// QueueLen reports how many messages wait in an input pipe's queue.
func QueueLen(p *InputPipe) int { return p.box.len() }

// BidiQueueLen reports how many messages wait in a Bidi's queue.
func BidiQueueLen(b *Bidi) int { return b.box.len() }

// BacklogLen reports how many connections wait for Accept.
func BacklogLen(l *Listener) int { return len(l.accept) }

// ProofStatement is what a binder signs (proof.go), for hostile peers in
// tests.
var ProofStatement = proofStatement

// IndexSize reports how many bindings s keeps from neighbour p
// (referral.go).
func IndexSize(s *Service, p peer.ID) int { return s.index.size(p) }

// PendingSize reports how many unanswered askers s remembers.
func PendingSize(s *Service) int { return s.pending.size() }

// SetPendingClock has s stamp and expire the askers it remembers with
// now instead of time.Now.
func SetPendingClock(s *Service, now func() time.Time) {
	s.pending.mu.Lock()
	defer s.pending.mu.Unlock()
	s.pending.clock = now
}

// SenderTagged reports whether s remembers having tagged p as a sender.
func SenderTagged(s *Service, p peer.ID) bool {
	_, ok := s.senders.Load(p)
	return ok
}

// SetQueryWrittenHook sets testHookQueryWritten: f runs in a binding
// query between writing the query and ending the stream.
func SetQueryWrittenHook(f func()) { testHookQueryWritten = f }

// FlightWaiters is how many Resolve callers wait on shared resolutions.
func FlightWaiters(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.flights {
		n += f.waiters
	}
	return n
}

// ConnID is b's connection ID, for tests that speak BidiService.
func ConnID(b *Bidi) string { return b.conn }

// SetFlushHooks sets testHookFlushWaits and testHookPeerFlushed (loss.go).
func SetFlushHooks(waits, flushed func()) { testHookFlushWaits, testHookPeerFlushed = waits, flushed }

// SetRefusalPeers sets how many peers' refusals s sends at once
// (maxRefusalPeers otherwise), so that a test can exceed it with a few
// peers.
func SetRefusalPeers(s *Service, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusalPeers = n
}

// RefusalPeers reports how many peers' refusals s is sending: one
// goroutine each.
func RefusalPeers(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refusals)
}

// SetMaxBoundTo sets how many peers each output pipe of s remembers
// having sent to (maxBoundTo otherwise), so that a test can exceed it
// with a few peers.
func SetMaxBoundTo(s *Service, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxBoundTo = n
}

// BoundTo reports how many peers o remembers having sent to, and whether
// it has sent to more than it remembers.
func BoundTo(o *OutputPipe) (n int, all bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.boundTo), o.boundToAll
}

// SentIndex reports what s keeps for refusals its Flushes learn of on
// another output pipe's behalf: the (peer, key) pairs some open output
// pipe sent to, the keys whose pipes take every peer's, and the counts
// kept.
func SentIndex(s *Service) (peers, all, kept int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sentPeers), len(s.sentAll), len(s.undelivered)
}
