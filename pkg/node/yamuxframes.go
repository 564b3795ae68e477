package node

import (
	"sync"
	"sync/atomic"
)

// Frames buffered in a yamux stream.
//
// go-yamux (v5.1.0) keeps each data frame a stream has received and not
// yet read in a slice of its own from go-buffer-pool (segmentedBuffer),
// while the resource manager counts the stream's receive window in
// bytes only. A peer that fills a stream's window with 1-byte frames
// makes the node hold 262,144 slices for 256 KiB counted: 6.6 MiB of
// heap, 25 times what it was allowed, on every stream the node does not
// read at once (one its handler holds unread, one waiting for a socket's
// Accept).
//
// So the node follows each stream's buffered frames as synGate hands
// them to go-yamux, and as the stream's reader consumes them
// (yamuxStream.Read): a stream whose buffered frames cost more
// (frameOverhead each) than max(yamuxFirstWindow, the bytes buffered)
// is reset, the frame that went beyond handed to go-yamux as a RST of
// the stream (its body discarded by the gate), the peer answered with a
// RST, the reset counted (GateStats.FramesReset). What a stream holds
// then stays within its bytes twice (go-buffer-pool's power-of-two
// rounding) plus one window or its bytes, whichever is more, beside the
// window the resource manager counts.
//
// Honest peers do not reach it: a frame of frameOverhead bytes or more
// never does (100-byte frames cost 0.32 of their bytes), smaller ones
// only once yamuxFirstWindow/frameOverhead (8,192) of them wait unread,
// and a reader that keeps up never lets frames accumulate.

// frameOverhead is what go-yamux holds per buffered data frame beyond
// its bytes, plus the node's own record of it: measured, 262,144 1-byte
// frames took 6.6 MiB, 26 bytes each (the slice header in
// segmentedBuffer.b, 24 bytes, and the frame's own allocation), so 25
// beyond the byte; 64-byte frames took 28 beyond theirs; the record is
// a frame's length here (4 bytes, twice while the slice holding it
// grows). 25+8 rounded to 32. Rounding of larger frames up to
// go-buffer-pool's powers of two is bounded by their bytes themselves.
const frameOverhead = 32

// frameLedger follows the data frames buffered in one connection's
// yamux streams, by stream ID: a stream is followed from its SYN (the
// peer's, admitted by synGate, or the node's, as written) until go-yamux
// forgets it (a RST either way, or both directions closed: a FIN each
// way, or the node closing its reading side and sending a FIN), when
// go-yamux drops any further frame of it unbuffered.
//
// A peer may open a stream with the ID of one go-yamux forgot (go-yamux
// lets it), and the node still holds the earlier stream, or has yet to
// accept it: so each stream's record is its own, bound to its stream
// by its place in go-yamux's accept queue (accepting), and the node's
// own ends of a stream (its FIN, its RST) are recorded by its record,
// never by ID. For the queue to be go-yamux's, the gate refuses a SYN
// once backlog streams wait to be accepted, before go-yamux would (it
// resets a stream beyond its accept backlog, unseen here).
type frameLedger struct {
	resets *atomic.Uint64 // streams reset for their frames; nil: not counted
	// unrecorded counts bytes read from followed streams beyond the
	// frames recorded for them (for tests: it should never happen).
	unrecorded atomic.Int64
	backlog    int // go-yamux's AcceptBacklog

	mu        sync.Mutex
	streams   map[uint32]*frameRecord
	accepting []*frameRecord // the peer's streams not yet accepted, in go-yamux's order
	closed    bool
}

// frameRecord is one stream's frames buffered in go-yamux.
type frameRecord struct {
	id       uint32
	frames   []uint32 // lengths of the frames buffered, from head
	head     int      // first frame not wholly read
	headRead uint32   // bytes read of frames[head]
	bytes    int64    // bytes buffered
	readDone bool     // no more data from the peer (FIN), or the node closed reading
	sentFIN  bool     // the node closed writing
	gone     bool     // no longer followed: go-yamux forgot the stream
}

func newFrameLedger(resets *atomic.Uint64, backlog int) *frameLedger {
	return &frameLedger{resets: resets, backlog: backlog, streams: map[uint32]*frameRecord{}}
}

// open follows stream id, a SYN of the node's opening it, and returns
// its record (nil once the session has ended): the node's go-yamux never
// reuses an ID of its own, so a record there is the stream's.
func (l *frameLedger) open(id uint32) *frameRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	r := l.streams[id]
	if r == nil {
		r = &frameRecord{id: id}
		l.streams[id] = r
	}
	return r
}

// openPeer follows stream id, a SYN of the peer's opening it, in a
// record of its own queued for the node's Accept (an earlier stream of
// the ID is one go-yamux forgot, or will refuse as a duplicate, ending
// the session). It says false, following nothing, when backlog streams
// already wait to be accepted: the stream is to be refused.
func (l *frameLedger) openPeer(id uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return true // the session is ending: nothing is followed
	}
	if len(l.accepting) >= l.backlog {
		return false
	}
	if old := l.streams[id]; old != nil {
		l.dropLocked(id, old)
	}
	r := &frameRecord{id: id}
	l.streams[id] = r
	l.accepting = append(l.accepting, r)
	return true
}

// accepted returns the record of the stream go-yamux's Accept returned,
// the first of those waiting (nil if it is not id: go-yamux took a
// stream the gate did not admit, which it does not).
func (l *frameLedger) accepted(id uint32) *frameRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.accepting) == 0 {
		return nil
	}
	r := l.accepting[0]
	l.accepting[0] = nil
	l.accepting = l.accepting[1:]
	if r.id != id {
		return nil
	}
	return r
}

// dropLocked stops following stream id.
func (l *frameLedger) dropLocked(id uint32, r *frameRecord) {
	r.gone = true
	r.frames = nil
	if l.streams[id] == r { // not a later stream reusing the ID
		delete(l.streams, id)
	}
}

// arrive records a data frame of length bytes for stream id, as it is
// handed to go-yamux, and says whether the stream must be reset instead:
// its buffered frames then cost more than max(yamuxFirstWindow, its
// bytes), and it is no longer followed.
func (l *frameLedger) arrive(id, length uint32) (reset bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.streams[id]
	if r == nil {
		return false
	}
	if len(r.frames) == cap(r.frames) && r.head >= len(r.frames)/2 && r.head > 0 {
		n := copy(r.frames, r.frames[r.head:])
		r.frames = r.frames[:n]
		r.head = 0
	}
	r.frames = append(r.frames, length)
	r.bytes += int64(length)
	if int64(len(r.frames)-r.head)*frameOverhead <= max(yamuxFirstWindow, r.bytes) {
		return false
	}
	l.dropLocked(id, r)
	if l.resets != nil {
		l.resets.Add(1)
	}
	return true
}

// consume records n bytes read from s.
func (l *frameLedger) consume(s *yamuxStream, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := s.rec
	if r == nil || r.gone {
		return
	}
	left := uint32(n)
	for left > 0 && r.head < len(r.frames) {
		rest := r.frames[r.head] - r.headRead
		if left < rest {
			r.headRead += left
			r.bytes -= int64(left)
			return
		}
		left -= rest
		r.bytes -= int64(rest)
		r.head++
		r.headRead = 0
	}
	if left > 0 {
		l.unrecorded.Add(int64(left))
	}
	if r.head == len(r.frames) {
		r.head = 0
		if cap(r.frames) > 1024 {
			r.frames = nil // a burst's record, not kept for the stream's life
		} else {
			r.frames = r.frames[:0]
		}
	}
}

// flags records what the peer's frame's flags say of stream id's end.
func (l *frameLedger) flags(id uint32, flags uint16) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.streams[id]
	if r == nil {
		return
	}
	switch {
	case flags&yamuxFlagRST != 0:
		l.dropLocked(id, r)
	case flags&yamuxFlagFIN != 0:
		r.readDone = true
		if r.sentFIN {
			l.dropLocked(id, r)
		}
	}
}

// closeSide records that the node closed one side of s, its reading side
// (read; go-yamux keeps buffering the peer's frames until the writing
// side closes too) or its writing side: go-yamux forgets the stream once
// both are, before the node's FIN is written.
func (l *frameLedger) closeSide(s *yamuxStream, read bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := s.rec; r != nil && !r.gone {
		if read {
			r.readDone = true
		} else {
			r.sentFIN = true
		}
		if r.readDone && r.sentFIN {
			l.dropLocked(r.id, r)
		}
	}
}

// drop stops following s: the node closed or reset it, and go-yamux
// forgot it.
func (l *frameLedger) drop(s *yamuxStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := s.rec; r != nil && !r.gone {
		l.dropLocked(r.id, r)
	}
}

// close stops following every stream: the session has ended.
func (l *frameLedger) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	clear(l.accepting)
	l.accepting = nil
	for id, r := range l.streams {
		l.dropLocked(id, r)
	}
}

// stat returns the streams followed and their bytes and frames
// buffered, for tests.
func (l *frameLedger) stat() (streams int, bytes, frames int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.streams {
		streams++
		bytes += r.bytes
		frames += int64(len(r.frames) - r.head)
	}
	return streams, bytes, frames
}
