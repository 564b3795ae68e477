package lab

import (
	"testing"
	"time"
)

// spreadOf's arithmetic on known series: the median of an even count is
// the mean of the middle two, the standard deviation the sample one.
func TestSpreadOf(t *testing.T) {
	if spreadOf(nil) != nil {
		t.Error("a spread of no trials")
	}
	for _, c := range []struct {
		in   []time.Duration
		want AMTTSpread
	}{
		{[]time.Duration{7}, AMTTSpread{Median: 7, Min: 7, Max: 7}},
		{[]time.Duration{9, 1, 5}, AMTTSpread{Median: 5, StdDev: 4, Min: 1, Max: 9}},
		{[]time.Duration{4, 2, 8, 6}, AMTTSpread{Median: 5, StdDev: 3, Min: 2, Max: 8}}, // sqrt(20/3) = 2.58
	} {
		if got := spreadOf(c.in); *got != c.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", c.in, *got, c.want)
		}
	}
}
