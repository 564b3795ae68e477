package adaptive

import (
	"fmt"
	"math"
	"testing"
)

// A curve is exact for anything affine between its points, proportional
// above them, and below them flat for times and a worsening ratio for
// sizes; a lone high timing sample is clipped, a run of them believed.
func TestCurve(t *testing.T) {
	var c curve
	c.add(1000, 1000+2*1000, true) // 1 µs + 2 ns a byte
	c.add(100_000, 1000+2*100_000, true)
	for _, tc := range []struct {
		name  string
		n     int
		sizes bool
		want  float64
	}{
		{"at a point", 1000, false, 3000},
		{"between", 50_000, false, 1000 + 2*50_000},
		{"above: proportional", 200_000, false, 2 * (1000 + 2*100_000)},
		{"below: flat for times", 100, false, 3000},
		{"below: sizes never above the input", 100, true, 100},
	} {
		if got, _, ok := c.at(tc.n, tc.sizes); !ok || math.Abs(got-tc.want) > 1e-6*tc.want {
			t.Errorf("%s: at(%d) = %g, want %g", tc.name, tc.n, got, tc.want)
		}
	}
	c.add(1000, 30_000, true) // ten times the expectation: once is a delay
	if got, _, _ := c.at(1000, false); got > 2*3000 {
		t.Fatalf("one slow sample moved the point to %g", got)
	}
	for range clipStreak {
		c.add(1000, 30_000, true)
	}
	if got, _, _ := c.at(1000, false); got < 2*3000 {
		t.Fatalf("a run of slow samples left the point at %g", got)
	}
	var empty curve
	if _, _, ok := empty.at(5, false); ok || !empty.empty() {
		t.Fatal("an empty curve knows something")
	}
}

// TestTriedBounded: the first-sight trials remembered are bounded, however
// many media types the content declares; past the bound they start
// afresh, so a trial is made again, never skipped for a kind not tried.
func TestTriedBounded(t *testing.T) {
	m := NewModels()
	for i := range 3 * maxTried {
		k := kind{mime: fmt.Sprintf("application/x-%d", i), class: 3}
		if !m.firstTry("zstd:3", k, 1000) {
			t.Fatalf("kind %d: not tried the first time", i)
		}
		if len(m.tried) > maxTried {
			t.Fatalf("%d first-sight trials remembered, bound %d", len(m.tried), maxTried)
		}
	}
	k := kind{mime: "text/xml", class: 3}
	if !m.firstTry("zstd:3", k, 1000) || m.firstTry("zstd:3", k, 1000) {
		t.Fatal("a kind seen once is tried again at once")
	}
}
