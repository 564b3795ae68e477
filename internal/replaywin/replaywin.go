// Package replaywin is the sliding anti-replay window of IPsec (RFC 4303
// §3.4.3, RFC 6479) and WireGuard: a sender numbers its messages, and the
// receiver accepts each number once, within Size of the highest seen. It
// serves the seal codec's counters and the propagate pipes' sequence
// numbers.
package replaywin

// Size is how many numbers below the highest seen a window still accepts,
// once each: messages overtaking each other by more than that are refused.
// It is the order of IPsec's and WireGuard's windows, and costs 256 bytes.
const Size = 2048

// Window remembers which numbers near the highest were seen. Bit i of
// bits is number top-i. It is not safe for concurrent use.
type Window struct {
	top  uint64
	bits [Size / 64]uint64
}

// New returns a window that has seen first.
func New(first uint64) *Window {
	w := &Window{top: first}
	w.bits[0] = 1
	return w
}

// Top returns the highest number seen.
func (w *Window) Top() uint64 { return w.top }

// Accept records n, reporting false if it was seen before or is below the
// window.
func (w *Window) Accept(n uint64) bool {
	if n > w.top {
		w.shift(n - w.top)
		w.top = n
		w.bits[0] |= 1
		return true
	}
	d := w.top - n
	if d >= Size {
		return false
	}
	word, bit := d/64, d%64
	if w.bits[word]&(1<<bit) != 0 {
		return false
	}
	w.bits[word] |= 1 << bit
	return true
}

// shift moves the window up by n numbers.
func (w *Window) shift(n uint64) {
	if n >= Size {
		w.bits = [Size / 64]uint64{}
		return
	}
	words, bits := int(n/64), n%64
	for i := len(w.bits) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = w.bits[j] << bits
			if bits > 0 && j-1 >= 0 {
				v |= w.bits[j-1] >> (64 - bits)
			}
		}
		w.bits[i] = v
	}
}
