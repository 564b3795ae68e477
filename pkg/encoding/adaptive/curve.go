package adaptive

import (
	"math"
	"math/bits"
)

// Sizes are bucketed by powers of two: bucket b holds sizes in
// [2^(b+minLog), 2^(b+minLog+1)), the first and last buckets also
// everything below and above.
const (
	minLog     = 5  // 32 B
	numBuckets = 24 // up to 512 MiB
	// maxWeight caps a bucket's sample count, so that a bucket keeps
	// adapting: its EWMA never moves by less than 1/maxWeight.
	maxWeight = 8
	// clipFactor bounds how far above its expectation one timing sample
	// may pull a bucket: a thread descheduled in the middle of a
	// measurement reads as a slow codec, once. A run of clipStreak high
	// samples is believed (the CPU really did get slower).
	clipFactor = 2.0
	clipStreak = 3
	// sizeShift is how far (relative) a size sample must be from what
	// its bucket expects to weigh half (curve.add).
	sizeShift = 0.25
)

func bucketOf(n int) int {
	if n < 1 {
		n = 1
	}
	b := bits.Len(uint(n)) - 1 - minLog
	return min(max(b, 0), numBuckets-1)
}

// point is one bucket's running estimate: the EWMA of the sizes seen in
// it (its centroid) and of the quantity measured at them.
type point struct {
	w    float64 // samples, capped at maxWeight; 0: empty
	n    float64 // EWMA of sizes
	y    float64 // EWMA of the value
	seq  uint64  // Models sequence number of the last update
	high uint8   // consecutive clipped samples
	// dev is, for sizes, the EWMA of how far each sample was from what
	// the bucket expected at its size, relative (at most 1): near 0 where
	// the kind's documents of this size all compress alike, 0.3-0.5 where
	// they differ 2×. Not kept in the models file: it is learnt again
	// from the next surprises.
	dev float64
}

// curve estimates a quantity that grows with size (bytes out, nanoseconds)
// as a piecewise-linear function through the centroids of its buckets.
// Between two populated buckets it interpolates linearly in size, which is
// exact for anything affine (a fixed cost plus a cost per byte); above the
// last it scales proportionally; below the first it keeps the first
// bucket's value (fixed costs dominate small inputs).
type curve struct {
	p [numBuckets]point
}

// add records value y at size n. robust clips timing outliers.
func (c *curve) add(n int, y float64, seq uint64, robust bool) {
	if n < 1 || y < 0 || math.IsNaN(y) || math.IsInf(y, 0) {
		return
	}
	y = min(y, maxValue)
	p := &c.p[bucketOf(n)]
	x := float64(n)
	if p.w == 0 {
		if robust {
			// A new bucket's first sample is held to what the rest of
			// the curve expects here: its neighbours are few samples, but
			// not all descheduled at once.
			if l := c.at(n, false); l.ok && y > clipFactor*l.y {
				y = clipFactor * l.y
			}
		}
		*p = point{w: 1, n: x, y: y, seq: seq}
		return
	}
	alpha := max(1/(p.w+1), 1.0/maxWeight)
	want := p.y * x / p.n // what the bucket expects at n
	if !robust {
		if math.Abs(y-want) > sizeShift*want {
			// A size this far from the bucket's is other content of the
			// same kind and size, which the next elements most likely
			// resemble (as remembered decisions assume): sizes are exact,
			// not noisy.
			alpha = max(alpha, 0.5)
		}
		// At that weight too: a bucket that has just been 2× off is one
		// whose estimate may well be off again.
		if want > 0 {
			p.dev += alpha * (min(math.Abs(y-want)/want, 1) - p.dev)
		}
	} else {
		switch {
		case y > clipFactor*want && p.high+1 < clipStreak:
			p.high++
			y = clipFactor * want
		case y > clipFactor*want:
			// The third high sample in a row: the level moved.
			p.high, alpha = 0, 0.5
		default:
			p.high = 0
		}
	}
	p.n += alpha * (x - p.n)
	p.y += alpha * (y - p.y)
	p.w = min(p.w+1, maxWeight)
	p.seq = seq
}

// empty reports whether nothing was recorded.
func (c *curve) empty() bool {
	for i := range c.p {
		if c.p[i].w > 0 {
			return false
		}
	}
	return true
}

// lookup is what a curve says about one size.
type lookup struct {
	y    float64
	dist int     // buckets between the size's bucket and the nearest populated one
	w    float64 // that bucket's weight
	seq  uint64  // and its last update
	dev  float64 // and its sizes' relative deviation (point.dev)
	ok   bool    // false: the curve is empty
}

// at estimates the value at size n. small says how to extrapolate below
// the first populated bucket: flat (false, for times) or as a ratio that
// worsens towards 1 (true, for compressed sizes, which small inputs
// compress less).
func (c *curve) at(n int, ratioBelow bool) lookup {
	x := float64(max(n, 1))
	b := bucketOf(n)
	lo, hi := -1, -1
	near, nearDist := -1, numBuckets
	for i := range c.p {
		if c.p[i].w == 0 {
			continue
		}
		if c.p[i].n <= x {
			lo = i
		} else if hi < 0 {
			hi = i
		}
		if d := abs(i - b); d < nearDist {
			near, nearDist = i, d
		}
	}
	if near < 0 {
		return lookup{}
	}
	l := lookup{dist: nearDist, w: c.p[near].w, seq: c.p[near].seq, dev: c.p[near].dev, ok: true}
	switch {
	case lo >= 0 && hi >= 0:
		a, z := c.p[lo], c.p[hi]
		f := (x - a.n) / (z.n - a.n)
		l.y = a.y + f*(z.y-a.y)
	case lo >= 0:
		a := c.p[lo]
		l.y = a.y * x / a.n
	default:
		z := c.p[hi]
		if ratioBelow {
			r := z.y / z.n * math.Sqrt(z.n/x)
			l.y = x * min(r, 1)
		} else {
			l.y = z.y
		}
	}
	l.y = min(max(l.y, 0), maxValue)
	return l
}

// ratioAt returns the bucket's own value/size ratio at bucket b, if
// populated.
func (c *curve) ratioAt(b int) (float64, bool) {
	p := c.p[b]
	if p.w == 0 || p.n <= 0 {
		return 0, false
	}
	return p.y / p.n, true
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}
