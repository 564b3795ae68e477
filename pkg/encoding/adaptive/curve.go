package adaptive

import (
	"math"
	"math/bits"
)

// Sizes are bucketed by powers of two: bucket b holds sizes in
// [2^(b+minLog), 2^(b+minLog+1)), the first and last buckets also
// everything below and above.
const (
	minLog     = 5  // 32 B: below, fixed costs dominate whatever the size
	numBuckets = 24 // up to 512 MiB, beyond any element's limit
	// maxWeight caps a bucket's sample count, so that a bucket keeps
	// adapting: its EWMA never moves by less than 1/maxWeight.
	maxWeight = 8
	// clipFactor bounds how far above its expectation one timing sample
	// may pull a bucket: a thread descheduled in the middle of a
	// measurement reads as a slow codec, once. A run of clipStreak high
	// samples is believed (the CPU really did get slower).
	clipFactor = 2.0
	clipStreak = 3
	// maxValue bounds a curve's values: bytes, or nanoseconds (11 days),
	// so that no estimate overflows a time.Duration.
	maxValue = 1e15
)

func bucketOf(n int) int {
	b := bits.Len(uint(max(n, 1))) - 1 - minLog
	return min(max(b, 0), numBuckets-1)
}

// point is one bucket's running estimate: the EWMA of the sizes seen in
// it (its centroid) and of the quantity measured at them.
type point struct {
	w    float64 // samples, capped at maxWeight; 0: empty
	n    float64 // EWMA of sizes
	y    float64 // EWMA of the value
	high uint8   // consecutive clipped samples
}

// curve estimates a quantity that grows with size (bytes out, nanoseconds)
// as a piecewise-linear function through the centroids of its buckets.
// Between two populated buckets it interpolates linearly in size, which is
// exact for anything affine (a fixed cost plus a cost per byte); above the
// last it scales proportionally; below the first it keeps the first
// bucket's value for times (fixed costs dominate small inputs) and, for
// sizes, a ratio that worsens towards 1 as the square root of the size
// (small inputs compress less: there is less to find repeats in).
type curve struct {
	p [numBuckets]point
}

// add records value y at size n. robust clips timing outliers.
func (c *curve) add(n int, y float64, robust bool) {
	if n < 1 || y < 0 || math.IsNaN(y) || math.IsInf(y, 0) {
		return
	}
	y = min(y, maxValue)
	p := &c.p[bucketOf(n)]
	x := float64(n)
	if p.w == 0 {
		if want, _, ok := c.at(n, false); robust && ok && y > clipFactor*want {
			// A new bucket's first sample is held to what the rest of
			// the curve expects here.
			y = clipFactor * want
		}
		*p = point{w: 1, n: x, y: y}
		return
	}
	alpha := max(1/(p.w+1), 1.0/maxWeight)
	if want := p.y * x / p.n; robust && y > clipFactor*want {
		if p.high++; p.high < clipStreak {
			y = clipFactor * want
		} else {
			p.high, alpha = 0, 0.5 // the level moved
		}
	} else {
		p.high = 0
	}
	p.n += alpha * (x - p.n)
	p.y += alpha * (y - p.y)
	p.w = min(p.w+1, maxWeight)
}

// at estimates the value y at size n; sizes says it is a size curve. dist
// is the number of buckets between n's and the nearest populated one; ok
// is false when the curve is empty.
func (c *curve) at(n int, sizes bool) (y float64, dist int, ok bool) {
	x := float64(max(n, 1))
	b := bucketOf(n)
	lo, hi := -1, -1
	dist = numBuckets
	for i := range c.p {
		if c.p[i].w == 0 {
			continue
		}
		if c.p[i].n <= x {
			lo = i
		} else if hi < 0 {
			hi = i
		}
		dist = min(dist, max(i-b, b-i))
	}
	switch {
	case lo >= 0 && hi >= 0:
		a, z := c.p[lo], c.p[hi]
		y = a.y + (x-a.n)/(z.n-a.n)*(z.y-a.y)
	case lo >= 0:
		y = c.p[lo].y * x / c.p[lo].n
	case hi >= 0 && sizes:
		z := c.p[hi]
		y = x * min(z.y/z.n*math.Sqrt(z.n/x), 1)
	case hi >= 0:
		y = c.p[hi].y
	}
	return min(max(y, 0), maxValue), dist, dist < numBuckets
}

func (c *curve) empty() bool { _, _, ok := c.at(1, false); return !ok }
