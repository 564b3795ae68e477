package endpoint

import "github.com/libp2p/go-libp2p/core/peer"

// SetMaxSenders sets the sender table's bound (maxSenders) of s.
func SetMaxSenders(s *Service, n int) {
	s.mu.Lock()
	s.maxSenders, s.sweepAt = n, n
	s.mu.Unlock()
}

// Senders returns how many senders s keeps and the bytes held by the
// queue buffers of those whose stream is over.
func Senders(s *Service) (n, idleBytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, snd := range s.senders {
		snd.mu.Lock()
		if snd.back == nil || isClosed(snd.back.done) {
			idleBytes += cap(snd.pend) + cap(snd.spare)
		}
		snd.mu.Unlock()
	}
	return len(s.senders), idleBytes
}

// HasSender reports whether s keeps a sender for p.
func HasSender(s *Service, p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.senders[p] != nil
}

// StreamEnded reports whether the stream of s's sender for p, if any, is
// over: flushed, failed, or ended by the peer (its back channel ended).
func StreamEnded(s *Service, p peer.ID) bool {
	s.mu.Lock()
	snd := s.senders[p]
	s.mu.Unlock()
	if snd == nil {
		return true
	}
	snd.mu.Lock()
	defer snd.mu.Unlock()
	return snd.back == nil || isClosed(snd.back.done)
}

// RetireSender retires s's sender for p as a sweep would, but leaves the
// shortcuts to it in place, as a Send that looked it up just before the
// sweep holds it. It reports whether the sender was idle.
func RetireSender(s *Service, p peer.ID) bool {
	s.mu.Lock()
	snd := s.senders[p]
	if snd == nil {
		s.mu.Unlock()
		return false
	}
	r, end, ok := snd.retire()
	if ok {
		delete(s.senders, p)
		if r != nil {
			s.keepReportLocked(p, r)
		}
	}
	s.mu.Unlock()
	if end != nil {
		end()
	}
	return ok
}

// SetLargePrepareHook makes every large Send call f just before its
// write is prepared (nil: none). Set it only while no Send runs.
func SetLargePrepareHook(f func()) { testHookLargePrepare = f }

// SetInterruptHook sets testHookInterrupt: f runs for each sender a
// SendGroup's Close visits.
func SetInterruptHook(f func()) { testHookInterrupt = f }

// SetTakeHook sets testHookTake: f runs, with snd.mu held, with how many
// Sends waiting for room a batch taken woke.
func SetTakeHook(f func(woken int)) { testHookTake = f }

// HoldWriter takes the writer's token of s's sender for p, as a write in
// progress holds it, until the function returned is called: Sends then
// queue, and wait once the queue is full.
func HoldWriter(s *Service, p peer.ID) (release func()) {
	s.mu.Lock()
	snd := s.senders[p]
	s.mu.Unlock()
	snd.lock <- struct{}{}
	return func() { <-snd.lock }
}

// SetGoingAwayHook sets testHookGoingAway.
func SetGoingAwayHook(f func()) { testHookGoingAway = f }
