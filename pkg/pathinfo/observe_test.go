package pathinfo

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// testMonitor is a monitor on no network: what it learns comes only from
// the exchanges a test reports.
func testMonitor(p adaptive.Path) *Monitor {
	s := &Service{models: adaptive.NewModels(), cfg: config{clock: fixedClock{time.Unix(1_700_000_000, 0)}, maxAge: time.Hour}}
	m := &Monitor{svc: s, key: "peer", kick: make(chan struct{}, 1), path: p, known: p.Known()}
	m.publish()
	return m
}

// exchange is an exchange of n bytes on a path of RTT rtt, bandwidth bw
// and a fixed cost over.
func exchange(n int, rtt time.Duration, bw float64, over time.Duration) time.Duration {
	return rtt + over + time.Duration(float64(n)/bw*float64(time.Second))
}

const lanBW = 12.5e6

func lan() adaptive.Path { return adaptive.Path{RTT: 200 * time.Microsecond, Bandwidth: lanBW} }

func TestSmallExchangesTeachTheFixedCost(t *testing.T) {
	m := testMonitor(lan())
	for range 5 {
		m.ObserveExchange(300, exchange(300, 200*time.Microsecond, lanBW, 1500*time.Microsecond))
	}
	if m.Path().Bandwidth != lanBW {
		t.Fatalf("bandwidth moved to %g on small exchanges", m.Path().Bandwidth)
	}
	if d := m.overhead - 1500*time.Microsecond; d < -2*time.Microsecond || d > 2*time.Microsecond {
		t.Fatalf("fixed cost %v, want 1.5ms", m.overhead)
	}
	// A delay spike raises it only a little; a low sample lowers it fast.
	m.ObserveExchange(300, exchange(300, 200*time.Microsecond, lanBW, 20*time.Millisecond))
	if m.overhead > 3*time.Millisecond {
		t.Fatalf("one 20 ms spike raised the fixed cost to %v", m.overhead)
	}
}

func TestExchangesRefineTheBandwidth(t *testing.T) {
	m := testMonitor(adaptive.Path{RTT: 200 * time.Microsecond, Bandwidth: 15e6}) // the probe said 15 MB/s
	m.ObserveExchange(300, exchange(300, 200*time.Microsecond, lanBW, time.Millisecond))
	for range 30 {
		m.ObserveExchange(100_000, exchange(100_000, 200*time.Microsecond, lanBW, time.Millisecond))
	}
	if bw := m.Path().Bandwidth; math.Abs(bw-lanBW) > 0.02*lanBW {
		t.Fatalf("bandwidth %g after 30 exchanges at %g", bw, lanBW)
	}
	if m.Stats().Changes != 0 {
		t.Fatal("refining counted as a change")
	}
}

func TestLinkChangeIsBelievedAtOnceWhenMuchSlower(t *testing.T) {
	m := testMonitor(lan())
	m.ObserveExchange(300, exchange(300, 200*time.Microsecond, lanBW, time.Millisecond))
	// The LAN became a DSL uplink: 46 kB take 575 ms instead of 3.7.
	m.ObserveExchange(46_000, exchange(46_000, 60*time.Millisecond, 80_000, time.Millisecond))
	bw := m.Path().Bandwidth
	if bw > 100_000 || bw < 60_000 {
		t.Fatalf("after one exchange on the slower link: %g B/s, want about 80000", bw)
	}
	select {
	case <-m.kick:
	default:
		t.Fatal("the watch loop was not asked to probe again")
	}
	if r, ok := m.svc.models.Peer("peer"); !ok || r.Path.Bandwidth != bw {
		t.Fatalf("the new path was not remembered: %+v", r)
	}
}

func TestModerateSurpriseMustRepeat(t *testing.T) {
	m := testMonitor(lan())
	m.ObserveExchange(300, exchange(300, 200*time.Microsecond, lanBW, time.Millisecond))
	slow := exchange(100_000, 200*time.Microsecond, lanBW/3, time.Millisecond)
	m.ObserveExchange(100_000, slow) // a burst of load, or the link?
	if m.Path().Bandwidth != lanBW {
		t.Fatalf("one 3× surprise changed the bandwidth to %g", m.Path().Bandwidth)
	}
	m.ObserveExchange(100_000, exchange(100_000, 200*time.Microsecond, lanBW, time.Millisecond))
	m.ObserveExchange(100_000, slow) // not in a row: still noise
	m.ObserveExchange(100_000, slow)
	if m.Stats().Changes != 0 {
		t.Fatal("two slower surprises in a row taken as a change")
	}
	// The third in a row is the link; the least delayed of the three
	// says its rate.
	m.ObserveExchange(100_000, exchange(100_000, 200*time.Microsecond, lanBW/4, time.Millisecond))
	if bw := m.Path().Bandwidth; math.Abs(bw-lanBW/3) > 0.05*lanBW {
		t.Fatalf("three slower surprises in a row (3×, 3×, 4×) left %g, want %g", bw, lanBW/3)
	}
	if m.Stats().Changes != 1 {
		t.Fatalf("%d changes, want 1", m.Stats().Changes)
	}
}

// A faster exchange cannot come of load: two in a row are believed.
func TestFasterSurpriseIsBelievedTheSecondTime(t *testing.T) {
	m := testMonitor(adaptive.Path{RTT: 200 * time.Microsecond, Bandwidth: lanBW / 4})
	m.ObserveExchange(300, exchange(300, 200*time.Microsecond, lanBW, time.Millisecond))
	fast := exchange(100_000, 200*time.Microsecond, lanBW, time.Millisecond)
	m.ObserveExchange(100_000, fast)
	if bw := m.Path().Bandwidth; bw != lanBW/4 {
		t.Fatalf("one 4× faster exchange changed the bandwidth to %g", bw)
	}
	m.ObserveExchange(100_000, fast)
	if bw := m.Path().Bandwidth; math.Abs(bw-lanBW) > 0.05*lanBW {
		t.Fatalf("two 4× faster exchanges in a row left %g, want %g", bw, float64(lanBW))
	}
}

func TestFirstExchangeSetsAnUnknownBandwidth(t *testing.T) {
	m := testMonitor(adaptive.Path{RTT: 60 * time.Millisecond})
	if m.Path().Known() {
		t.Fatal("known before any measurement")
	}
	m.ObserveExchange(100, exchange(100, 60*time.Millisecond, 80_000, 0)) // too short to tell
	if m.Path().Known() {
		t.Fatal("a 1 ms transfer set the bandwidth")
	}
	m.ObserveExchange(80_000, exchange(80_000, 60*time.Millisecond, 80_000, 0))
	if bw := m.Path().Bandwidth; math.Abs(bw-80_000) > 1 {
		t.Fatalf("bandwidth %g, want 80000", bw)
	}
}

// A path believed fast makes even a mid-sized message look too small to
// tell its rate; when it takes seconds, it tells anyway.
func TestGrossUnderestimateIsCaughtOnSmallPredictions(t *testing.T) {
	m := testMonitor(adaptive.Path{RTT: 60 * time.Millisecond, Bandwidth: 60e6}) // a probe gone wrong
	m.ObserveExchange(300, exchange(300, 60*time.Millisecond, 80_000, time.Millisecond))
	m.ObserveExchange(17_000, exchange(17_000, 60*time.Millisecond, 80_000, time.Millisecond))
	if bw := m.Path().Bandwidth; bw > 100_000 {
		t.Fatalf("17 kB taking 210 ms left the bandwidth at %g", bw)
	}
}

// A transfer lost in the fixed cost's jitter says the rate is higher, not
// how much: one change raises it at most maxRise times.
func TestRiseIsBounded(t *testing.T) {
	m := testMonitor(adaptive.Path{RTT: 239 * time.Microsecond, Bandwidth: 0.649e6}) // after a long delay
	m.ObserveExchange(300, exchange(300, 239*time.Microsecond, lanBW, time.Millisecond))
	for range 4 {
		m.ObserveExchange(9_000, 239*time.Microsecond+500*time.Microsecond) // less than the fixed cost: no time left for the bytes
	}
	if bw := m.Path().Bandwidth; bw > 0.649e6*maxRise*maxRise*1.001 || bw <= 0.649e6 {
		t.Fatalf("bandwidth %g after 4 exchanges too short to time, want above 0.649e6 and at most %g", bw, 0.649e6*maxRise*maxRise)
	}
}

// noisy is a deterministic scheduling noise: 0–40 µs, and every 7th
// exchange a 2 ms pause.
func noisy(i int) time.Duration {
	if i%7 == 3 {
		return 2 * time.Millisecond
	}
	return time.Duration((i*7919)%41) * time.Microsecond
}

// Excess is what a codec's short exchanges took beyond the model, against
// sending as is: the codec's hidden costs, and the rate's error at the
// sizes compared, so that the predicted difference becomes the one seen.
func TestExcessComparesKindsAtTheirSizes(t *testing.T) {
	const (
		rtt    = 113 * time.Microsecond
		over   = 110 * time.Microsecond
		trueBW = 476e6
		hidden = 100 * time.Microsecond // what an s2 exchange costs beyond its codec
		raw    = 86_081
		packed = 16_519
	)
	for _, believed := range []float64{trueBW, 202e6} {
		m := testMonitor(adaptive.Path{RTT: rtt, Bandwidth: believed})
		if _, ok := m.Excess("s2:1", packed, raw); ok {
			t.Fatal("an excess before any exchange")
		}
		for i := range 40 {
			if i%2 == 0 {
				m.ObserveExchangeOf(adaptive.Identity, raw, exchange(raw, rtt, trueBW, over)+noisy(i))
			} else {
				m.ObserveExchangeOf("s2:1", packed, exchange(packed, rtt, trueBW, over)+hidden+noisy(i))
			}
		}
		// Predicted: the bytes at the believed rate; seen: at the true one.
		perByte := func(bw float64) float64 { return float64(time.Second) / bw }
		want := hidden + time.Duration(float64(packed-raw)*(perByte(trueBW)-perByte(believed)))
		got, ok := m.Excess("s2:1", packed, raw)
		if !ok || got < want-25*time.Microsecond || got > want+25*time.Microsecond {
			t.Errorf("believed %g: excess %v (%v), want %v ± 25µs", believed, got, ok, want)
		}
		for _, q := range []struct {
			spec      string
			size, raw int
		}{
			{"zstd:3", packed, raw},   // never sent
			{"s2:1", 600, raw},        // no s2 exchange of that size
			{"s2:1", packed, 300_000}, // nor sent as is at that size
		} {
			if d, ok := m.Excess(q.spec, q.size, q.raw); ok {
				t.Errorf("Excess(%q, %d, %d) = %v with nothing seen", q.spec, q.size, q.raw, d)
			}
		}
		if m.Path().Bandwidth != believed {
			t.Errorf("short exchanges moved the rate to %g", m.Path().Bandwidth)
		}
	}
}

// A path change starts the record of short exchanges afresh: what they
// left over the old path says nothing of the new.
func TestPathChangeClearsTheSizeClasses(t *testing.T) {
	m := testMonitor(adaptive.Path{RTT: 113 * time.Microsecond, Bandwidth: 476e6})
	for i := range 40 {
		kind, n := adaptive.Identity, 86_081
		if i%2 == 1 {
			kind, n = "s2:1", 16_519
		}
		m.ObserveExchangeOf(kind, n, exchange(n, 113*time.Microsecond, 476e6, 110*time.Microsecond)+noisy(i))
		if kind != adaptive.Identity {
			m.ObserveExchangeOf(kind, n, exchange(n, 113*time.Microsecond, 476e6, 110*time.Microsecond)+100*time.Microsecond+noisy(i))
		}
	}
	if _, ok := m.Excess("s2:1", 16_519, 86_081); !ok {
		t.Fatal("short exchanges not recorded")
	}
	m.SetPath(adaptive.Path{RTT: 40 * time.Millisecond, Bandwidth: 80_000})
	if _, ok := m.Excess("s2:1", 16_519, 86_081); ok || len(m.classes) != 0 {
		t.Fatalf("%d kinds of exchange kept across a path change", len(m.classes))
	}
}

func TestKindsAreBounded(t *testing.T) {
	m := testMonitor(lan())
	for k := range 2 * maxKinds {
		for range classReady {
			m.ObserveExchangeOf(fmt.Sprint("codec:", k), 2_000, exchange(2_000, 200*time.Microsecond, lanBW, time.Millisecond))
		}
	}
	if len(m.classes) != maxKinds {
		t.Fatalf("%d kinds kept, want at most %d", len(m.classes), maxKinds)
	}
}

// A difference within the noise of the two medians is not reported: on a
// jittery link a few microseconds of a small element's codec drown.
func TestExcessWithinTheNoiseIsNotReported(t *testing.T) {
	const rtt, over = 300 * time.Microsecond, 100 * time.Microsecond
	jitter := func(i int) time.Duration { return time.Duration((i*7919)%121) * time.Microsecond } // 0–120 µs
	for _, c := range []struct {
		hidden time.Duration
		want   bool
	}{
		{12 * time.Microsecond, false},
		{200 * time.Microsecond, true},
	} {
		m := testMonitor(adaptive.Path{RTT: rtt, Bandwidth: 125e6})
		for i := range 64 {
			if i%2 == 0 {
				m.ObserveExchangeOf(adaptive.Identity, 350, exchange(350, rtt, 125e6, over)+jitter(i))
			} else {
				m.ObserveExchangeOf("s2:1", 340, exchange(340, rtt, 125e6, over)+c.hidden+jitter(i))
			}
		}
		if x, ok := m.Excess("s2:1", 340, 350); ok != c.want {
			t.Errorf("hidden %v under 0–120 µs of jitter: excess %v reported %v, want reported %v", c.hidden, x, ok, c.want)
		}
	}
}
