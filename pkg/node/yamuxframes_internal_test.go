package node

import (
	"sync/atomic"
	"testing"
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
			l := newFrameLedger(&resets)
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
		l := newFrameLedger(nil)
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
		end  func(l *frameLedger)
		gone bool
	}{
		{"peer's FIN", func(l *frameLedger) { l.flags(1, yamuxFlagFIN, false) }, false},
		{"node's FIN", func(l *frameLedger) { l.flags(1, yamuxFlagFIN, true) }, false},
		{"FIN both ways", func(l *frameLedger) { l.flags(1, yamuxFlagFIN, true); l.flags(1, yamuxFlagFIN, false) }, true},
		{"peer's RST", func(l *frameLedger) { l.flags(1, yamuxFlagRST, false) }, true},
		{"node's RST", func(l *frameLedger) { l.flags(1, yamuxFlagRST, true) }, true},
		{"session closed", func(l *frameLedger) { l.close() }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newFrameLedger(nil)
			r := l.open(1)
			l.arrive(1, 10)
			c.end(l)
			if n, _, _ := l.stat(); r.gone != c.gone || (n == 0) != c.gone {
				t.Fatalf("stream gone %v, %d followed; want gone %v", r.gone, n, c.gone)
			}
		})
	}
}
