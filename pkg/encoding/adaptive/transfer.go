package adaptive

import (
	"math"
	"time"
)

// Path is what the sender knows of the path to the receiver. Its zero
// value is an unknown path; DefaultPath stands in for one.
type Path struct {
	// RTT is the round-trip time of a small message.
	RTT time.Duration
	// Bandwidth is the bottleneck rate towards the receiver in bytes per
	// second; 0 means unknown.
	Bandwidth float64
	// Loss is the probability that a packet is lost, 0 to 1.
	Loss float64
	// MSS is the segment size in bytes; 0 means DefaultMSS.
	MSS int
	// InitWindow is how many bytes the sender may send in its first round
	// trip (TCP's initial congestion window after idle: 10 segments on
	// Linux); 0 means no slow start, as on a warm connection or an
	// emulated link.
	InitWindow int
	// MaxWindow caps the window in bytes (the receive window); 0 means
	// none.
	MaxWindow int
}

// Known reports whether the path has a measured bandwidth.
func (p Path) Known() bool { return p.Bandwidth > 0 }

// Defaults for what a path does not say.
const (
	DefaultMSS = 1460
	// MinRTO is the smallest retransmission timeout (Linux's 200 ms).
	MinRTO = 200 * time.Millisecond
)

// DefaultPath is assumed when nothing is known of the path: a switched
// 100 Mbit/s LAN. On such a path compression pays only for large,
// compressible elements, so an unmeasured path errs towards sending
// elements as they are.
var DefaultPath = Path{RTT: 500 * time.Microsecond, Bandwidth: 100e6 / 8}

// TransferTime is the expected time from the first byte of an n-byte
// message leaving the sender until its last byte arrives at the receiver.
//
// It is NAM's no-loss model (Sikdar et al.; NAM eq. 4) made continuous in
// bandwidth: starting from InitWindow the window doubles every round trip
// (slow start) until it covers the bandwidth-delay product or reaches
// MaxWindow; until then each round costs one RTT, afterwards bytes flow at
// the bottleneck rate. A message that fits in the current window costs
// its serialization time, and every message the one-way delay. So short
// messages are dominated by round trips and long ones by bandwidth.
//
// With loss, short flows pay the expected cost of their losses (a
// retransmission timeout for a segment lost while too few follow it for
// fast retransmit, a round trip otherwise), and the result is at least the
// time at the Padhye et al. (PFTK) throughput, NAM eq. 5's "LM" model,
// right for long flows: NAM's hybrid of its two models, made continuous.
func (p Path) TransferTime(n int) time.Duration {
	if n < 0 {
		n = 0
	}
	bw := p.Bandwidth
	if bw <= 0 {
		bw = DefaultPath.Bandwidth
	}
	mss := float64(p.MSS)
	if mss <= 0 {
		mss = DefaultMSS
	}
	rtt := max(p.RTT, 0).Seconds()
	x := float64(n)
	maxW := float64(max(p.MaxWindow, 0))
	if rtt == 0 || maxW/rtt >= bw {
		maxW = 0 // the window never limits
	}
	// NLM: no loss.
	t := rtt / 2
	if p.InitWindow > 0 && rtt > 0 {
		t += slowStart(x, float64(p.InitWindow), maxW, bw, rtt)
	} else if maxW > 0 {
		t += windowed(x, maxW, bw, rtt)
	} else {
		t += x / bw
	}
	loss := min(max(p.Loss, 0), 1)
	if loss > 0 && rtt > 0 {
		// Short flows lose in timeouts: a segment lost while fewer than
		// three follow it waits for the RTO, any other costs a round trip.
		segs := math.Ceil(x / mss)
		early := min(segs, 3)
		rto := max(MinRTO.Seconds(), 2*rtt)
		t += loss * (early*rto + (segs-early)*rtt)
		// Long flows run at PFTK's rate (the LM model); the larger wins.
		t = max(t, rtt/2+x/min(bw, pftk(mss, rtt, rto, loss)))
	}
	return time.Duration(t * float64(time.Second))
}

// slowStart is the time to push x bytes through rounds of a doubling
// window w (capped at maxW when positive), each round costing one RTT
// until the window covers the pipe (bw·rtt); the last round and anything
// after the window covers the pipe flow at the link rate.
func slowStart(x, w, maxW, bw, rtt float64) float64 {
	t, sent := 0.0, 0.0
	for sent < x {
		switch {
		case maxW > 0 && w >= maxW:
			return t + windowed(x-sent, maxW, bw, rtt)
		case w >= bw*rtt:
			return t + (x-sent)/bw
		case x-sent <= w:
			return t + (x-sent)/bw
		}
		t += rtt
		sent += w
		w *= 2
		if maxW > 0 {
			w = min(w, maxW)
		}
	}
	return t
}

// windowed is the time to push x bytes through a window w smaller than
// the pipe: whole rounds of w, one RTT each, then the rest at the link
// rate.
func windowed(x, w, bw, rtt float64) float64 {
	rounds := math.Floor(x / w)
	rest := x - rounds*w
	if rest == 0 && rounds > 0 {
		rounds--
		rest = w
	}
	return rounds*rtt + rest/bw
}

// pftk is the steady-state TCP throughput in bytes per second of Padhye,
// Firoiu, Towsley and Kurose (SIGCOMM '98), with one ACK per segment.
func pftk(mss, rtt, rto, p float64) float64 {
	d := rtt*math.Sqrt(2*p/3) + rto*min(1, 3*math.Sqrt(3*p/8))*p*(1+32*p*p)
	if d <= 0 {
		return math.Inf(1)
	}
	return mss / d
}
