package replaywin

import (
	"encoding/binary"
	"testing"
)

func TestWindow(t *testing.T) {
	w := New(10)
	for _, tc := range []struct {
		n    uint64
		want bool
	}{{10, false}, {9, true}, {9, false}, {11, true}, {11 + Size, true}, {11, false}, {12, true}, {11 + Size, false}, {1 << 62, true}, {11 + Size, false}} {
		if got := w.Accept(tc.n); got != tc.want {
			t.Errorf("Accept(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// FuzzWindow checks the window against a plain model: a number is
// accepted iff it was never seen and is within Size of the highest seen
// (or above it).
func FuzzWindow(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 1, 0})
	f.Add(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 5000), 10))
	f.Add([]byte{0xff, 0xff, 0, 0, 0xff, 0xfe, 0x7f, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w *Window
		seen := map[uint64]bool{}
		var top uint64
		for len(b) >= 2 {
			n := uint64(binary.BigEndian.Uint16(b)) * 7 // spread, so shifts of every size occur
			b = b[2:]
			if w == nil {
				w, seen[n], top = New(n), true, n
				continue
			}
			want := !seen[n] && (n > top || top-n < Size)
			if got := w.Accept(n); got != want {
				t.Fatalf("number %d (top %d): accepted %v, want %v", n, top, got, want)
			}
			if want {
				seen[n], top = true, max(top, n)
			}
		}
	})
}
