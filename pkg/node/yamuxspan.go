package node

import (
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
)

// yamuxScope is the peer scope the node's yamux reserves its streams'
// receive windows in. Its spans end themselves when their first
// reservation is refused: go-yamux (v5.1.0, Session.OpenStream and
// incomingStream) begins a span for each new stream, reserves the
// stream's first window in it, and when that is refused returns without
// ending the span, which then holds its peer's scope in the resource
// manager for the node's life. A peer that makes the node refuse the
// window (GateStats.MemoryRefused), each time under a new identity,
// would grow the node's memory by a peer scope a connection, without
// bound. A span whose first reservation was refused holds nothing, and
// yamux drops it: ending it is what yamux omits.
type yamuxScope struct {
	network.PeerScope
	live *atomic.Int64 // spans begun and not ended, for tests; nil: not counted
}

func (s yamuxScope) BeginSpan() (network.ResourceScopeSpan, error) {
	sp, err := s.PeerScope.BeginSpan()
	if err != nil {
		return nil, err
	}
	if s.live != nil {
		s.live.Add(1)
	}
	return &yamuxSpan{ResourceScopeSpan: sp, live: s.live}, nil
}

// yamuxSpan is a span of yamuxScope.
type yamuxSpan struct {
	network.ResourceScopeSpan
	live     *atomic.Int64
	reserved atomic.Bool // a reservation succeeded: yamux ends the span itself
	done     atomic.Bool
}

func (s *yamuxSpan) ReserveMemory(size int, prio uint8) error {
	err := s.ResourceScopeSpan.ReserveMemory(size, prio)
	if err == nil {
		s.reserved.Store(true)
	} else if !s.reserved.Load() {
		s.Done()
	}
	return err
}

// Done ends the span; once, however often it is called.
func (s *yamuxSpan) Done() {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	if s.live != nil {
		s.live.Add(-1)
	}
	s.ResourceScopeSpan.Done()
}
