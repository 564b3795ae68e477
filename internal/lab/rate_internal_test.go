package lab

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// sinkRig delivers every payload straight to the sink, counting the
// batches its sender is handed (one idle call after each).
type sinkRig struct {
	sink    *rateSink
	batches atomic.Int64
}

func (r *sinkRig) sender(int) (rateSend, error) { return r, nil }
func (r *sinkRig) copies() int                  { return 1 }
func (r *sinkRig) close() error                 { return nil }

func (r *sinkRig) send(_ context.Context, _ int, p []byte) error {
	r.sink.deliver(p)
	return nil
}

func (r *sinkRig) idle() error {
	r.batches.Add(1)
	return nil
}

// The latency run's pacer hands out what came due at most once a step,
// however close together the messages are due: a finer one hands out a
// message or two at a time (the old pacer: about one batch per message
// here).
func TestPacerHandsOutOncePerStep(t *testing.T) {
	const (
		n    = 200
		rate = 2000.0 // a message due every 0.5 ms: 100 ms in all
		step = 20 * time.Millisecond
	)
	sink := &rateSink{}
	rig := &sinkRig{sink: sink}
	start := time.Now()
	_, lost, lat, err := ratePass(context.Background(), rig, sink, RateShape{Senders: 1, Peers: 1}, 100, n, 1, rate, step, 5*time.Second)
	elapsed := time.Since(start)
	if err != nil || lost != 0 || len(lat) != n {
		t.Fatalf("pass: %v, %d lost, %d latencies", err, lost, len(lat))
	}
	// At most one hand-out per step of the pass, and the first at once.
	if b, most := rig.batches.Load(), int64(elapsed/step)+2; b > most {
		t.Errorf("%d batches handed out in %v, want at most %d (one per %v)", b, elapsed, most, step)
	}
}

// A latency pass whose context ends stops handing out messages and
// returns, whatever its step: the pacer sleeps between hand-outs and the
// senders wait on it, not on the context (before, a cancelled pass with a
// step of an hour ran the hour).
func TestPacerStopsWithContext(t *testing.T) {
	sink := &rateSink{}
	rig := &sinkRig{sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, _, err := ratePass(ctx, rig, sink, RateShape{Senders: 1, Peers: 1}, 100, 200, 1, 2000, time.Hour, 5*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled pass returned %v, want %v", err, context.Canceled)
	}
}

// A run that stalled counts what arrived, not what was sent: a propagate
// run that lost most of its copies reported the rate of every message
// published.
func TestArrivedRateCountsWhatArrived(t *testing.T) {
	for _, c := range []struct {
		n, copies int
		lost      int64
		want      float64
	}{
		{1000, 1, 0, 1000},
		{1000, 1, 250, 750},
		{1000, 8, 4000, 500}, // half the copies
	} {
		if got := arrivedRate(c.n, c.copies, c.lost, time.Second); got != c.want {
			t.Errorf("%d messages of %d copies, %d lost, in 1 s: %.1f a second, want %.1f", c.n, c.copies, c.lost, got, c.want)
		}
	}
}
