package xmlc

import (
	"encoding/binary"
	"math/bits"
)

// bitWriter packs values LSB first. Columns start on a byte boundary
// (align), so a reader can find each column from the sizes alone.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint // bits pending in acc, < 8 between calls
}

func (w *bitWriter) write(v uint64, nb uint) {
	if nb > 56 {
		w.write(v&(1<<32-1), 32)
		v, nb = v>>32, nb-32
	}
	w.acc |= v << w.n
	w.n += nb
	for w.n >= 8 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

func (w *bitWriter) align() {
	if w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc, w.n = 0, 0
	}
}

// bitReader reads what bitWriter wrote. Past the end of src it reads
// zeros; callers bound the number of values they read.
type bitReader struct {
	src []byte
	pos int
	acc uint64
	n   uint
}

func (r *bitReader) refill() {
	if r.pos+8 <= len(r.src) {
		r.acc |= binary.LittleEndian.Uint64(r.src[r.pos:]) << r.n
		adv := (63 - r.n) >> 3
		r.pos += int(adv)
		r.n += adv << 3
		return
	}
	for r.n <= 56 {
		if r.pos < len(r.src) {
			r.acc |= uint64(r.src[r.pos]) << r.n
			r.pos++
		}
		r.n += 8
	}
}

func (r *bitReader) read(nb uint) uint64 {
	if nb > 56 {
		lo := r.read(32)
		return lo | r.read(nb-32)<<32
	}
	if r.n < nb {
		r.refill()
	}
	v := r.acc & (1<<nb - 1)
	r.acc >>= nb
	r.n -= nb
	return v
}

// bitLen is the number of bits needed for v.
func bitLen(v uint64) uint { return uint(bits.Len64(v)) }

// maxNumber is the largest digit group: 18 digits always fit in 60 bits.
const (
	maxDigits = 18
	maxNumber = 999_999_999_999_999_999
)

var pow10 = func() (p [maxDigits + 1]uint64) {
	p[0] = 1
	for i := 1; i <= maxDigits; i++ {
		p[i] = p[i-1] * 10
	}
	return
}()

// digits is the number of decimal digits of v (1 for 0), v <= maxNumber.
func digits(v uint64) int {
	d := (bits.Len64(v) * 1233) >> 12 // floor(log10(2^len)), one short at most
	if d < maxDigits && v >= pow10[d] {
		d++
	}
	return max(d, 1)
}

// appendDigits appends v in decimal, zero-padded to width digits (width 0:
// as few as needed; v must have at most width digits), writing straight
// into dst.
func appendDigits(dst []byte, v uint64, width int) []byte {
	n := width // a fixed width: v < 10^width was checked
	if n == 0 {
		n = digits(v)
	}
	l := len(dst)
	if cap(dst)-l < n {
		dst = append(dst, make([]byte, n)...)[:l]
	}
	dst = dst[:l+n]
	b := dst[l:]
	i := n
	for v >= 100 {
		q := v / 100
		r := v - q*100
		i -= 2
		b[i], b[i+1] = digitPairs[2*r], digitPairs[2*r+1]
		v = q
	}
	if v >= 10 {
		i -= 2
		b[i], b[i+1] = digitPairs[2*v], digitPairs[2*v+1]
	} else {
		i--
		b[i] = byte('0' + v)
	}
	for i > 0 {
		i--
		b[i] = '0'
	}
	return dst
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }
