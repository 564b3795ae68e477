package pathinfo

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// A monitor keeps, per kind of exchange (how its content was encoded) and
// per size class (powers of two from 64 B), the last classSamples short
// exchanges: their sizes and times. What each took beyond its bytes at
// the path's rate of now, as a median per class, one kind against sending
// as is, is what Monitor.Excess reports. The times are kept whole and the
// bytes taken off when asked, so that a rate refined since stays
// consistent; the RTT cancels out between kinds.
//
// They are not used to correct the rate itself. Tried: on loopback the
// cost per byte is not one figure (an exchange of 43 kB cost 4.4 ns a
// byte more than one of 8.6 kB, one of 172 kB 2.3 ns more than one of
// 43 kB), and rates fitted to pairs of classes jumped between 20 and
// 800 MB/s in a grid run; per kind, against sending as is at the sizes
// actually compared, the same records are steady.
const (
	minClassSize = 64
	numClasses   = 20 // the last holds everything from 32 MiB
	classSamples = 32
	// classReady is how many exchanges a class needs to be reported.
	classReady = 8
	// excessZ is how many standard errors a difference of medians must
	// reach to be reported: on an emulated GbE link, medians of 16
	// exchanges of 255 B elements put s2:1 10 to 58 µs ahead of sending
	// as is (and other codecs up to 24 µs behind), where fixed s2:1 was
	// 12 µs behind. It is asked again at every decision, so that a
	// difference of pure noise beyond 2 standard errors (one decision in
	// twenty) came often enough: on loopback, s2:1 was put 17 µs ahead of
	// sending as is for 255 B, where it was 5 µs behind, and sent for 42
	// of 1461 messages. The differences calibration is for are far
	// beyond 3: 100 µs at 43 kB and more on loopback, 12 µs against
	// standard errors of 2–3 µs on GbE.
	excessZ = 3
)

// sizeClass holds the last exchanges of one size class.
type sizeClass struct {
	n    [classSamples]int
	d    [classSamples]time.Duration
	len  int // samples held, up to classSamples
	next int // where the next goes
}

func (c *sizeClass) add(n int, d time.Duration) {
	c.n[c.next], c.d[c.next] = n, d
	c.next = (c.next + 1) % classSamples
	c.len = min(c.len+1, classSamples)
}

// left is the class's median time beyond its bytes at perByte seconds a
// byte, and that median's standard error: from the median absolute
// deviation, as the median of a normal sample's (1.253 σ/√n, σ = 1.4826
// MAD), which a few stalls do not inflate.
func (c *sizeClass) left(perByte float64) (med time.Duration, se float64) {
	s := make([]time.Duration, c.len)
	for i := range c.len {
		s[i] = c.d[i] - time.Duration(float64(c.n[i])*perByte*float64(time.Second))
	}
	slices.Sort(s)
	med = s[len(s)/2]
	for i := range s {
		s[i] = max(s[i]-med, med-s[i])
	}
	slices.Sort(s)
	return med, 1.253 * 1.4826 * float64(s[len(s)/2]) / math.Sqrt(float64(len(s)))
}

func classOf(n int) int {
	return min(max(bits.Len(uint(n))-bits.Len(minClassSize), 0), numClasses-1)
}

// sizeClasses is a monitor's record of one kind's short exchanges; a
// class is allocated when its first exchange comes.
type sizeClasses struct {
	c [numClasses]*sizeClass
}

// add records a short exchange of n bytes that took d.
func (s *sizeClasses) add(n int, d time.Duration) {
	k := classOf(n)
	if s.c[k] == nil {
		s.c[k] = new(sizeClass)
	}
	s.c[k].add(n, d)
}

// leftAt is the median time beyond their bytes at bw of the exchanges in
// n's class and its standard error, if the class has enough of them.
func (s *sizeClasses) leftAt(n int, bw float64) (time.Duration, float64, bool) {
	c := s.c[classOf(n)]
	if c == nil || c.len < classReady || bw <= 0 {
		return 0, 0, false
	}
	med, se := c.left(1 / bw)
	return med, se, true
}
