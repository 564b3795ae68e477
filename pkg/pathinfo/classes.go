package pathinfo

import (
	"math/bits"
	"slices"
	"time"
)

// A monitor keeps, per kind of exchange (how its content was encoded) and
// per size class (powers of two from 64 B), the last classSamples short
// exchanges: what each took beyond the RTT and its bytes at the path's
// rate. Their medians, one kind against sending as is, are what
// Monitor.Excess reports.
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

// sizeClass holds the last exchanges of one size class: what each left
// over the RTT and its transfer at the path's rate.
type sizeClass struct {
	left [classSamples]time.Duration
	len  int // samples held, up to classSamples
	next int // where the next goes
}

func (c *sizeClass) add(left time.Duration) {
	c.left[c.next] = left
	c.next = (c.next + 1) % classSamples
	c.len = min(c.len+1, classSamples)
}

// median is the class's median leftover.
func (c *sizeClass) median() time.Duration {
	s := slices.Clone(c.left[:c.len])
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

// add records a short exchange of n bytes that left left over the RTT and
// its transfer at the path's rate.
func (s *sizeClasses) add(n int, left time.Duration) { s.c[classOf(n)].add(left) }

// leftAt is the median leftover of the exchanges in n's class, if it has
// enough of them.
func (s *sizeClasses) leftAt(n int) (time.Duration, bool) {
	c := &s.c[classOf(n)]
	if c.len < classReady {
		return 0, false
	}
	return c.median(), true
}
