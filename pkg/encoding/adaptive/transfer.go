package adaptive

import "time"

// Path is what the sender knows of the path to the receiver. Its zero
// value is an unknown path.
type Path struct {
	// RTT is the round-trip time of a small message.
	RTT time.Duration
	// Bandwidth is the bottleneck rate towards the receiver in bytes per
	// second; 0 means unknown.
	Bandwidth float64
	// InitWindow is how many bytes the sender may send in its first round
	// trip (TCP's initial congestion window after idle: 10 segments on
	// Linux); 0 means no slow start, as on a warm connection or an
	// emulated link.
	InitWindow int
}

// defaultPath is assumed when nothing is known of the path: a switched
// 100 Mbit/s LAN. On such a path compression pays only for large,
// compressible elements, so an unmeasured path errs towards sending
// elements as they are.
var defaultPath = Path{RTT: 500 * time.Microsecond, Bandwidth: 100e6 / 8}

// TransferTime is the expected time from the first byte of an n-byte
// message leaving the sender until its last byte arrives at the receiver.
//
// It is NAM's no-loss model (Sikdar et al.; NAM eq. 4) made continuous in
// bandwidth: starting from InitWindow the window doubles every round trip
// (slow start) until it covers the bandwidth-delay product; until then
// each round costs one RTT, afterwards bytes flow at the bottleneck rate.
// A message that fits in the current window costs its serialization time,
// and every message the one-way delay. So short messages are dominated by
// round trips and long ones by bandwidth. An unknown bandwidth is
// defaultPath's.
func (p Path) TransferTime(n int) time.Duration {
	bw := p.Bandwidth
	if bw <= 0 {
		bw = defaultPath.Bandwidth
	}
	rtt := max(p.RTT, 0).Seconds()
	x := float64(max(n, 0))
	t := rtt / 2
	for w := float64(p.InitWindow); w > 0 && w < bw*rtt && x > w; w *= 2 {
		t += rtt
		x -= w
	}
	return time.Duration((t + x/bw) * float64(time.Second))
}
