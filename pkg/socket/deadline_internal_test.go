package socket

import (
	"math"
	"testing"
	"time"
)

// TestDeadlineNanos: every deadline a caller can set maps to one the
// checks before I/O read right: none stays none, any time at or before
// the Unix epoch is past (UnixNano would read 0, "none", or overflow),
// and one beyond UnixNano's range (year 2262) is as good as none.
func TestDeadlineNanos(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		t       time.Time
		want    int64
		expired bool
	}{
		{"none", time.Time{}, 0, false},
		{"now", now, now.UnixNano(), true},
		{"the epoch", time.Unix(0, 0), 1, true},
		{"before the epoch", time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), 1, true},
		{"year 3000", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64, false},
		{"in an hour", now.Add(time.Hour), now.Add(time.Hour).UnixNano(), false},
	} {
		d := deadlineNanos(tc.t)
		if d != tc.want || expired(d) != tc.expired {
			t.Errorf("%s: %d (expired %v), want %d (%v)", tc.name, d, expired(d), tc.want, tc.expired)
		}
	}
}
