package linkemu_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// A lossy link under a reliable stream: every byte arrives, in order, and
// a message with a lost segment arrives late by its repair, in
// synctest's virtual time: one RTT by fast retransmit when three segments
// follow the lost one, else the retransmission timeout (RTT + 200 ms),
// each lost retransmission adding the timeout again, doubled.
func TestLossIsRepairDelay(t *testing.T) {
	const latency = 50 * time.Millisecond
	link := linkemu.Link{Up: linkemu.Shape{Latency: latency, Loss: linkemu.MaxLoss}, Down: linkemu.Shape{Latency: latency}}
	rtt, rto := link.RTT(), linkemu.RTO(link.RTT())
	if rto != 300*time.Millisecond {
		t.Fatalf("RTO(%v) = %v, want RTT + 200 ms", rtt, rto)
	}
	// With k lost retransmissions: the base delay plus rto·(2 + 4 + … + 2^k).
	backoff := func(base time.Duration, k int) time.Duration {
		for i := 1; i <= k; i++ {
			base += rto << i
		}
		return base
	}
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		sa, err := linkemu.Conn(a, link, linkemu.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		var fast, timeout, clean int
		for i := range 120 {
			// One segment (a lost one is a tail loss), or ten in one
			// packet (a loss among the first seven is followed by three).
			n := linkemu.MSS
			if i%2 == 1 {
				n = 10 * linkemu.MSS
			}
			msg := bytes.Repeat([]byte{byte(i)}, n)
			start := time.Now()
			go sa.Write(msg)
			got := make([]byte, n)
			if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("message %d: %v, or not the bytes sent", i, err)
			}
			d := time.Since(start)
			kind := ""
			for k := 0; k <= 6 && kind == ""; k++ {
				switch d {
				case latency:
					kind = "clean"
				case backoff(latency+rtt, k):
					kind = "fast"
				case backoff(rto+latency, k):
					kind = "timeout"
				}
			}
			switch kind {
			case "clean":
				clean++
			case "fast":
				fast++
				if n == linkemu.MSS {
					t.Errorf("message %d, one segment: repaired by fast retransmit in %v", i, d)
				}
			case "timeout":
				timeout++
			default:
				t.Errorf("message %d of %d bytes took %v: no repair rule gives it", i, n, d)
			}
		}
		if fast == 0 || timeout == 0 || clean == 0 {
			t.Errorf("%d clean, %d fast retransmits, %d timeouts: want each", clean, fast, timeout)
		}
		t.Logf("%d clean, %d fast retransmits, %d timeouts", clean, fast, timeout)
		sa.Close()
		b.Close()
	})
}

func TestLossValidated(t *testing.T) {
	for _, loss := range []float64{-0.01, linkemu.MaxLoss + 0.01, math.NaN()} {
		if err := (linkemu.Shape{Loss: loss}).Validate(); !errors.Is(err, linkemu.ErrBadShape) {
			t.Errorf("loss %v: %v", loss, err)
		}
	}
	if (linkemu.Shape{Loss: 0.01}).IsZero() {
		t.Error("a lossy shape is zero")
	}
}

// Close waits for the repairs still pending: a connection closed right
// after writes on a lossy link delivers every byte written, though lost
// retransmissions hold the last ones back seconds beyond the link's
// latency. Before, Close waited the latency and 2 s: a repair still
// pending then was cut, its bytes and those behind it dropped.
func TestCloseWaitsForRepairs(t *testing.T) {
	link := linkemu.Link{Up: linkemu.Shape{Latency: 200 * time.Millisecond, Loss: linkemu.MaxLoss}, Down: linkemu.Shape{Latency: 200 * time.Millisecond}}
	synctest.Test(t, func(t *testing.T) {
		for seed := range uint64(20) {
			a, b := net.Pipe()
			sa, err := linkemu.Conn(a, link, linkemu.WithSeed(seed))
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan int, 1)
			go func() {
				n, _ := io.Copy(io.Discard, b)
				got <- int(n)
			}()
			const n = 40 // one segment each: a loss is repaired by timeout
			for i := range n {
				if _, err := sa.Write(bytes.Repeat([]byte{byte(i)}, linkemu.MSS)); err != nil {
					t.Fatal(err)
				}
			}
			sa.Close()
			if m := <-got; m != n*linkemu.MSS {
				t.Fatalf("seed %d: %d bytes of %d delivered before Close returned", seed, m, n*linkemu.MSS)
			}
		}
	})
}
