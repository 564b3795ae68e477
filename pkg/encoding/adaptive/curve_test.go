package adaptive

import (
	"math"
	"testing"
)

func TestBucketOf(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {1, 0}, {63, 0}, {64, 1}, {127, 1}, {128, 2}, {1 << 20, 15}, {1 << 40, numBuckets - 1},
	} {
		if got := bucketOf(tc.n); got != tc.want {
			t.Errorf("bucketOf(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// An affine cost (fixed part plus a part per byte) is what encoders have;
// through two buckets' centroids the curve gives it back exactly between
// them, proportionally above, flat below.
func TestCurveInterpolatesAffineExactly(t *testing.T) {
	f := func(n float64) float64 { return 50_000 + 20*n }
	var c curve
	c.add(1000, f(1000), 1, false)
	c.add(100_000, f(100_000), 2, false)
	for _, n := range []int{1000, 5000, 30_000, 100_000} {
		if l := c.at(n, false); !near(l.y, f(float64(n))) {
			t.Errorf("at(%d) = %g, want %g", n, l.y, f(float64(n)))
		}
	}
	if l := c.at(400_000, false); !near(l.y, f(100_000)*4) {
		t.Errorf("above: %g, want proportional %g", l.y, f(100_000)*4)
	}
	if l := c.at(100, false); !near(l.y, f(1000)) {
		t.Errorf("below, flat: %g, want %g", l.y, f(1000))
	}
	if l := c.at(5000, false); l.dist != 3 || !l.ok {
		t.Errorf("at(5000) dist %d ok %v, want the 1000 bucket three away", l.dist, l.ok)
	}
	// Compressed sizes: below the first bucket the ratio worsens as the
	// square root of the size, up to 1.
	var sz curve
	sz.add(10_000, 2000, 1, false)
	if l := sz.at(2500, true); !near(l.y, 2500*0.2*2) {
		t.Errorf("2500 bytes below a 0.2 ratio at 10000: %g, want %g", l.y, 2500*0.4)
	}
	if l := sz.at(100, true); !near(l.y, 100) {
		t.Errorf("100 bytes: %g, want no compression", l.y)
	}
	var empty curve
	if l := empty.at(10, false); l.ok {
		t.Error("an empty curve claims to know")
	}
}

func TestCurveEWMAAndClipping(t *testing.T) {
	var c curve
	for range 10 {
		c.add(1000, 100, 1, true)
	}
	c.add(1000, 10_000, 2, true) // one descheduled measurement
	if y := c.at(1000, false).y; y > 100*clipFactor {
		t.Fatalf("one outlier moved the estimate to %g", y)
	}
	c.add(1000, 10_000, 3, true)
	c.add(1000, 10_000, 4, true) // the third in a row: believed
	if y := c.at(1000, false).y; y < 1000 {
		t.Fatalf("three high samples in a row left the estimate at %g", y)
	}
	before := c.at(1000, false).y
	c.add(1000, math.NaN(), 5, true)
	c.add(1000, -1, 5, true)
	if c.at(1000, false).y != before {
		t.Fatal("NaN or negative samples were recorded")
	}
	if c.p[bucketOf(1000)].w != maxWeight {
		t.Fatalf("weight %g, want capped at %d", c.p[bucketOf(1000)].w, maxWeight)
	}
}

// A size bucket learns how far its documents stray from one another: not
// at all where every sample is where the bucket expects it, a good part
// where two documents alternate 2× apart. Timing samples leave it alone.
func TestCurveSizeDeviation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sizes    []float64
		robust   bool
		min, max float64
	}{
		{"one sample", []float64{5000}, false, 0, 0},
		{"steady", []float64{5000, 5000, 5000, 5000, 5000, 5000}, false, 0, 0},
		{"two documents 2× apart", []float64{2600, 5200, 2600, 5200, 2600, 5200}, false, 0.3, 1},
		{"one other document, then steady again", []float64{5000, 2500, 5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000}, false, 0.01, 0.15},
		{"timings", []float64{5000, 9000, 5000, 9000}, true, 0, 0},
	} {
		var c curve
		for i, y := range tc.sizes {
			c.add(43_000, y, uint64(i+1), tc.robust)
		}
		if l := c.at(43_000, true); l.dev < tc.min || l.dev > tc.max {
			t.Errorf("%s: deviation %.3f, want %g to %g", tc.name, l.dev, tc.min, tc.max)
		}
	}
}
