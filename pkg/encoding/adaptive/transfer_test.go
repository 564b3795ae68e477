package adaptive_test

import (
	"bytes"
	"io"
	"math"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

func TestTransferTimeBandwidthBound(t *testing.T) {
	p := adaptive.Path{RTT: 60 * time.Millisecond, Bandwidth: 80_000}
	for _, n := range []int{0, 1, 1460, 100 << 10, 3 << 20} {
		want := 30*time.Millisecond + time.Duration(float64(n)/80_000*float64(time.Second))
		if got := p.TransferTime(n); absDur(got-want) > time.Microsecond {
			t.Errorf("TransferTime(%d) = %v, want %v", n, got, want)
		}
	}
}

// With unlimited bandwidth, slow start from one segment is NAM's equation
// 4 (rounds of a doubling window, one RTT each) plus the one-way delay:
// N segments need k whole rounds before the last, 2^(k+1)−1 ≥ N.
func TestTransferTimeSlowStartIsNAMEq4(t *testing.T) {
	const rtt = 100 * time.Millisecond
	p := adaptive.Path{RTT: rtt, Bandwidth: 1e15, InitWindow: 1000}
	for _, n := range []int{1, 2, 3, 7, 8, 15, 16, 100, 1000} {
		k := int(math.Ceil(math.Log2(float64(n+1)))) - 1
		want := rtt/2 + time.Duration(k)*rtt
		if got := p.TransferTime(n * 1000); absDur(got-want) > time.Microsecond {
			t.Errorf("%d segments: %v, want %v (%d rounds)", n, got, want, k)
		}
	}
}

func TestTransferTimeSlowStartThenBandwidth(t *testing.T) {
	// DSL: the window covers the pipe (80 kB/s × 60 ms = 4.8 kB) after two
	// rounds from 1460 bytes; then bytes flow at the link rate.
	p := adaptive.Path{RTT: 60 * time.Millisecond, Bandwidth: 80_000, InitWindow: 1460}
	n := 100_000
	want := 30*time.Millisecond + 2*60*time.Millisecond + time.Duration(float64(n-1460-2920)/80_000*float64(time.Second))
	if got := p.TransferTime(n); absDur(got-want) > time.Microsecond {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A message that fits the first window pays no round trip.
	if got, want := p.TransferTime(1000), 30*time.Millisecond+time.Duration(1000.0/80_000*float64(time.Second)); absDur(got-want) > time.Microsecond {
		t.Fatalf("one window: got %v, want %v", got, want)
	}
}

func TestTransferTimeUnknownBandwidthUsesDefault(t *testing.T) {
	var p adaptive.Path // the default: a 100 Mbit/s LAN
	want := time.Duration(float64(1<<20) / (100e6 / 8) * float64(time.Second))
	if got := p.TransferTime(1 << 20); absDur(got-want) > time.Microsecond {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// The model is validated against the emulated links in virtual time:
// linkemu has no slow start (the TCP under it runs on loopback), so the
// path it presents is its RTT and its uplink's rate, and the model must
// give the emulator's delivery time of a message written at once, for
// small and large messages alike. (Over libp2p, with TLS, yamux and the
// endpoint on top, `p2pmsg lab grid` measures the same against probed
// paths.)
func TestTransferTimeMatchesEmulatedLinks(t *testing.T) {
	for _, prof := range linkemu.Profiles() {
		path := adaptive.Path{RTT: prof.Link.RTT(), Bandwidth: float64(prof.Link.Up.Bandwidth)}
		for _, n := range []int{200, 4 << 10, 64 << 10, 1 << 20} {
			if prof.Name == "dialup" && n > 64<<10 {
				continue // minutes of virtual time: fine, but slow to simulate
			}
			got := emulate(t, prof.Link, n)
			want := path.TransferTime(n) + prof.Link.Up.Latency - prof.Link.RTT()/2 // asymmetric latency: none here
			if d := absDur(got - want); d > want/50+100*time.Microsecond {
				t.Errorf("%s, %d bytes: emulated %v, model %v", prof.Name, n, got, want)
			}
		}
	}
}

func emulate(t *testing.T, l linkemu.Link, n int) time.Duration {
	var elapsed time.Duration
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		sa, err := linkemu.Conn(a, l)
		if err != nil {
			t.Fatal(err)
		}
		payload := bytes.Repeat([]byte("x"), n)
		start := time.Now()
		go func() {
			sa.Write(payload)
			sa.Close()
		}()
		got, err := io.ReadAll(b)
		elapsed = time.Since(start)
		if err != nil || len(got) != n {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		b.Close()
	})
	return elapsed
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
