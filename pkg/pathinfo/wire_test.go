package pathinfo

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func sampleReport() report {
	return report{Received: 65536, FirstChunk: 1024, Span: 800 * time.Millisecond, Bursts: []burst{
		{Bytes: 14600, Start: 0, Dur: 100 * time.Millisecond},
		{Bytes: 29200, Start: 250 * time.Millisecond, Dur: 200 * time.Millisecond},
		{Bytes: 21736, Start: 600 * time.Millisecond, Dur: 200 * time.Millisecond},
	}}
}

func TestReportRoundTrip(t *testing.T) {
	r := sampleReport()
	got, err := parseReport(appendReport(nil, r))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("got %+v, want %+v", got, r)
	}
}

func TestParseReportRejects(t *testing.T) {
	good := appendReport(nil, sampleReport())
	over := sampleReport()
	over.Bursts[0].Bytes = 60000 // bursts add up to more than received
	late := sampleReport()
	late.Bursts[2].Dur = time.Second // past the span
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"bursts exceed bytes", appendReport(nil, over)},
		{"burst past span", appendReport(nil, late)},
		{"too many bursts", appendReport(nil, report{Received: 10, Span: 1, Bursts: make([]burst, maxBursts+1)})},
		{"too long", make([]byte, maxReport+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseReport(tc.b); !errors.Is(err, ErrProtocol) {
				t.Fatalf("err %v, want ErrProtocol", err)
			}
		})
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add(appendReport(nil, sampleReport()))
	f.Add(appendReport(nil, report{}))
	f.Add([]byte{0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseReport(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		back, err := parseReport(appendReport(nil, r))
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip: %+v, %v", back, err)
		}
		estimate(r, 50*time.Millisecond) // must not panic
	})
}

func TestReadRequest(t *testing.T) {
	h := probeHeader{Size: 4096, Gap: 30 * time.Millisecond}
	op, got, err := readRequest(bufio.NewReader(bytes.NewReader(appendProbeHeader(nil, h))))
	if err != nil || op != opProbe || got != h {
		t.Fatalf("probe header: %d %+v %v", op, got, err)
	}
	if op, _, err := readRequest(bufio.NewReader(bytes.NewReader([]byte{opProfile}))); err != nil || op != opProfile {
		t.Fatalf("profile request: %d %v", op, err)
	}
	for _, b := range [][]byte{
		{9},          // unknown
		{opProbe, 0}, // empty probe
		appendProbeHeader(nil, probeHeader{Size: MaxProbe + 1}), // too large
		appendProbeHeader(nil, probeHeader{Size: 1, Gap: maxGap + 1}),
		{opProbe, 0x80}, // truncated varint
	} {
		if _, _, err := readRequest(bufio.NewReader(bytes.NewReader(b))); err == nil {
			t.Errorf("%x: accepted", b)
		}
	}
}

// FuzzReadRequest: a request a peer sends is refused with ErrProtocol
// (or ends with the stream) or is a profile request or a probe within the
// bounds, whose header written again reads back the same.
func FuzzReadRequest(f *testing.F) {
	f.Add(appendProbeHeader(nil, probeHeader{Size: 4096, Gap: time.Millisecond}))
	f.Add([]byte{opProfile})
	f.Add([]byte{opProbe, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		op, h, err := readRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			if len(b) > 0 && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		switch op {
		case opProfile:
		case opProbe:
			if h.Size < 1 || h.Size > MaxProbe || h.Gap < 0 || h.Gap > maxGap {
				t.Fatalf("accepted out-of-bounds probe %+v", h)
			}
			// What was read, written again, reads back the same.
			op2, h2, err := readRequest(bufio.NewReader(bytes.NewReader(appendProbeHeader(nil, h))))
			if err != nil || op2 != op || h2 != h {
				t.Fatalf("probe %+v written again read back as %d %+v, %v", h, op2, h2, err)
			}
		default:
			t.Fatalf("accepted request %d", op)
		}
	})
}

func TestRecorderCutsBursts(t *testing.T) {
	t0 := time.Unix(0, 0)
	rec := recorder{gap: 20 * time.Millisecond}
	for _, r := range []struct {
		n  int
		at time.Duration
	}{{1000, 0}, {1000, 5 * time.Millisecond}, {1000, 10 * time.Millisecond}, {2000, 60 * time.Millisecond}, {2000, 65 * time.Millisecond}} {
		rec.read(r.n, t0.Add(r.at))
	}
	want := report{Received: 7000, FirstChunk: 1000, Span: 65 * time.Millisecond, Bursts: []burst{
		{Bytes: 3000, Start: 0, Dur: 10 * time.Millisecond},
		{Bytes: 4000, Start: 60 * time.Millisecond, Dur: 5 * time.Millisecond},
	}}
	if !reflect.DeepEqual(rec.rep, want) {
		t.Fatalf("got %+v, want %+v", rec.rep, want)
	}
}

func TestEstimate(t *testing.T) {
	// One burst: bytes after the first read over the span.
	bw, iw, ok := estimate(report{Received: 5000, FirstChunk: 1000, Span: 50 * time.Millisecond, Bursts: []burst{{Bytes: 5000, Dur: 50 * time.Millisecond}}}, 60*time.Millisecond)
	if !ok || iw != 0 || bw != 80_000 {
		t.Fatalf("one burst: %g B/s, iw %d, %v; want 80000, 0", bw, iw, ok)
	}
	// Slow start on a 100 ms path: bursts 14.6 kB, 29.2 kB, 21.7 kB, a
	// round trip apart; the idle gaps do not count against the rate.
	r := sampleReport()
	bw, iw, ok = estimate(r, 100*time.Millisecond)
	want := float64(r.Received-r.FirstChunk) / (800*time.Millisecond - 150*time.Millisecond - 150*time.Millisecond).Seconds()
	if !ok || iw != 14600 || bw != want {
		t.Fatalf("slow start: %g B/s, iw %d, %v; want %g, 14600", bw, iw, ok, want)
	}
	// The same gaps on a 1 ms path are scheduling noise: no slow start,
	// nothing subtracted.
	bw, iw, _ = estimate(r, time.Millisecond)
	if iw != 0 || bw != float64(r.Received-r.FirstChunk)/0.8 {
		t.Fatalf("short RTT: %g B/s, iw %d", bw, iw)
	}
	// Dial-up: each 1 KiB write takes 240 ms, more than half the RTT, so
	// every read is a burst and the gaps are serialization, not idleness.
	dial := report{Received: 4096, FirstChunk: 1024, Span: 720 * time.Millisecond, Bursts: []burst{
		{Bytes: 1024}, {Bytes: 1024, Start: 240 * time.Millisecond}, {Bytes: 1024, Start: 480 * time.Millisecond}, {Bytes: 1024, Start: 720 * time.Millisecond},
	}}
	if bw, iw, ok := estimate(dial, 200*time.Millisecond); !ok || iw != 0 || math.Abs(bw-3072/0.72) > 1 {
		t.Fatalf("dial-up: %g B/s, iw %d, %v; want %g", bw, iw, ok, 3072/0.72)
	}
	// DSL under TLS: 16 KiB records, each read at once, 205 ms apart on
	// a 60 ms path: serialization, not idleness (before, the gaps were
	// subtracted and the rate read 31 times too high), and the first
	// record's bytes, read with the first read, took no time that shows
	// (before, counted: 1.3 times too high).
	lumps := report{Received: 65536, FirstChunk: 2048, Span: 615 * time.Millisecond, Bursts: []burst{
		{Bytes: 14336, Dur: 4 * time.Microsecond}, {Bytes: 16384, Start: 205 * time.Millisecond}, {Bytes: 16384, Start: 410 * time.Millisecond}, {Bytes: 18432, Start: 615 * time.Millisecond},
	}}
	if bw, iw, ok := estimate(lumps, 60*time.Millisecond); !ok || iw != 0 || math.Abs(bw-51200/(0.615-4e-6)) > 1 {
		t.Fatalf("TLS records: %g B/s, iw %d, %v; want %g", bw, iw, ok, 51200/(0.615-4e-6))
	}
	// A first burst read over time is timed: a stream window's stall
	// after 256 KiB (transatlantic: 20 ms, then the last bytes a round
	// trip later) is the first burst, nearly all of the train.
	stall := report{Received: 262144, FirstChunk: 8192, Span: 189 * time.Millisecond, Bursts: []burst{
		{Bytes: 262092, Dur: 20 * time.Millisecond}, {Bytes: 52, Start: 189 * time.Millisecond},
	}}
	if bw, _, ok := estimate(stall, 178*time.Millisecond); !ok || math.Abs(bw-253952/0.020) > 1 {
		t.Fatalf("window stall: %g B/s, %v; want %g", bw, ok, 253952/0.020)
	}
	if _, _, ok := estimate(report{Received: 10, FirstChunk: 10}, time.Millisecond); ok {
		t.Fatal("a train in one read has no rate")
	}
}
