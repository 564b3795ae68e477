package pathinfo

import (
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
	classSamples = 16
	// classReady is how many exchanges a class needs to be reported.
	classReady = 8
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
// byte.
func (c *sizeClass) left(perByte float64) time.Duration {
	s := make([]time.Duration, c.len)
	for i := range c.len {
		s[i] = c.d[i] - time.Duration(float64(c.n[i])*perByte*float64(time.Second))
	}
	slices.Sort(s)
	return s[len(s)/2]
}

func classOf(n int) int {
	return min(max(bits.Len(uint(n))-bits.Len(minClassSize), 0), numClasses-1)
}

// sizeClasses is a monitor's record of one kind's short exchanges.
type sizeClasses struct {
	c [numClasses]sizeClass
}

// add records a short exchange of n bytes that took d.
func (s *sizeClasses) add(n int, d time.Duration) { s.c[classOf(n)].add(n, d) }

// leftAt is the median time beyond their bytes at bw of the exchanges in
// n's class, if it has enough of them.
func (s *sizeClasses) leftAt(n int, bw float64) (time.Duration, bool) {
	c := &s.c[classOf(n)]
	if c.len < classReady || bw <= 0 {
		return 0, false
	}
	return c.left(1 / bw), true
}
