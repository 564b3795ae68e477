package seal

import (
	"encoding/binary"
	"testing"
)

// FuzzWindow checks the sliding window against a plain model: a counter
// is accepted iff it was never seen and is within ReplayWindow of the
// highest seen (or above it).
func FuzzWindow(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 1, 0})
	f.Add(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 5000), 10))
	f.Add([]byte{0xff, 0xff, 0, 0, 0xff, 0xfe, 0x7f, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w *window
		seen := map[uint64]bool{}
		var top uint64
		for len(b) >= 2 {
			ctr := uint64(binary.BigEndian.Uint16(b)) * 7 // spread, so shifts of every size occur
			b = b[2:]
			if w == nil {
				w = &window{top: ctr}
				w.bits[0] = 1
				seen[ctr], top = true, ctr
				continue
			}
			want := !seen[ctr] && (ctr > top || top-ctr < ReplayWindow)
			if got := w.accept(ctr); got != want {
				t.Fatalf("counter %d (top %d): accepted %v, want %v", ctr, top, got, want)
			}
			if want {
				seen[ctr] = true
				top = max(top, ctr)
			}
		}
	})
}
