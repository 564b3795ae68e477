package linkemu_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
	os.Exit(0)
}

func mustProfile(t *testing.T, name string) linkemu.Profile {
	t.Helper()
	p, err := linkemu.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// transfer writes n bytes through a wrapped end and returns how long the
// receiver took to get them all, in synctest's virtual time.
func transfer(t *testing.T, l linkemu.Link, n int) time.Duration {
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

func TestDSLTransferMatchesAnalyticTime(t *testing.T) {
	dsl := mustProfile(t, "dsl")
	const n = 100 << 10
	got := transfer(t, dsl.Link, n)
	want := dsl.Link.Up.TransferTime(n) // 102400 B at 80000 B/s + 30 ms = 1.31 s
	if diff := got - want; diff < -want/10 || diff > want/10 {
		t.Fatalf("100 KiB over dsl took %v, analytic %v (more than 10%% off)", got, want)
	}
	t.Logf("100 KiB over dsl: %v (analytic %v)", got, want)
}

func TestEveryProfileTransfers(t *testing.T) {
	for _, p := range linkemu.Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			n := 20 << 10
			got := transfer(t, p.Link, n)
			want := p.Link.Up.TransferTime(n)
			if got < want-want/1000 || got > want+want/10+time.Millisecond {
				t.Fatalf("%d bytes took %v, analytic %v", n, got, want)
			}
			if p.Source == "" || p.Description == "" {
				t.Fatal("profile lacks its description or source")
			}
		})
	}
}

// TestBothDirectionsAndOrder: an echo through a jittery link returns every
// byte in order, and the round trip costs at least both latencies.
func TestBothDirectionsAndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := linkemu.Link{
			Up:   linkemu.Shape{Bandwidth: 1 << 20, Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond},
			Down: linkemu.Shape{Bandwidth: 1 << 19, Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond},
		}
		a, b := net.Pipe()
		sa, err := linkemu.Conn(a, l, linkemu.WithSeed(42))
		if err != nil {
			t.Fatal(err)
		}
		go func() { io.Copy(b, b); b.Close() }()
		payload := make([]byte, 300<<10)
		r := rand.New(rand.NewPCG(1, 1))
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
		start := time.Now()
		go func() { sa.Write(payload) }()
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(sa, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("echo differs: bytes lost or reordered")
		}
		if el := time.Since(start); el < l.RTT() {
			t.Fatalf("round trip %v shorter than the propagation RTT %v", el, l.RTT())
		}
		sa.Close()
	})
}

// TestQueueLimitBlocksWrites: with a small queue, Write returns only once
// most of the data has crossed the link.
func TestQueueLimitBlocksWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := linkemu.Link{Up: linkemu.Shape{Bandwidth: 10_000, QueueLimit: 2000}}
		a, b := net.Pipe()
		sa, _ := linkemu.Conn(a, l)
		go io.Copy(io.Discard, b)
		start := time.Now()
		if _, err := sa.Write(make([]byte, 20_000)); err != nil {
			t.Fatal(err)
		}
		// 20 kB at 10 kB/s: Write can return only when at most the queue
		// (2 kB, plus a packet in flight) remains, i.e. after >= 1.6 s.
		if el := time.Since(start); el < 1600*time.Millisecond {
			t.Fatalf("Write returned after %v: the queue limit did not hold", el)
		}
		sa.Close()
		b.Close()
	})
}

func TestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		sa, _ := linkemu.Conn(a, linkemu.Link{Down: linkemu.Shape{Latency: time.Second}})
		sa.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		go b.Write([]byte("late"))
		var ne net.Error
		if _, err := sa.Read(make([]byte, 4)); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Read before the data's arrival: %v, want a timeout", err)
		}
		sa.SetReadDeadline(time.Time{})
		buf := make([]byte, 4)
		if _, err := io.ReadFull(sa, buf); err != nil || string(buf) != "late" {
			t.Fatalf("after clearing the deadline: %q, %v", buf, err)
		}
		sa.Close()
		b.Close()
	})
}

func TestPeerGoneFailsWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		sa, _ := linkemu.Conn(a, linkemu.Link{Up: linkemu.Shape{Latency: time.Millisecond}})
		b.Close()
		var err error
		for i := 0; i < 10 && err == nil; i++ {
			_, err = sa.Write([]byte("into the void"))
			time.Sleep(10 * time.Millisecond)
		}
		if err == nil {
			t.Fatal("writes to a closed peer kept succeeding")
		}
		sa.Close()
	})
}

func TestLookup(t *testing.T) {
	if _, err := linkemu.Lookup("carrier-pigeon"); !errors.Is(err, linkemu.ErrUnknownProfile) {
		t.Fatalf("unknown profile: %v", err)
	}
	if p := mustProfile(t, "dsl"); p.Link.Up.Bandwidth != 80_000 {
		t.Fatalf("dsl uplink %d B/s, want 80000 (640 kbit/s)", p.Link.Up.Bandwidth)
	}
	if p := mustProfile(t, "transatlantic"); p.Link.RTT() != 178*time.Millisecond {
		t.Fatalf("transatlantic RTT %v", p.Link.RTT())
	}
	if _, err := linkemu.Conn(nil, linkemu.Link{Up: linkemu.Shape{Latency: -1}}); !errors.Is(err, linkemu.ErrBadShape) {
		t.Fatalf("negative latency: %v", err)
	}
}

// TestCloseWithStuckPeer: Close returns even when the peer never reads.
func TestCloseWithStuckPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		sa, _ := linkemu.Conn(a, linkemu.Link{Up: linkemu.Shape{Bandwidth: 1000, Latency: 10 * time.Millisecond}})
		if _, err := sa.Write(make([]byte, 3000)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sa.Close()
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("Close took %v", el)
		}
		b.Close()
	})
}
