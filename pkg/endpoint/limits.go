package endpoint

import (
	"fmt"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Per-peer limits. What one peer can make a Service hold is bounded these
// ways (and in bytes and time by the budgets in budget.go):
//
//   - one message: WithMaxMessageSize (default 64 MiB), checked against the
//     frame header before anything is allocated for it;
//   - its streams: WithMaxStreamsPerPeer (default 8) endpoint streams read
//     at once; a sender uses one at a time, so more mean a misbehaving
//     peer, and the extra ones are reset and counted in
//     Stats.StreamsRefused;
//   - memory allocated ahead of its bytes: WithMaxPrealloc (default one
//     maximum message per peer, four for all peers together);
//   - bytes in flight: each stream's flow-control window (yamux: up to
//     16 MiB a stream, within the resource manager's 32 MiB a connection,
//     see package node; QUIC has its own). A listener that does not return
//     stops its stream's reader, the window fills, and the sender blocks.
//
// Listeners run on the reader, so once a message is handed over the
// service holds nothing of it; a listener that keeps it (Delivery.Hold)
// keeps it on the peer's memory budget.
const (
	// DefaultMaxStreamsPerPeer is WithMaxStreamsPerPeer's default.
	DefaultMaxStreamsPerPeer = 8
	// preallocFree is the frame size up to which buffers are allocated
	// whole without drawing on the preallocation budget: package wire
	// allocates that much (4 MiB) on the word of a length field anyway.
	preallocFree = 4 << 20
)

// WithMaxStreamsPerPeer bounds the endpoint streams one peer may have open
// to this service at once (default DefaultMaxStreamsPerPeer, 1 to 1024).
// Streams beyond it are reset and counted in Stats.StreamsRefused.
func WithMaxStreamsPerPeer(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("%w: max streams per peer %d out of range [1, 1024]", ErrBadOption, n)
		}
		o.maxPeerStreams = n
		return nil
	}
}

// WithMaxPrealloc bounds the memory allocated for incoming messages ahead
// of their bytes. A frame over 4 MiB has its buffers allocated whole, once,
// only while the frames being read from its peer stay within perPeer bytes
// and those from all peers within total; otherwise its buffers grow as its
// bytes arrive (at most 4 MiB ahead of them), which costs copies but trusts
// nothing. So a peer that announces a large message and never sends it
// ties up at most perPeer bytes. Default: perPeer is the maximum message
// size, total four times that. 0 ≤ perPeer ≤ total ≤ 64 GiB; 0 turns
// preallocation off.
func WithMaxPrealloc(perPeer, total int64) Option {
	return func(o *options) error {
		if perPeer < 0 || total < perPeer || total > 64<<30 {
			return fmt.Errorf("%w: preallocation limits %d per peer, %d in all: want 0 ≤ per peer ≤ total ≤ 64 GiB",
				ErrBadOption, perPeer, total)
		}
		o.peerPrealloc, o.allPrealloc = perPeer, total
		return nil
	}
}

// resolveLimits fills in the defaults that depend on other options.
func (o *options) resolveLimits() error {
	if o.maxPeerStreams < 0 {
		o.maxPeerStreams = DefaultMaxStreamsPerPeer
	}
	if o.peerPrealloc < 0 {
		o.peerPrealloc, o.allPrealloc = o.maxMessage, 4*o.maxMessage
	}
	return nil
}

// peerIn is what one peer holds of the service's receiving side.
type peerIn struct {
	id       peer.ID
	streams  atomic.Int32 // endpoint streams being read; changed under Service.inMu
	prealloc int64        // bytes preallocated for its frames being read
	held     atomic.Int64 // bytes charged to its memory budget (budget.go)
	waiting  atomic.Int32 // its frames waiting for its own budget
}

// openIn registers a stream from p and returns its reader state, or nil
// when p already has the maximum number of streams open.
func (s *Service) openIn(p peer.ID, st network.Stream) *inStream {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	pi := s.in[p]
	if pi == nil {
		pi = &peerIn{id: p}
		s.in[p] = pi
	}
	if int(pi.streams.Load()) >= s.opts.maxPeerStreams {
		return nil
	}
	pi.streams.Add(1)
	in := newInStream(s, pi, st)
	s.streams[in] = struct{}{}
	return in
}

func (s *Service) closeIn(in *inStream) {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	delete(s.streams, in)
	pi := in.peer
	pi.streams.Add(-1)
	s.forgetLocked(pi)
}

// forget drops pi once it has no streams and nothing charged, so that a
// peer that comes back starts afresh but one that holds bytes keeps its
// budget across reconnections.
func (s *Service) forget(pi *peerIn) {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	s.forgetLocked(pi)
}

func (s *Service) forgetLocked(pi *peerIn) {
	if pi.streams.Load() == 0 && pi.prealloc == 0 && pi.held.Load() == 0 && s.in[pi.id] == pi {
		delete(s.in, pi.id)
	}
}

// reserve takes n bytes of preallocation for a frame from pi, if the
// budgets allow it.
func (s *Service) reserve(pi *peerIn, n int64) bool {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	if pi.prealloc+n > s.opts.peerPrealloc || s.prealloc+n > s.opts.allPrealloc {
		return false
	}
	pi.prealloc += n
	s.prealloc += n
	return true
}

func (s *Service) release(pi *peerIn, n int64) {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	pi.prealloc -= n
	s.prealloc -= n
	s.forgetLocked(pi)
}
