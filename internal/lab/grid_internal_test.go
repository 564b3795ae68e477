package lab

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		got, ref time.Duration
		pct      float64
		want     bool
	}{
		{105 * time.Millisecond, 100 * time.Millisecond, 5, true},
		{106 * time.Millisecond, 100 * time.Millisecond, 5, false},
		{2900 * time.Microsecond, 2 * time.Millisecond, 5, true}, // the 1 ms floor
		{3100 * time.Microsecond, 2 * time.Millisecond, 5, false},
		{90 * time.Millisecond, 100 * time.Millisecond, 2, true},
	} {
		if got := within(tc.got, tc.ref, tc.pct); got != tc.want {
			t.Errorf("within(%v, %v, %g%%) = %v", tc.got, tc.ref, tc.pct, got)
		}
	}
}

func TestGridMean(t *testing.T) {
	// Five trials: the AMTT experiment's trimmed mean.
	if got, want := gridMean(msSeries(1, 2, 3, 4, 100)), trimmedMean(msSeries(1, 2, 3, 4, 100)); got != want {
		t.Fatalf("five trials: %v, want %v", got, want)
	}
	// Ten: a fifth off each end, so two bursts of delay are dropped.
	if got := gridMean(msSeries(10, 10, 10, 10, 10, 10, 10, 10, 90, 95)); got != 10*time.Millisecond {
		t.Fatalf("ten trials with two delayed: %v", got)
	}
}

func TestAdaptation(t *testing.T) {
	ms := time.Millisecond
	steps := func(times ...int) []SwitchStep {
		var out []SwitchStep
		for i, v := range times {
			out = append(out, SwitchStep{Index: i + 1, Time: time.Duration(v) * ms, Choice: "x"})
		}
		return out
	}
	best := 100 * ms
	// Two slow messages, then right, with one isolated delay later.
	at, misses := adaptation(steps(500, 300, 101, 100, 102, 180, 100, 101), best)
	if at != 3 || misses != 1 {
		t.Fatalf("adapted at %d with %d misses, want 3 and 1", at, misses)
	}
	if at, _ := adaptation(steps(500, 300, 200), best); at != -1 {
		t.Fatalf("never within, but adapted at %d", at)
	}
	ref := []GridResult{{Profile: "dsl", Choice: "x", AMTT: 103 * ms}, {Profile: "dsl", Choice: "y", AMTT: 200 * ms}}
	s := steps(500, 300, 100, 100)
	s[0].Choice, s[1].Choice = "y", "y"
	if at := choiceAdaptation(s, ref, "dsl", best); at != 3 {
		t.Fatalf("choice adapted at %d, want 3", at)
	}
}

// msSeries is a series of exchange times in milliseconds.
func msSeries(v ...float64) []time.Duration {
	var d []time.Duration
	for _, x := range v {
		d = append(d, time.Duration(x*float64(time.Millisecond)))
	}
	return d
}

func TestPairedRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b []time.Duration
		want float64
	}{
		// The machine slows down mid-run: the medians' ratio (3/1 = 3)
		// mixes rounds, the paired ratio does not.
		{msSeries(1, 1, 3, 3, 3), msSeries(1, 1, 1, 3, 3), 1},
		{msSeries(2, 4), msSeries(1, 2), 2},
		{msSeries(1, 3), msSeries(1, 1), 2}, // even count: the mean of the middle two
		{msSeries(1, 5), msSeries(0, 1), 5}, // a round without the baseline is skipped
		{msSeries(1), msSeries(0), 0},       // nothing to compare
	} {
		if got := pairedRatio(tc.a, tc.b); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("pairedRatio(%v, %v) = %g, want %g", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSignRank(t *testing.T) {
	// Ranks of the sign test's 95% interval for a median, as tabulated.
	for _, tc := range []struct{ n, want int }{
		{5, 0}, // even [min, max] covers only 93.75%
		{6, 1},
		{10, 2},
		{20, 6},
		{100, 40},
		{1000, 469},
	} {
		if got := signRank(tc.n, 0.025); got != tc.want {
			t.Errorf("signRank(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestPairedInterval(t *testing.T) {
	var a, b []time.Duration
	for i := range 100 {
		a = append(a, time.Duration(100-i)*time.Millisecond) // ratios 100..1, unsorted
		b = append(b, time.Millisecond)
	}
	b[0] = 0 // a round without the baseline is skipped: ratios 99..1 remain
	lo, hi, ok := pairedInterval(a, b)
	if !ok || lo != 40 || hi != 60 {
		t.Fatalf("interval of 99 ratios 1..99: [%g, %g] (%v), want [40, 60]", lo, hi, ok)
	}
	if _, _, ok := pairedInterval(a[:5], b[1:6]); ok {
		t.Fatal("an interval from five rounds")
	}
}

// A slow receiver multiplies a decode's work, not the machine's
// interruptions of it.
func TestSlowCodecMultipliesWorkNotPauses(t *testing.T) {
	c := &slowCodec{factor: 20}
	for range 5 {
		if got := c.worked(40_000, 170_000, 100*time.Microsecond); got != 100*time.Microsecond {
			t.Fatalf("a typical decode counted %v, want 100µs", got)
		}
	}
	if got := c.worked(40_000, 170_000, 5*time.Millisecond); got != 100*time.Microsecond {
		t.Fatalf("a decode interrupted for 5 ms counted %v, want the typical 100µs", got)
	}
	if got := c.worked(40_000, 170_000, 90*time.Microsecond); got != 100*time.Microsecond {
		t.Fatalf("a somewhat fast decode counted %v, want the typical 100µs", got)
	}
	// Other sizes have their own typical time.
	if got := c.worked(3_000_000, 3_500_000, 5*time.Millisecond); got != 5*time.Millisecond {
		t.Fatalf("a first decode of a larger document counted %v, want its 5ms", got)
	}
	// The typical time follows a lasting change (a faster decoder, a
	// warmer cache) within half the window.
	for range 5 {
		c.worked(40_000, 170_000, 50*time.Microsecond)
	}
	if got := c.worked(40_000, 170_000, 50*time.Microsecond); got != 50*time.Microsecond {
		t.Fatalf("after six decodes of 50µs counted %v, want 50µs", got)
	}
}

func TestSettles(t *testing.T) {
	for _, c := range []struct {
		last time.Duration
		want bool
	}{
		{0, false}, // the first exchange: nothing to settle from
		{40 * time.Microsecond, true},
		{settleBelow - 1, true},
		{settleBelow, false},
		{300 * time.Millisecond, false},
	} {
		if got := settles(c.last); got != c.want {
			t.Errorf("last exchange %v: settles %v, want %v", c.last, got, c.want)
		}
	}
}

func TestRetire(t *testing.T) {
	run := []*gridChoice{{name: ChoiceIdentity}, {name: "gzip:6"}, {name: "s2:1"}, {name: "xml:3"}, {name: ChoiceAuto}}
	times := [][]time.Duration{
		msSeries(10, 10, 10, 10, 10), // identity: 5× the best, kept all the same
		msSeries(5, 5, 5, 5, 5),      // gzip:6: 2.5×
		msSeries(2, 2, 2, 2, 2),      // s2:1: the best
		msSeries(4, 4, 4, 4, 4),      // xml:3: exactly 2×, kept
		msSeries(40, 40, 40, 40, 40), // auto: never retired
	}
	retired := make([]bool, len(run))
	retire(run, times, retired)
	if want := []bool{false, true, false, false, false}; !slices.Equal(retired, want) {
		t.Fatalf("retired %v, want %v", retired, want)
	}
	// Nothing measured yet: nothing to compare with.
	none := make([]bool, len(run))
	retire(run, make([][]time.Duration, len(run)), none)
	if slices.Contains(none, true) {
		t.Fatalf("retired %v before any round", none)
	}
	// Once retired, always: a later call does not bring it back.
	times[1] = msSeries(2, 2, 2, 2, 2)
	retire(run, times, retired)
	if !retired[1] {
		t.Fatal("gzip:6 came back")
	}
}

func TestDisturbedShare(t *testing.T) {
	run := []*gridChoice{{name: ChoiceIdentity}, {name: "gzip:6"}, {name: ChoiceAuto}}
	for _, c := range []struct {
		name  string
		times [][]time.Duration
		want  float64
	}{
		{"quiet", [][]time.Duration{msSeries(1, 1.1, 0.9, 1.5, 1), msSeries(3, 3, 3.2, 2.9, 3), msSeries(1, 1, 1, 1, 1)}, 0},
		{"twice the median is not yet disturbed", [][]time.Duration{msSeries(1, 1, 1, 1, 2), msSeries(3, 3, 3, 3, 6), nil}, 0},
		// A choice's median is its own: gzip's 6 ms is not identity's 6 ms.
		{"one stall each", [][]time.Duration{msSeries(1, 1, 1, 1, 6), msSeries(3, 3, 3, 3, 6.1), nil}, 0.2},
		// Twice a 45 µs exchange is the scheduler's jitter, not a stall.
		{"below the floor", [][]time.Duration{msSeries(0.045, 0.045, 0.045, 0.045, 0.1), msSeries(0.045, 0.045, 0.045, 0.045, 1.0), nil}, 0},
		{"a millisecond's stall", [][]time.Duration{msSeries(0.045, 0.045, 0.045, 0.045, 1.1), msSeries(3, 3, 3, 3, 3), nil}, 0.1},
		// Auto changes what it sends: its spread is not the machine's.
		{"auto left out", [][]time.Duration{msSeries(1, 1, 1, 1, 1), msSeries(3, 3, 3, 3, 3), msSeries(0.5, 0.5, 9, 9, 9)}, 0},
		{"nothing measured", [][]time.Duration{nil, nil, nil}, 0},
	} {
		if got := disturbedShare(run, c.times); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %g, want %g", c.name, got, c.want)
		}
	}
}

func TestPause(t *testing.T) {
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 2 * time.Millisecond} {
		t0 := time.Now()
		pause(d)
		if took := time.Since(t0); took < d {
			t.Errorf("pause(%v) returned after %v", d, took)
		}
	}
}

func TestMoreRounds(t *testing.T) {
	cfg := GridConfig{Trials: 5, DocBudget: time.Second}
	for _, c := range []struct {
		budget  time.Duration
		done    int
		elapsed time.Duration
		want    bool
	}{
		{time.Second, 5, 100 * time.Millisecond, true},
		{time.Second, 5, time.Second, false},
		{time.Second, maxRoundsPerTrial * 5, time.Millisecond, false},
		{-1, 5, 0, false},
	} {
		cfg.DocBudget = c.budget
		if got := moreRounds(cfg, c.done, c.elapsed); got != c.want {
			t.Errorf("budget %v, %d rounds done in %v: more %v, want %v", c.budget, c.done, c.elapsed, got, c.want)
		}
	}
}

// The summary's "over identity" column gives the difference beside the
// percentage; on loopback it is under a microsecond, where it read
// "-1.3% (−0 µs)" (a `lab grid --profile loopback` cell of 30 µs): below
// 10 µs it has a decimal.
func TestSignedAbs(t *testing.T) {
	for _, c := range []struct {
		v    float64
		d    time.Duration
		want string
	}{
		{-1.3, -400 * time.Nanosecond, "-1.3% (−0.4 µs)"},
		{0.7, 2 * time.Microsecond, "+0.7% (+2.0 µs)"},
		{12, 35 * time.Microsecond, "+12.0% (+35 µs)"},
		{-67.7, -200530 * time.Microsecond, "-67.7% (−200.53 ms)"},
		{math.NaN(), 0, "–"},
	} {
		if got := signedAbs(c.v, c.d); got != c.want {
			t.Errorf("signedAbs(%v, %v) = %q, want %q", c.v, c.d, got, c.want)
		}
	}
}
