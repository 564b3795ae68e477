package node

import (
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// memoryCounter wraps the resource manager to count the memory
// reservations it refuses (GateStats.MemoryRefused), each once, at the
// scope it was asked of: a connection's (QUIC grows its flow-control
// windows there), a peer's (yamux reserves every stream's receive window
// in a span of its peer's scope, first 256 KiB, then each growth up to
// 16 MiB) and a stream's (protocols' buffers: identify, ping, relay, hole
// punching). go-libp2p's metrics hook (rcmgr.MetricsReporter.BlockMemory)
// is called once by every scope that refuses on the way up, a span and
// its owner both, so it cannot count refusals.
type memoryCounter struct {
	network.ResourceManager
	refused *atomic.Uint64
}

// GetConnLimit passes go-libp2p's check of the connection manager's
// limits against the resource manager's through.
func (m *memoryCounter) GetConnLimit() int {
	if g, ok := m.ResourceManager.(interface{ GetConnLimit() int }); ok {
		return g.GetConnLimit()
	}
	return 0
}

func (m *memoryCounter) OpenConnection(dir network.Direction, usefd bool, endpoint ma.Multiaddr) (network.ConnManagementScope, error) {
	s, err := m.ResourceManager.OpenConnection(dir, usefd, endpoint)
	if err != nil {
		return nil, err
	}
	return &countedConn{ConnManagementScope: s, refused: m.refused}, nil
}

func (m *memoryCounter) OpenStream(p peer.ID, dir network.Direction) (network.StreamManagementScope, error) {
	s, err := m.ResourceManager.OpenStream(p, dir)
	if err != nil {
		return nil, err
	}
	return &countedStream{StreamManagementScope: s, refused: m.refused}, nil
}

// count counts err, a reservation's outcome, if it is a refusal.
func count(refused *atomic.Uint64, err error) error {
	if err != nil {
		refused.Add(1)
	}
	return err
}

type countedConn struct {
	network.ConnManagementScope
	refused *atomic.Uint64
}

func (s *countedConn) ReserveMemory(size int, prio uint8) error {
	return count(s.refused, s.ConnManagementScope.ReserveMemory(size, prio))
}

func (s *countedConn) BeginSpan() (network.ResourceScopeSpan, error) {
	sp, err := s.ConnManagementScope.BeginSpan()
	return countedSpanOf(sp, err, s.refused)
}

// PeerScope is the connection's peer's scope, nil (an untyped nil, as the
// upgrader tests) until the handshake names the peer.
func (s *countedConn) PeerScope() network.PeerScope {
	p := s.ConnManagementScope.PeerScope()
	if p == nil {
		return nil
	}
	return &countedPeer{PeerScope: p, refused: s.refused}
}

type countedStream struct {
	network.StreamManagementScope
	refused *atomic.Uint64
}

func (s *countedStream) ReserveMemory(size int, prio uint8) error {
	return count(s.refused, s.StreamManagementScope.ReserveMemory(size, prio))
}

func (s *countedStream) BeginSpan() (network.ResourceScopeSpan, error) {
	sp, err := s.StreamManagementScope.BeginSpan()
	return countedSpanOf(sp, err, s.refused)
}

func (s *countedStream) PeerScope() network.PeerScope {
	p := s.StreamManagementScope.PeerScope()
	if p == nil {
		return nil
	}
	return &countedPeer{PeerScope: p, refused: s.refused}
}

type countedPeer struct {
	network.PeerScope
	refused *atomic.Uint64
}

func (s *countedPeer) ReserveMemory(size int, prio uint8) error {
	return count(s.refused, s.PeerScope.ReserveMemory(size, prio))
}

func (s *countedPeer) BeginSpan() (network.ResourceScopeSpan, error) {
	sp, err := s.PeerScope.BeginSpan()
	return countedSpanOf(sp, err, s.refused)
}

type countedSpan struct {
	network.ResourceScopeSpan
	refused *atomic.Uint64
}

func (s *countedSpan) ReserveMemory(size int, prio uint8) error {
	return count(s.refused, s.ResourceScopeSpan.ReserveMemory(size, prio))
}

func (s *countedSpan) BeginSpan() (network.ResourceScopeSpan, error) {
	sp, err := s.ResourceScopeSpan.BeginSpan()
	return countedSpanOf(sp, err, s.refused)
}

// countedSpanOf wraps BeginSpan's result.
func countedSpanOf(sp network.ResourceScopeSpan, err error, refused *atomic.Uint64) (network.ResourceScopeSpan, error) {
	if err != nil {
		return nil, err
	}
	return &countedSpan{ResourceScopeSpan: sp, refused: refused}, nil
}
