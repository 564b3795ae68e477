package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
)

// TestFrameLedger: a stream is reset once its buffered frames cost more
// than max(a first window, their bytes), not before; reads pop the
// frames they consume; a stream is no longer followed once go-yamux
// forgets it.
func TestFrameLedger(t *testing.T) {
	const small = yamuxFirstWindow / frameOverhead // frames of any size that never reset
	for _, c := range []struct {
		name   string
		frames int
		size   uint32
		reset  int // the frame that resets the stream, from 1; 0: none
	}{
		{"1-byte frames", small + 10, 1, small + 1},
		{"31-byte frames", small + 10, 31, small + 1},
		{"32-byte frames, a window and more", 2 * small, frameOverhead, 0},
		{"100-byte frames, a window", yamuxFirstWindow / 100, 100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var resets atomic.Uint64
			l := newFrameLedger(&resets, 1)
			l.open(1)
			at := 0
			for i := 1; i <= c.frames && at == 0; i++ {
				if l.arrive(1, c.size) {
					at = i
				}
			}
			if at != c.reset {
				t.Fatalf("reset at frame %d, want %d", at, c.reset)
			}
			n, _, _ := l.stat()
			if want := uint64(min(at, 1)); resets.Load() != want || n != 1-int(want) {
				t.Fatalf("%d resets counted, %d streams followed; want %d, %d", resets.Load(), n, want, 1-want)
			}
		})
	}

	t.Run("reads pop frames", func(t *testing.T) {
		l := newFrameLedger(nil, 1)
		s := &yamuxStream{ledger: l, rec: l.open(1)}
		for _, size := range []uint32{1, 2, 3} {
			l.arrive(1, size)
		}
		l.consume(s, 4)
		if _, bytes, frames := l.stat(); bytes != 2 || frames != 1 {
			t.Fatalf("after 4 of 6 bytes read: %d bytes, %d frames; want 2, 1", bytes, frames)
		}
		l.consume(s, 2)
		if _, bytes, frames := l.stat(); bytes != 0 || frames != 0 || l.unrecorded.Load() != 0 {
			t.Fatalf("all read: %d bytes, %d frames, %d unrecorded; want none", bytes, frames, l.unrecorded.Load())
		}
		l.consume(s, 1)
		if l.unrecorded.Load() != 1 {
			t.Fatalf("a byte read beyond the frames: %d unrecorded, want 1", l.unrecorded.Load())
		}
	})

	for _, c := range []struct {
		name string
		end  func(l *frameLedger, s *yamuxStream)
		gone bool
	}{
		{"peer's FIN", func(l *frameLedger, _ *yamuxStream) { l.flags(1, yamuxFlagFIN) }, false},
		{"node's FIN", func(l *frameLedger, s *yamuxStream) { l.closeSide(s, false) }, false},
		{"node's CloseRead", func(l *frameLedger, s *yamuxStream) { l.closeSide(s, true) }, false},
		{"FIN both ways", func(l *frameLedger, s *yamuxStream) { l.closeSide(s, false); l.flags(1, yamuxFlagFIN) }, true},
		{"node's CloseRead and FIN", func(l *frameLedger, s *yamuxStream) { l.closeSide(s, true); l.closeSide(s, false) }, true},
		{"peer's RST", func(l *frameLedger, _ *yamuxStream) { l.flags(1, yamuxFlagRST) }, true},
		{"node's RST", func(l *frameLedger, s *yamuxStream) { l.drop(s) }, true},
		{"session closed", func(l *frameLedger, _ *yamuxStream) { l.close() }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newFrameLedger(nil, 1)
			if !l.openPeer(1) {
				t.Fatal("a first stream refused")
			}
			s := &yamuxStream{ledger: l, rec: l.accepted(1)}
			l.arrive(1, 10)
			c.end(l, s)
			if n, _, _ := l.stat(); s.rec.gone != c.gone || (n == 0) != c.gone {
				t.Fatalf("stream gone %v, %d followed; want gone %v", s.rec.gone, n, c.gone)
			}
		})
	}

	t.Run("accept backlog", func(t *testing.T) {
		l := newFrameLedger(nil, 2)
		if !l.openPeer(1) || !l.openPeer(3) || l.openPeer(5) {
			t.Fatal("want 2 streams waiting to be accepted, the third refused")
		}
		if r := l.accepted(1); r == nil || r.id != 1 || !l.openPeer(5) {
			t.Fatal("want stream 1 accepted, then 5 admitted")
		}
	})
}

// rawYamuxPeer is a peer writing yamux frames byte for byte to the
// node's own session (newYamuxMuxedConn, as coalescingMuxer builds it)
// over net.Pipes: the node's gate reads what it writes, and the node's
// writes wait until it reads them, which it starts doing at read.
type rawYamuxPeer struct {
	in, out  net.Conn                   // the node's input and output
	hdrs     chan [yamuxHeaderSize]byte // the headers the node wrote, in order
	stop     chan struct{}              // the test is over: headers are dropped
	done     chan struct{}              // the reader is gone
	readOnce sync.Once
}

func newRawYamuxPeer(t *testing.T) (*rawYamuxPeer, *yamuxMuxedConn, *atomic.Uint64) {
	return newRawYamuxPeerWindows(t, 16)
}

// newRawYamuxPeerWindows is newRawYamuxPeer with room for windows
// streams' first windows.
func newRawYamuxPeerWindows(t *testing.T, windows int) (*rawYamuxPeer, *yamuxMuxedConn, *atomic.Uint64) {
	scope, _ := gatePeerScope(t, windows)
	inR, inW := net.Pipe()
	outR, outW := net.Pipe()
	var resets atomic.Uint64
	cfg := yamux.DefaultTransport.Config()
	conn, err := newYamuxMuxedConn(newCoalescingConn(splitConn{inR, outW}), true, cfg,
		&yamuxMemory{scope: scope}, newFrameLedger(&resets, cfg.AcceptBacklog))
	if err != nil {
		t.Fatal(err)
	}
	p := &rawYamuxPeer{in: inW, out: outR, hdrs: make(chan [yamuxHeaderSize]byte, 1024),
		stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() {
		close(p.stop)
		p.read() // if it had not begun: the session's end may write
		conn.Close()
		inW.Close()
		<-p.done
	})
	return p, conn, &resets
}

// read starts reading what the node writes (once).
func (p *rawYamuxPeer) read() {
	p.readOnce.Do(func() {
		go func() {
			defer close(p.done)
			defer close(p.hdrs)
			var tr frameTracker
			buf := make([]byte, 32<<10)
			for {
				n, err := p.out.Read(buf)
				tr.feed(buf[:n], func(h []byte) {
					select {
					case p.hdrs <- [yamuxHeaderSize]byte(h):
					case <-p.stop:
					}
				})
				if err != nil {
					return
				}
			}
		}()
	})
}

func (p *rawYamuxPeer) write(t *testing.T, frames ...[]byte) {
	t.Helper()
	if _, err := p.in.Write(bytes.Join(frames, nil)); err != nil {
		t.Fatal(err)
	}
}

// until reads the node's frames up to the first whose header is match's,
// and returns the IDs of the streams it reset before it.
func (p *rawYamuxPeer) until(t *testing.T, what string, match func(h []byte) bool) (rsts []uint32) {
	t.Helper()
	p.read()
	for h := range p.hdrs {
		if match(h[:]) {
			return rsts
		}
		if (h[1] == yamuxTypeData || h[1] == yamuxTypeWindowUpd) && binary.BigEndian.Uint16(h[2:4])&yamuxFlagRST != 0 {
			rsts = append(rsts, binary.BigEndian.Uint32(h[4:8]))
		}
	}
	t.Fatalf("the node's session ended before %s", what)
	return nil
}

// sync pings the node and reads up to its pong: the node has then
// handled every frame written before. It returns the IDs of the streams
// the node reset meanwhile.
func (p *rawYamuxPeer) sync(t *testing.T, id uint32) []uint32 {
	t.Helper()
	const typePing, flagACK = 2, 2
	p.write(t, yamuxFrame(typePing, yamuxFlagSYN, 0, id, nil))
	return p.until(t, fmt.Sprintf("pong %d", id), func(h []byte) bool {
		return h[1] == typePing && binary.BigEndian.Uint16(h[2:4]) == flagACK && binary.BigEndian.Uint32(h[8:12]) == id
	})
}

// TestStreamIDReusedStaysFollowed: a peer that resets a stream and
// opens another with its ID (go-yamux lets it) while the node still
// holds the first, or has yet to accept it, cannot make the node's end
// of the first stop following the second: the second, sent 1-byte
// frames it does not read, is reset for them.
func TestStreamIDReusedStaysFollowed(t *testing.T) {
	syn := func(flags uint16) []byte { return yamuxFrame(yamuxTypeWindowUpd, yamuxFlagSYN|flags, 1, 0, nil) }
	tiny := bytes.Repeat(yamuxFrame(yamuxTypeData, 0, 1, 1, []byte("x")), yamuxFirstWindow/frameOverhead+100)
	for _, c := range []struct {
		name string
		// first opens stream 1, lets the node end it, and opens another
		// stream 1, which it returns, accepted.
		first func(t *testing.T, p *rawYamuxPeer, conn *yamuxMuxedConn) network.MuxedStream
	}{
		{"reset by the peer before its accept", func(t *testing.T, p *rawYamuxPeer, conn *yamuxMuxedConn) network.MuxedStream {
			p.write(t, syn(yamuxFlagRST), syn(0))
			p.sync(t, 1) // both in go-yamux's accept queue
			first := accept(t, conn)
			first.Reset() // as go-libp2p does with a stream its negotiation fails
			return accept(t, conn)
		}},
		{"reset by the node, its RST written after the ID's reuse", func(t *testing.T, p *rawYamuxPeer, conn *yamuxMuxedConn) network.MuxedStream {
			p.write(t, syn(0))
			first := accept(t, conn)
			// More than the node's writer buffers: its RST waits behind.
			if _, err := first.Write(make([]byte, 2*coalesceMax)); err != nil {
				t.Fatal(err)
			}
			first.Reset()
			p.write(t, syn(0))
			second := accept(t, conn)
			p.until(t, "the node's RST", func(h []byte) bool {
				return h[1] == yamuxTypeWindowUpd && binary.BigEndian.Uint16(h[2:4]) == yamuxFlagRST && binary.BigEndian.Uint32(h[4:8]) == 1
			})
			return second
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, conn, resets := newRawYamuxPeer(t)
			s := c.first(t, p, conn)
			defer s.Reset()
			p.write(t, tiny)
			rsts := p.sync(t, 2)
			if fmt.Sprint(rsts) != "[1]" || resets.Load() != 1 {
				t.Fatalf("%d 1-byte frames sent to stream 1, unread: the node reset streams %v, counted %d; want [1], 1",
					yamuxFirstWindow/frameOverhead+100, rsts, resets.Load())
			}
		})
	}
}

// TestRefusedDuplicateSYNDeliversNothing: a SYN the gate refuses (no
// room for another stream's window) that names a stream go-yamux has
// open (the peer's duplicate SYN) goes on as a RST of that stream. Handed
// on as the frame without its SYN, as before, its data went into the
// open stream, which the ledger did not follow: FuzzSynGateYamux's "1
// bytes read beyond the frames recorded".
func TestRefusedDuplicateSYNDeliversNothing(t *testing.T) {
	p, conn, _ := newRawYamuxPeerWindows(t, 1)
	p.write(t, yamuxFrame(yamuxTypeWindowUpd, yamuxFlagSYN, 1, 0, nil))
	s := accept(t, conn) // holds the one window
	defer s.Reset()
	p.write(t, yamuxFrame(yamuxTypeData, yamuxFlagSYN, 1, 3, []byte("dup")))
	rsts := p.sync(t, 1)
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := s.Read(make([]byte, 8))
	if n != 0 || !errors.Is(err, network.ErrReset) || fmt.Sprint(rsts) != "[1]" || conn.ledger.unrecorded.Load() != 0 {
		t.Fatalf("a refused duplicate SYN of stream 1 with 3 bytes: the stream read %d bytes (%v), the node reset %v, %d bytes unrecorded; want none, reset, [1], none",
			n, err, rsts, conn.ledger.unrecorded.Load())
	}
}

func accept(t *testing.T, conn *yamuxMuxedConn) network.MuxedStream {
	t.Helper()
	s, err := conn.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
