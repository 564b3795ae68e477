package pathinfo

import (
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// What exchanges do to a monitor's path, without a network: a monitor
// whose path is 1 MB/s with a 10 ms RTT is told of exchanges, and its
// bandwidth and changes are checked. Each exchange is n bytes taking the
// RTT, its bytes at rate, and extra.
func TestObserveExchange(t *testing.T) {
	const rtt = 10 * time.Millisecond
	at := func(n int, rate float64, extra time.Duration) time.Duration {
		return rtt + time.Duration(float64(n)/rate*float64(time.Second)) + extra
	}
	type ex struct {
		n int
		d time.Duration
	}
	for _, tc := range []struct {
		name        string
		bw          float64 // the monitor's at the start; 0: unknown
		exchanges   []ex
		wantBW      float64 // within 1%
		wantChanges int
	}{
		{"unknown rate set by the first long exchange", 0, []ex{{100_000, at(100_000, 2e6, 0)}}, 2e6, 0},
		{"short exchange leaves the rate", 1e6, []ex{{100, at(100, 1e6, 3*time.Millisecond)}}, 1e6, 0},
		{"agreeing exchange refines the rate", 1e6, []ex{{100_000, at(100_000, 1.2e6, 0)}}, 1e6 + feedAlpha*0.2e6, 0},
		{"one slow exchange is a delay", 1e6, []ex{{100_000, at(100_000, 0.25e6, 0)}}, 1e6, 0},
		{"changeAfter slow exchanges are a change", 1e6, []ex{
			{100_000, at(100_000, 0.25e6, 0)}, {100_000, at(100_000, 0.25e6, 0)}, {100_000, at(100_000, 0.25e6, 0)},
		}, 0.25e6, 1},
		{"the streak must be in a row", 1e6, []ex{
			{100_000, at(100_000, 0.25e6, 0)}, {100_000, at(100_000, 4e6, 0)}, {100_000, at(100_000, 0.25e6, 0)},
		}, 1e6, 0},
		{"faster too", 1e6, []ex{
			{1_000_000, at(1_000_000, 4e6, 0)}, {1_000_000, at(1_000_000, 4e6, 0)}, {1_000_000, at(1_000_000, 4e6, 0)},
		}, 4e6, 1},
		{"nonsense ignored", 1e6, []ex{{0, time.Second}, {100, -time.Second}}, 1e6, 0},
		// A LAN turned DSL: exchanges too short to time the LAN's rate
		// take long enough to time the new one.
		{"short exchanges delayed less than minSpan leave the rate", 12.5e6, []ex{
			{7000, at(7000, 12.5e6, 8*time.Millisecond)}, {7000, at(7000, 12.5e6, 8*time.Millisecond)}, {7000, at(7000, 12.5e6, 8*time.Millisecond)},
		}, 12.5e6, 0},
		{"a short exchange slower by minSpan is a delay", 12.5e6, []ex{{7000, at(7000, 80e3, 0)}, {7000, at(7000, 12.5e6, 0)}}, 12.5e6, 0},
		{"changeAfter short exchanges slower by minSpan are a change", 12.5e6, []ex{
			{7000, at(7000, 80e3, 0)}, {7000, at(7000, 80e3, 0)}, {7000, at(7000, 80e3, 0)},
		}, 80e3, 1},
		// DSL turned LAN: exchanges shorter than the known RTT, whose
		// transfer is too short to time, bound the rate from below.
		{"exchanges faster than the RTT bound the rate by their whole time", 80e3, []ex{
			{5000, 2 * time.Millisecond}, {5000, 2 * time.Millisecond}, {5000, 2 * time.Millisecond},
		}, 2.5e6, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Monitor{svc: &Service{models: adaptive.NewModels()},
				path: adaptive.Path{RTT: rtt, Bandwidth: tc.bw}}
			for _, e := range tc.exchanges {
				m.ObserveExchange(e.n, e.d)
			}
			if got := m.Path().Bandwidth; got < tc.wantBW*0.99 || got > tc.wantBW*1.01 {
				t.Fatalf("bandwidth %g, want %g", got, tc.wantBW)
			}
			if got := m.Stats().Changes; got != tc.wantChanges {
				t.Fatalf("%d changes, want %d", got, tc.wantChanges)
			}
		})
	}
}
