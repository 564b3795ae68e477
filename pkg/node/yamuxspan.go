package node

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
)

// The node's yamux reserves each stream's first receive window before
// go-yamux (v5.1.0) does, so that a refusal costs the one stream, not
// the connection. go-yamux reserves the window (256 KiB, in a span of
// the peer's scope) as a stream opens, and on refusal:
//
//   - for a stream the peer opens (Session.incomingStream, called from
//     its receive loop on a frame with the SYN flag), returns the error
//     to the receive loop, which ends the session: every stream of the
//     connection is reset and the connection closed, without a GoAway;
//   - for a stream this node opens (Session.OpenStream), fails the open;
//   - for a window's growth (Stream.sendWindowUpdate), keeps the window
//     as it is.
//
// So once the node's memory (or the peer's) was full, every peer opening
// a stream lost its connection, honest peers too: a peer holding streams
// the node does not read could make it drop others' connections. Now the
// window is reserved when the SYN frame is read, before yamux sees it
// (synGate), and when a stream is opened, before yamux opens it
// (yamuxMuxedConn.OpenStream); go-yamux's own first reservation takes one of
// these (yamuxMemory), so it is never refused. A refused SYN is stripped
// of its flag (yamux then drops the stream's frames as those of a stream
// it reset) and answered with a reset of that stream; a refused open
// fails. Both are counted (GateStats.MemoryRefused).
//
// yamuxFirstWindow is go-yamux's initialStreamWindow.
const yamuxFirstWindow = 256 << 10

// yamux frame header (go-yamux's spec.md): version, type, flags, stream
// ID, length.
const (
	yamuxHeaderSize    = 12
	yamuxVersion       = 0
	yamuxTypeData      = 0
	yamuxTypeWindowUpd = 1
	yamuxFlagSYN       = 1
	yamuxFlagFIN       = 4
	yamuxFlagRST       = 8
)

// yamuxMemory holds the first windows reserved ahead for one
// connection's streams, each in a span of the peer's scope, until
// go-yamux reserves a first window: each reservation ahead is followed
// by one of go-yamux's (or by none, when the open fails before it, or
// the session is ending), so the one it takes need not be the one
// reserved for its own stream.
type yamuxMemory struct {
	scope network.PeerScope
	live  *atomic.Int64 // spans begun and not ended, for tests; nil: not counted
	// unready counts the first windows go-yamux reserved with none
	// reserved ahead left to take (for tests: it should never happen;
	// nil: not counted).
	unready *atomic.Int64

	mu     sync.Mutex
	ready  []network.ResourceScopeSpan
	closed bool
}

// begin begins a span of the peer's scope and reserves size in it; a
// refused span is ended.
func (m *yamuxMemory) begin(size int) (network.ResourceScopeSpan, error) {
	sp, err := m.scope.BeginSpan()
	if err != nil {
		return nil, err
	}
	if m.live != nil {
		m.live.Add(1)
	}
	sp = &liveSpan{ResourceScopeSpan: sp, live: m.live}
	if err := sp.ReserveMemory(size, 255); err != nil {
		sp.Done()
		return nil, err
	}
	return sp, nil
}

// prepare reserves a stream's first window ahead.
func (m *yamuxMemory) prepare() error {
	sp, err := m.begin(yamuxFirstWindow)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		sp.Done()
		return net.ErrClosed
	}
	m.ready = append(m.ready, sp)
	return nil
}

// take returns a window reserved ahead, or nil and whether the
// connection is closed.
func (m *yamuxMemory) take() (network.ResourceScopeSpan, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ready) == 0 {
		return nil, m.closed
	}
	sp := m.ready[len(m.ready)-1]
	m.ready[len(m.ready)-1] = nil
	m.ready = m.ready[:len(m.ready)-1]
	return sp, false
}

// unprepare ends a window reserved ahead that no stream will take.
func (m *yamuxMemory) unprepare() {
	if sp, _ := m.take(); sp != nil {
		sp.Done()
	}
}

// close ends the windows reserved ahead; the connection is closed.
func (m *yamuxMemory) close() {
	m.mu.Lock()
	ready := m.ready
	m.ready, m.closed = nil, true
	m.mu.Unlock()
	for _, sp := range ready {
		sp.Done()
	}
}

// liveSpan is a span counted in yamuxMemory.live until its Done,
// which it passes on once, however often it is called.
type liveSpan struct {
	network.ResourceScopeSpan
	live *atomic.Int64
	done atomic.Bool
}

func (s *liveSpan) Done() {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	if s.live != nil {
		s.live.Add(-1)
	}
	s.ResourceScopeSpan.Done()
}

// yamuxScope is the peer scope the node's yamux reserves its streams'
// windows in: its spans take their first window from those reserved
// ahead (yamuxMemory).
type yamuxScope struct {
	network.PeerScope
	mem *yamuxMemory
}

func (s yamuxScope) BeginSpan() (network.ResourceScopeSpan, error) {
	return &yamuxSpan{mem: s.mem}, nil
}

// errNoSpan answers what go-yamux never asks of its spans (Stat,
// BeginSpan) before their first reservation.
var errNoSpan = errors.New("node: yamux span holds no reservation yet")

// yamuxSpan is a yamux stream's span: at its first reservation it takes
// a window reserved ahead, or, if none is left (go-yamux used
// otherwise than through synGate and yamuxMuxedConn), reserves one of its
// own, ended at once if refused (go-yamux drops a refused span without
// ending it, which would hold the peer's scope for the node's life);
// once the connection is closed (a stream opened as the session ends),
// it reserves nothing.
type yamuxSpan struct {
	mem *yamuxMemory

	mu    sync.Mutex
	inner network.ResourceScopeSpan // nil until the first reservation
	done  bool
}

func (s *yamuxSpan) ReserveMemory(size int, prio uint8) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return net.ErrClosed
	}
	if s.inner != nil {
		return s.inner.ReserveMemory(size, prio)
	}
	if size == yamuxFirstWindow {
		sp, closed := s.mem.take()
		switch {
		case sp != nil:
			s.inner = sp
			return nil
		case closed:
			// The session is ending (the windows reserved ahead ended
			// with the connection): no stream is opened any more.
			return net.ErrClosed
		case s.mem.unready != nil:
			s.mem.unready.Add(1)
		}
	}
	sp, err := s.mem.begin(size)
	if err != nil {
		return err
	}
	s.inner = sp
	return nil
}

func (s *yamuxSpan) ReleaseMemory(size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner != nil {
		s.inner.ReleaseMemory(size)
	}
}

func (s *yamuxSpan) Stat() network.ScopeStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner == nil {
		return network.ScopeStat{}
	}
	return s.inner.Stat()
}

func (s *yamuxSpan) BeginSpan() (network.ResourceScopeSpan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner == nil {
		return nil, errNoSpan
	}
	return s.inner.BeginSpan()
}

// Done ends the span; once, however often it is called.
func (s *yamuxSpan) Done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	if s.inner != nil {
		s.inner.Done()
	}
}

// synGate is the connection yamux reads from: it reads each frame's
// header whole before handing it on, and for a SYN (a new stream from
// the peer) reserves the stream's first window ahead; if that is
// refused, it clears the SYN flag and resets the stream. It follows the
// data frames each stream buffers (frameLedger, given one) and resets a
// stream whose frames cost too much (yamuxframes.go): the frame is
// handed on as a RST of the stream, its body discarded. go-yamux reads
// a header with one io.ReadFull and a data frame's body by its length,
// never past the frame, so the frames it reads are the frames this
// reads; it writes each frame with one Write, so the frames this writes
// on are whole.
type synGate struct {
	*coalescingConn
	mem    *yamuxMemory
	ledger *frameLedger // nil: frames not followed

	hdr  [yamuxHeaderSize]byte
	pos  int   // header bytes handed on; yamuxHeaderSize: none pending
	body int64 // body bytes of the current frame not yet handed on
	skip int64 // body bytes of a frame turned into a RST, to discard
}

func newSynGate(c *coalescingConn, mem *yamuxMemory, ledger *frameLedger) *synGate {
	return &synGate{coalescingConn: c, mem: mem, ledger: ledger, pos: yamuxHeaderSize}
}

func (g *synGate) Read(p []byte) (int, error) {
	if g.pos == yamuxHeaderSize && g.body == 0 {
		if g.skip > 0 {
			n, err := io.CopyN(io.Discard, g.coalescingConn, g.skip)
			g.skip -= n
			if err != nil {
				return 0, err
			}
		}
		if _, err := io.ReadFull(g.coalescingConn, g.hdr[:]); err != nil {
			return 0, err
		}
		g.pos = 0
		if g.hdr[0] == yamuxVersion && g.hdr[1] == yamuxTypeData {
			g.body = int64(binary.BigEndian.Uint32(g.hdr[8:12]))
		}
		g.admit()
	}
	if g.pos < yamuxHeaderSize {
		n := copy(p, g.hdr[g.pos:])
		g.pos += n
		return n, nil
	}
	if int64(len(p)) > g.body {
		p = p[:g.body]
	}
	n, err := g.coalescingConn.Read(p)
	g.body -= int64(n)
	return n, err
}

// admit reserves ahead the first window of the stream a SYN opens and
// queues its record for the node's Accept, or, with no room for either
// (the accept backlog full: go-yamux would reset the stream itself),
// clears its SYN and resets the stream; then records a data frame in
// the ledger, or turns it into a RST of its stream if the ledger says
// so. Frames yamux refuses on their own (another version, a type it
// does not know) pass as they are.
func (g *synGate) admit() {
	flags := binary.BigEndian.Uint16(g.hdr[2:4])
	t := g.hdr[1]
	if g.hdr[0] != yamuxVersion || t != yamuxTypeData && t != yamuxTypeWindowUpd {
		return
	}
	id := binary.BigEndian.Uint32(g.hdr[4:8])
	if flags&yamuxFlagSYN != 0 {
		refused := g.mem.prepare() != nil
		if !refused && g.ledger != nil && !g.ledger.openPeer(id) {
			g.mem.unprepare() // the accept backlog is full
			refused = true
		}
		if refused {
			// As a RST, not the frame without its SYN: a SYN naming a
			// stream go-yamux has open (the peer's duplicate) would
			// otherwise hand it the frame's data, which nothing followed.
			g.resetFrame(id)
			if g.ledger != nil {
				g.ledger.flags(id, yamuxFlagRST)
			}
			return
		}
	}
	if g.ledger == nil {
		return
	}
	if t == yamuxTypeData && g.body > 0 && g.ledger.arrive(id, uint32(g.body)) {
		g.resetFrame(id)
		return
	}
	if flags&(yamuxFlagFIN|yamuxFlagRST) != 0 {
		g.ledger.flags(id, flags)
	}
}

// resetFrame hands the frame on as a RST of stream id, its body
// discarded, and answers the peer with a RST: go-yamux takes the RST as
// the peer's and forgets the stream (if it had it), dropping its later
// frames.
func (g *synGate) resetFrame(id uint32) {
	g.hdr[1] = yamuxTypeWindowUpd
	binary.BigEndian.PutUint16(g.hdr[2:4], yamuxFlagRST)
	binary.BigEndian.PutUint32(g.hdr[8:12], 0)
	g.skip, g.body = g.body, 0
	g.reset(id)
}

// reset answers the peer with a RST of stream id.
func (g *synGate) reset(id uint32) {
	var rst [yamuxHeaderSize]byte
	rst[0], rst[1] = yamuxVersion, yamuxTypeWindowUpd
	binary.BigEndian.PutUint16(rst[2:4], yamuxFlagRST)
	binary.BigEndian.PutUint32(rst[4:8], id)
	// One frame, one Write, as yamux's own: frames stay whole. A failed
	// write fails the connection's reads too (coalescingConn).
	g.coalescingConn.Write(rst[:])
}

// Write writes one of yamux's frames, recording in the ledger the
// streams it opens, before the peer can send on them. (The node's own
// ends of its streams are recorded by yamuxStream, by record: a FIN or
// RST written here may be that of a stream whose ID the peer has
// reused since.)
func (g *synGate) Write(p []byte) (int, error) {
	if g.ledger != nil && len(p) >= yamuxHeaderSize && p[0] == yamuxVersion && (p[1] == yamuxTypeData || p[1] == yamuxTypeWindowUpd) &&
		binary.BigEndian.Uint16(p[2:4])&yamuxFlagSYN != 0 {
		g.ledger.open(binary.BigEndian.Uint32(p[4:8]))
	}
	return g.coalescingConn.Write(p)
}

// Close stops following frames, ends the windows reserved ahead, then
// closes the connection.
func (g *synGate) Close() error {
	if g.ledger != nil {
		g.ledger.close()
	}
	g.mem.close()
	return g.coalescingConn.Close()
}
