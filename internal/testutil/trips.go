package testutil

import (
	"slices"
	"testing"
	"time"
)

// BenchTrips runs trip warmUp times untimed, then b.N times timed, and
// reports the median of the timed ones as p50-ns: for round-trip
// benchmarks, whose mean hides the tail of a noisy machine.
func BenchTrips(b *testing.B, warmUp int, trip func() time.Duration) {
	b.Helper()
	for range warmUp {
		trip()
	}
	d := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range d {
		d[i] = trip()
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2]), "p50-ns")
}
