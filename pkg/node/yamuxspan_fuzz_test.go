package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"
)

// yamuxFrame encodes one yamux frame (go-yamux's spec.md): version 0,
// typ, flags, stream ID, length, then body, which for a data frame may
// be shorter than length (a frame cut off).
func yamuxFrame(typ byte, flags uint16, id, length uint32, body []byte) []byte {
	b := make([]byte, yamuxHeaderSize, yamuxHeaderSize+len(body))
	b[0], b[1] = yamuxVersion, typ
	binary.BigEndian.PutUint16(b[2:4], flags)
	binary.BigEndian.PutUint32(b[4:8], id)
	binary.BigEndian.PutUint32(b[8:12], length)
	return append(b, body...)
}

// splitConn reads from one net.Pipe and writes to another, so that a
// synGate's input can end (its writer closes its pipe) while what the
// gate writes back (its RSTs) is still read to the end.
type splitConn struct {
	net.Conn // the read side
	w        net.Conn
}

func (c splitConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c splitConn) Close() error {
	c.w.Close()
	return c.Conn.Close()
}

// gatePeerScope is a peer scope of a real resource manager whose peers
// may hold windows yamux first windows, no more.
func gatePeerScope(t *testing.T, windows int) (network.PeerScope, func() int64) {
	mem := rcmgr.LimitVal64(windows * yamuxFirstWindow)
	if windows == 0 {
		mem = rcmgr.BlockAllLimit64
	}
	cfg := rcmgr.PartialLimitConfig{PeerDefault: rcmgr.ResourceLimits{Memory: mem}}.Build(rcmgr.InfiniteLimits)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(cfg))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rm.OpenConnection(network.DirInbound, false, ma.StringCast("/ip4/127.0.0.1/tcp/1"))
	if err != nil {
		t.Fatal(err)
	}
	const p = peer.ID("synGate fuzz peer")
	if err := cs.SetPeer(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Done(); rm.Close() })
	held := func() int64 {
		var m int64
		rm.ViewPeer(p, func(s network.PeerScope) error { m = s.Stat().Memory; return nil })
		return m
	}
	return cs.PeerScope(), held
}

// frameTracker follows frame boundaries in a byte stream as go-yamux
// reads them: 12 header bytes, then a data frame's body by its length.
type frameTracker struct {
	hdr  [yamuxHeaderSize]byte
	pos  int    // header bytes seen
	body uint64 // body bytes of the current frame left
}

// feed takes b's bytes in order and calls header with every whole header.
func (f *frameTracker) feed(b []byte, header func(h []byte)) {
	for len(b) > 0 {
		if f.body > 0 {
			n := uint64(len(b))
			if n > f.body {
				n = f.body
			}
			f.body -= n
			b = b[n:]
			continue
		}
		n := copy(f.hdr[f.pos:], b)
		f.pos += n
		b = b[n:]
		if f.pos == yamuxHeaderSize {
			f.pos = 0
			if f.hdr[0] == yamuxVersion && f.hdr[1] == yamuxTypeData {
				f.body = uint64(binary.BigEndian.Uint32(f.hdr[8:12]))
			}
			header(f.hdr[:])
		}
	}
}

// opensStream says whether h is a header go-yamux takes as opening a
// stream (handleStreamMessage: a data or window update frame with SYN).
func opensStream(h []byte) bool {
	return h[0] == yamuxVersion && (h[1] == yamuxTypeData || h[1] == yamuxTypeWindowUpd) &&
		binary.BigEndian.Uint16(h[2:4])&yamuxFlagSYN != 0
}

// synGateModel is what a synGate must hand on of stream, and the IDs of
// the streams it must reset, in order, when the peer may hold windows
// first windows and yamux, for the j-th SYN it sees, takes no window if
// skip(j) (as go-yamux refusing the stream before it reserves), or else
// ends the stream it opens at once if release(j): a frame whose SYN
// finds no room goes on as a RST of its stream, without its body, and is
// answered with a RST; every other byte passes as it is; a header cut
// off by the end of the input is not handed on (it is no frame).
func synGateModel(stream []byte, windows int, skip, release func(j int) bool) (out []byte, resets []uint32) {
	held, j, pos := 0, 0, 0
	var tr frameTracker
	for pos+yamuxHeaderSize <= len(stream) {
		h := bytes.Clone(stream[pos : pos+yamuxHeaderSize])
		tr.feed(h, func([]byte) {})
		pos += yamuxHeaderSize
		body := int(min(tr.body, uint64(len(stream)-pos)))
		tr.body = 0
		if opensStream(h) && held >= windows {
			resets = append(resets, binary.BigEndian.Uint32(h[4:8]))
			h[1] = yamuxTypeWindowUpd
			binary.BigEndian.PutUint16(h[2:4], yamuxFlagRST)
			binary.BigEndian.PutUint32(h[8:12], 0)
			out = append(out, h...)
			pos += body
			continue
		}
		if opensStream(h) {
			held++
			if !skip(j) && release(j) {
				held--
			}
			j++
		}
		out = append(out, h...)
		out = append(out, stream[pos:pos+body]...)
		pos += body
	}
	return out, resets
}

// sizeAt is the i-th size that sizes gives, cyclically: 1 to 256 bytes,
// or rest when sizes is empty or the byte is 0.
func sizeAt(sizes []byte, i, rest int) int {
	if len(sizes) == 0 || sizes[i%len(sizes)] == 0 {
		return max(rest, 1)
	}
	return int(sizes[i%len(sizes)])
}

// FuzzSynGate feeds a byte stream, cut into writes of sizes writes
// gives, through a synGate whose peer may hold windows (0 to 4) yamux
// first windows of a real resource manager, read in reads' sizes by a
// reader that takes a reserved window for every SYN it is handed, as
// go-yamux does, but for the SYNs skips' bits name (go-yamux refusing
// the stream before it reserves: both ends clients, a GoAway of its own
// under way), and ends the stream at once for those releases' bits
// name. It checks that nothing panics; that the bytes handed on are
// the bytes read, but for the SYN flags of frames refused for want of
// room, each answered by a RST of its stream; and that every reservation
// has ended once the gate is closed and the reader's streams are.
func FuzzSynGate(f *testing.F) {
	syn := func(id uint32) []byte { return yamuxFrame(yamuxTypeWindowUpd, yamuxFlagSYN, id, 0, nil) }
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	for _, s := range []struct {
		windows             uint8
		stream, writes, rds []byte
		skips, releases     uint64
	}{
		{1, syn(1), nil, nil, 0, 0},
		{1, yamuxFrame(yamuxTypeData, yamuxFlagSYN, 1, 5, []byte("hello")), []byte{3}, []byte{7}, 0, 0},
		{0, yamuxFrame(yamuxTypeData, yamuxFlagSYN, 1, 5, []byte("hello")), nil, nil, 0, 0},
		{2, cat(syn(1), syn(3), syn(5), syn(7)), []byte{5, 11}, []byte{1, 12}, 0, 0},
		{2, cat(syn(1), syn(3), syn(5), syn(7), syn(9)), nil, nil, 0, 0b101},
		{2, cat(syn(1), syn(3), syn(5), syn(7)), nil, nil, 0b01, 0b10},                                                     // a window not taken
		{1, cat(yamuxFrame(2, yamuxFlagSYN, 0, 42, nil), yamuxFrame(2, 2, 0, 42, nil)), nil, nil, 0, 0},                    // ping, pong
		{1, cat(syn(1), yamuxFrame(3, 0, 0, 0, nil), syn(3)), nil, nil, 0, 0},                                              // go away, then a SYN
		{1, cat(yamuxFrame(7, yamuxFlagSYN, 1, 100, nil), syn(3)), nil, nil, 0, 0},                                         // unknown type
		{1, append(yamuxFrame(yamuxTypeData, 0, 1, 4, []byte("abcd")), syn(3)[:7]...), []byte{2}, nil, 0, 0},               // short header
		{1, yamuxFrame(yamuxTypeData, yamuxFlagSYN, 1, math.MaxUint32, []byte("body cut off")), nil, []byte{4}, 0, 0},      // 2^32-1
		{0, yamuxFrame(yamuxTypeData, 0, 1, 12, syn(3)), nil, nil, 0, 0},                                                   // a SYN header as a body
		{1, cat(syn(1), syn(1), yamuxFrame(yamuxTypeData, yamuxFlagSYN|yamuxFlagRST, 1, 2, []byte("xy"))), nil, nil, 0, 0}, // an ID again
		{0, cat([]byte{1}, syn(1)[1:], syn(3)), nil, nil, 0, 0},                                                            // another version
	} {
		f.Add(s.windows, s.stream, s.writes, s.rds, s.skips, s.releases)
	}
	f.Fuzz(func(t *testing.T, windows uint8, stream, writes, reads []byte, skips, releases uint64) {
		k := int(windows % 5)
		skip := func(j int) bool { return skips>>(j%64)&1 != 0 }
		release := func(j int) bool { return releases>>(j%64)&1 != 0 }
		want, wantResets := synGateModel(stream, k, skip, release)

		scope, held := gatePeerScope(t, k)
		var live atomic.Int64
		mem := &yamuxMemory{scope: scope, live: &live}
		inR, inW := net.Pipe()
		outR, outW := net.Pipe()
		g := newSynGate(newCoalescingConn(splitConn{inR, outW}), mem, nil)

		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // the peer
			defer wg.Done()
			defer inW.Close()
			for i, rest := 0, stream; len(rest) > 0; i++ {
				n := min(sizeAt(writes, i, len(rest)), len(rest))
				if _, err := inW.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
		}()
		var written []byte
		go func() { // the peer reading the gate's RSTs
			defer wg.Done()
			written, _ = io.ReadAll(outR)
		}()

		var got []byte
		var tr frameTracker
		var streams []network.ResourceScopeSpan
		j := 0
		buf := make([]byte, 256)
		var readErr error
		for i := 0; readErr == nil; i++ {
			var n int
			n, readErr = g.Read(buf[:sizeAt(reads, i, len(buf))])
			got = append(got, buf[:n]...)
			tr.feed(buf[:n], func(h []byte) {
				if !opensStream(h) {
					return
				}
				if skip(j) {
					j++
					return
				}
				// go-yamux's incomingStream: its span's first reservation
				// takes a window reserved ahead, never refused.
				sp, _ := yamuxScope{scope, mem}.BeginSpan()
				if err := sp.ReserveMemory(yamuxFirstWindow, 255); err != nil {
					t.Fatalf("a stream whose SYN was handed on: its first window refused: %v", err)
				}
				if release(j) {
					sp.Done()
				} else {
					streams = append(streams, sp)
				}
				j++
			})
		}
		g.Close()
		wg.Wait()

		if !bytes.Equal(got, want) {
			t.Fatalf("handed on %d bytes:\n%x\nwant %d:\n%x", len(got), got, len(want), want)
		}
		var resets []uint32
		for rest := written; len(rest) > 0; rest = rest[min(yamuxHeaderSize, len(rest)):] {
			if len(rest) < yamuxHeaderSize {
				t.Fatalf("the gate wrote %x, not whole frames", written)
			}
			id := binary.BigEndian.Uint32(rest[4:8])
			if !bytes.Equal(rest[:yamuxHeaderSize], yamuxFrame(yamuxTypeWindowUpd, yamuxFlagRST, id, 0, nil)) {
				t.Fatalf("the gate wrote %x, not a RST", rest[:yamuxHeaderSize])
			}
			resets = append(resets, id)
		}
		if fmt.Sprint(resets) != fmt.Sprint(wantResets) {
			t.Fatalf("the gate reset streams %v, want %v", resets, wantResets)
		}
		if l := live.Load(); l != int64(len(streams)) {
			t.Fatalf("closed gate: %d spans live, want the %d of open streams", l, len(streams))
		}
		for _, sp := range streams {
			sp.Done()
		}
		if l, m := live.Load(), held(); l != 0 || m != 0 {
			t.Fatalf("every stream ended: %d spans live, %d bytes held, want none", l, m)
		}
	})
}

// endlessData is a connection that sends one data frame header claiming
// the largest length, then zeros forever.
type endlessData struct {
	net.Conn
	hdr []byte
}

func (c *endlessData) Read(p []byte) (int, error) {
	if len(c.hdr) > 0 {
		n := copy(p, c.hdr)
		c.hdr = c.hdr[n:]
		return n, nil
	}
	clear(p)
	return len(p), nil
}

func (c *endlessData) SetReadDeadline(time.Time) error { return nil }

// TestSynGateClaimedLength: a data frame claiming 4 GiB costs the gate
// nothing it allocates, however much of it is read.
func TestSynGateClaimedLength(t *testing.T) {
	c := &endlessData{hdr: yamuxFrame(yamuxTypeData, 0, 1, math.MaxUint32, nil)}
	g := newSynGate(newCoalescingConn(c), &yamuxMemory{}, nil)
	buf := make([]byte, 64<<10)
	if _, err := io.ReadFull(g, buf[:yamuxHeaderSize]); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := g.Read(buf); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations per read of a frame claiming 4 GiB, want 0", a)
	}
	if g.body != math.MaxUint32-1001*int64(len(buf)) {
		t.Fatalf("body left %d, want %d", g.body, math.MaxUint32-1001*int64(len(buf)))
	}
}

// FuzzSynGateYamux feeds a byte stream, cut into writes of sizes writes
// gives, to a real go-yamux session through the node's gate (as
// coalescingMuxer.NewConn builds it), whose peer may hold windows (0 to
// 4) first windows of a real resource manager, while the node opens
// opens streams of its own (those whose bit in cancels is set with a
// context already ended) and resets the streams it accepts whose bit in
// resets is set. FuzzSynGate checks the gate against a model of
// go-yamux; this checks it against go-yamux itself, whatever its
// state (streams open, reset, half closed, IDs reused, windows
// exceeded, the session ended by the peer's frames): that go-yamux
// never reserves a stream's first window with none reserved ahead (it
// would end the session if that were refused), and that every
// reservation has ended once the session has, and every goroutine.
func FuzzSynGateYamux(f *testing.F) {
	syn := func(id uint32) []byte { return yamuxFrame(yamuxTypeWindowUpd, yamuxFlagSYN, id, 0, nil) }
	data := func(flags uint16, id uint32, body string) []byte {
		return yamuxFrame(yamuxTypeData, flags, id, uint32(len(body)), []byte(body))
	}
	const ack, fin, rst = 2, 4, 8
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	for _, s := range []struct {
		windows         uint8
		stream, writes  []byte
		opens           uint8
		cancels, resets uint64
	}{
		{1, syn(1), nil, 0, 0, 0},
		{2, cat(syn(1), syn(3), syn(5), syn(7), syn(9)), []byte{5, 11}, 0, 0, 0b10},
		{2, cat(data(yamuxFlagSYN|fin, 1, "a"), data(yamuxFlagSYN|rst, 3, "b"), syn(5)), nil, 0, 0, 0},
		{1, cat(syn(1), data(rst, 1, ""), syn(1), data(fin, 1, "again")), []byte{7}, 0, 0, 0},                   // an ID reused
		{1, cat(syn(1), syn(1)), nil, 0, 0, 0},                                                                  // an ID again
		{1, cat(syn(1), data(yamuxFlagSYN, 1, "dup"), data(0, 1, "then")), nil, 0, 0, 0},                        // an ID again, refused, with data
		{3, cat(syn(1), yamuxFrame(yamuxTypeData, 0, 1, yamuxFirstWindow+1, nil), syn(3)), nil, 0, 0, 0},        // window exceeded
		{2, cat(yamuxFrame(2, yamuxFlagSYN, 0, 7, nil), yamuxFrame(2, 2, 0, 1<<31, nil), syn(1)), nil, 0, 0, 0}, // ping, pong
		{2, cat(syn(1), yamuxFrame(3, 0, 0, 1, nil), syn(3)), nil, 0, 0, 0},                                     // go away, then a SYN
		{2, cat(syn(2), syn(1)), nil, 0, 0, 0},                                                                  // an even ID
		{2, cat(yamuxFrame(yamuxTypeWindowUpd, ack, 2, 0, nil), data(ack, 4, "hi"), yamuxFrame(yamuxTypeWindowUpd, rst, 6, 0, nil), syn(1)), nil, 4, 0b100, 0},
		{1, cat(syn(1), syn(3), syn(5)), nil, 6, 0b101010, 0b1},
		{0, cat(syn(1), data(yamuxFlagSYN, 3, "refused"), syn(5)), []byte{1}, 2, 0, 0},
		{1, cat(syn(1), data(fin, 1, "read, then closed both ways"), syn(3)), nil, 0, 0, 0},
		{3, cat(syn(1), syn(3), bytes.Repeat(data(0, 3, "x"), 9000), syn(5), data(0, 5, "after")), nil, 0, 0, 0}, // 1-byte frames, unread: reset
		{1, cat(syn(1), bytes.Repeat(data(0, 1, "x"), 9000), data(fin, 1, "")), nil, 0, 0, 0},                    // 1-byte frames, read
	} {
		f.Add(s.windows, s.stream, s.writes, s.opens, s.cancels, s.resets)
	}
	f.Fuzz(func(t *testing.T, windows uint8, stream, writes []byte, opens uint8, cancels, resets uint64) {
		ignore := goleak.IgnoreCurrent()
		t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the resource manager's close
		scope, held := gatePeerScope(t, int(windows%5))
		var live, unready atomic.Int64
		mem := &yamuxMemory{scope: scope, live: &live, unready: &unready}
		inR, inW := net.Pipe()
		outR, outW := net.Pipe()
		var frameResets atomic.Uint64
		ledger := newFrameLedger(&frameResets, yamux.DefaultTransport.Config().AcceptBacklog)
		conn, err := newYamuxMuxedConn(newCoalescingConn(splitConn{inR, outW}), true, yamux.DefaultTransport.Config(), mem, ledger)
		if err != nil {
			t.Fatal(err)
		}

		var wg sync.WaitGroup
		wg.Add(3)
		sent := make(chan struct{}) // the peer's bytes all read by the session
		go func() {                 // the peer
			defer wg.Done()
			defer inW.Close()
			defer close(sent)
			for i, rest := 0, stream; len(rest) > 0; i++ {
				n := min(sizeAt(writes, i, len(rest)), len(rest))
				if _, err := inW.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
		}()
		go func() { // the peer reading what the node sends
			defer wg.Done()
			io.Copy(io.Discard, outR)
		}()
		go func() { // the node opening streams
			defer wg.Done()
			for i := range int(opens % 17) {
				ctx, cancel := context.WithCancel(context.Background())
				if cancels>>(i%64)&1 != 0 {
					cancel()
				}
				conn.OpenStream(ctx)
				cancel()
			}
		}()
		var readers sync.WaitGroup
		for i := 0; ; i++ {
			s, err := conn.AcceptStream()
			if err != nil {
				break
			}
			if resets>>(i%64)&1 != 0 {
				s.Reset()
				continue
			}
			readers.Add(1)
			go func() { // reads in small pieces, checking the accounting
				defer readers.Done()
				if i%2 == 1 {
					<-sent // frames buffered unread first
				}
				buf := make([]byte, 1+i%7)
				for {
					if _, err := s.Read(buf); err != nil {
						break
					}
					if _, bytes, frames := ledger.stat(); bytes < 0 || frames < 0 {
						t.Errorf("ledger: %d bytes, %d frames buffered", bytes, frames)
					}
				}
				s.Close()
			}()
		}
		wg.Wait()
		conn.Close() // waits for the session's end, which ends its streams' spans
		readers.Wait()

		if n := ledger.unrecorded.Load(); n != 0 {
			t.Fatalf("%d bytes read beyond the frames recorded", n)
		}
		if n, bytes, frames := ledger.stat(); n != 0 || bytes != 0 || frames != 0 {
			t.Fatalf("session ended: %d streams followed, %d bytes, %d frames, want none", n, bytes, frames)
		}

		if n := unready.Load(); n != 0 {
			t.Fatalf("go-yamux reserved %d first windows with none reserved ahead", n)
		}
		if l, m := live.Load(), held(); l != 0 || m != 0 {
			t.Fatalf("session ended: %d spans live, %d bytes held, want none", l, m)
		}
	})
}
