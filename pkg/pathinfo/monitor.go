package pathinfo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// Probing: trains start at firstProbe and grow fourfold until their
// dispersion lasts minSpan, long enough to time against scheduling noise
// (a slow link stops at a few KiB, a gigabit one at a few hundred), or
// until one takes maxTrainTime; the rate is the median of three trains of
// that size, so that one whose reads a busy receiver bunched up does not
// stand. pings is how many pings an RTT is the least of.
const (
	firstProbe   = 4 << 10
	minSpan      = 10 * time.Millisecond
	maxTrainTime = time.Second
	pings        = 3
)

// Exchanges: one whose transfer takes less than informative at the known
// rate tells the fixed cost of an exchange, not the rate (scheduling adds
// as much), unless its transfer lasted minSpan, which times it as well as
// a probe (the path got slower: a link that changed shows in small
// messages too). One more than surprise times off the prediction is a
// surprise; changeAfter in a row in one direction mean the path changed
// (one may be the machine's delay), and reset the rate. Others move it by
// feedAlpha: a steady change shows within a few exchanges, one's noise
// barely.
const (
	informative = 2 * time.Millisecond
	surprise    = 2.0
	changeAfter = 3
	feedAlpha   = 0.25
)

// Monitor tracks the path to one peer and that peer's decode profile. It
// is an adaptive.Peer. It is safe for concurrent use.
type Monitor struct {
	svc      *Service
	peer     peer.ID
	mu       sync.Mutex
	path     adaptive.Path // bandwidth 0 until measured
	profile  *adaptive.Profile
	overhead time.Duration // fixed cost of an exchange beyond the RTT
	streak   int           // consecutive surprises, signed by direction
	stats    Stats
}

// Stats counts what a monitor did: probe trains, pings, profiles fetched,
// exchanges observed and path changes they showed; and what a Service
// did: probes it answered and refused.
type Stats struct{ Probes, Pings, Profiles, Exchanges, Changes, Served, Refused int }

var _ adaptive.Peer = (*Monitor)(nil)

// Path returns the path as known now: bandwidth 0 until measured, the RTT
// the monitor's own or else the peerstore's latency EWMA.
func (m *Monitor) Path() adaptive.Path {
	m.mu.Lock()
	p := m.path
	m.mu.Unlock()
	if p.RTT <= 0 {
		p.RTT = m.svc.host.Peerstore().LatencyEWMA(m.peer)
	}
	return p
}

// ReceiverProfile returns the peer's decode profile, or nil.
func (m *Monitor) ReceiverProfile() *adaptive.Profile {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.profile
}

// Stats returns what the monitor did so far.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Ensure makes sure the monitor knows the path and the receiver's profile:
// without a bandwidth it probes; with one it pings, and probes again if the
// RTT moved by more than half (more than queueing moves one path's RTT);
// it fetches a missing profile. A peer that does not run the protocol
// leaves an RTT, no bandwidth and no profile, without an error.
func (m *Monitor) Ensure(ctx context.Context) error {
	m.mu.Lock()
	probe, old, hasProfile := m.path.Bandwidth <= 0, m.path.RTT, m.profile != nil
	m.mu.Unlock()
	var err error
	if !probe {
		var rtt time.Duration
		if rtt, err = m.ping(ctx); err != nil {
			return err
		}
		probe = rtt > old*3/2 || rtt < old/2
	}
	if probe {
		_, err = m.Probe(ctx)
	}
	if err == nil && !hasProfile {
		_, err = m.FetchProfile(ctx)
	}
	if errors.Is(err, errUnsupported) {
		return nil
	}
	return err
}

// ping measures the RTT with libp2p pings (the least of three; each also
// goes into the peerstore's latency EWMA) and records it.
func (m *Monitor) ping(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	ch := ping.Ping(ctx, m.svc.host, m.peer)
	var best time.Duration
	var err error
	for range pings {
		r, ok := <-ch
		if err = r.Error; !ok || err != nil {
			break
		}
		best = min(cmp.Or(best, r.RTT), r.RTT)
	}
	cancel()
	for range ch { // let the pinger exit
	}
	if best == 0 {
		return 0, fmt.Errorf("pathinfo: ping %s: %w", m.peer, cmp.Or(err, ctx.Err(), errors.New("no answer")))
	}
	m.mu.Lock()
	m.path.RTT = best
	m.stats.Pings += pings
	m.mu.Unlock()
	return best, nil
}

// Probe measures the path: the RTT with pings, then the bottleneck rate
// (and the initial window, if slow start shows) with probe trains.
func (m *Monitor) Probe(ctx context.Context) (adaptive.Path, error) {
	rtt, err := m.ping(ctx)
	if err != nil {
		return adaptive.Path{}, err
	}
	var rates []float64
	iw := 0
	for size, tries := firstProbe, 0; tries < 3; {
		rep, took, err := m.probe(ctx, size, max(rtt/2, time.Millisecond))
		if err != nil {
			return adaptive.Path{}, err
		}
		last := size >= MaxProbe || took > maxTrainTime
		if rep.Span < minSpan && !last && tries == 0 {
			size = min(size*4, MaxProbe)
			continue
		}
		tries++
		if bw, w, ok := estimate(rep, rtt); ok {
			// A train read in much less time than it took to send came in
			// lumps (TLS records arrive whole): there the sender's time
			// is the link's, not the receiver's reads.
			if ser := took - rtt; ser >= lumpedTrain && rep.Span < ser/2 {
				bw = min(bw, float64(size)/ser.Seconds())
			}
			rates = append(rates, bw*(1+chunkOverhead/float64(probeChunk(size))))
			iw = w
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.path.RTT = rtt
	if len(rates) > 0 {
		slices.Sort(rates)
		m.path.Bandwidth, m.path.InitWindow = rates[len(rates)/2], iw
	}
	m.streak = 0
	return m.path, nil
}

func (m *Monitor) probe(ctx context.Context, size int, gap time.Duration) (report, time.Duration, error) {
	start := time.Now()
	b, err := m.svc.request(ctx, m.peer, appendProbeHeader(nil, probeHeader{Size: size, Gap: gap}), func(w io.Writer) error {
		// Many small writes: libp2p's muxer delivers a write as one frame,
		// all at once, so the train must be many frames to show its
		// dispersion. Zeros: links here do not compress.
		chunk := probeChunk(size)
		buf := make([]byte, chunk)
		for left := size; left > 0; left -= chunk {
			if _, err := w.Write(buf[:min(chunk, left)]); err != nil {
				return err
			}
		}
		return nil
	}, maxReport)
	took := time.Since(start)
	if err != nil {
		return report{}, 0, err
	}
	m.mu.Lock()
	m.stats.Probes++
	m.mu.Unlock()
	rep, err := parseReport(b)
	if err == nil && rep.Received != size {
		err = fmt.Errorf("%w: %d of %d probe bytes reported", ErrProtocol, rep.Received, size)
	}
	return rep, took, err
}

// probeChunk is the write size of a probe train of size bytes: a 32nd of
// it, between 1 KiB and 16 KiB, so that a train is tens of frames; each
// costs chunkOverhead more on the wire (yamux and TLS record headers).
func probeChunk(size int) int { return min(max(size/32, 1<<10), 16<<10) }

const chunkOverhead = 12 + 22

// Slow start shows in a probe as bursts a round trip apart. It is looked
// for only where it costs something (an RTT above scheduling noise) and
// below maxInitWindow: a stall at libp2p's initial stream window (256 KiB)
// is the probe stream's own, not the connection's message streams'.
const (
	minSlowRTT    = 5 * time.Millisecond
	maxInitWindow = 128 << 10
	maxRecord     = 16 << 10 // TLS's largest record
	// lumpedTrain is the least time a train takes to send for its lumps
	// to be told from the receiver's scheduling: twice minSpan, which
	// the slowest links' smallest trains exceed (4 KiB on dsl: 51 ms).
	lumpedTrain = 2 * minSpan
)

// estimate reads a probe report: the rate is the bytes after the first
// read over their dispersion, less gaps of half a round trip or more
// between bursts (the link was idle: slow start, or a stream window), and
// at least minSpan, below which no train is timed (nor a peer's claim
// that it all arrived at once believed). A first burst of a record at
// most, read in less than minSpan before others came, is the first
// read's TLS record, which arrived whole: its bytes carry no timing
// either (counted, a slow link read 1.3× too fast).
// When such gaps, each about a round trip, split the train into three
// bursts or more, the first burst is the initial window.
func estimate(rep report, rtt time.Duration) (bw float64, iw int, ok bool) {
	idle, multi := time.Duration(0), 0
	for _, b := range rep.Bursts {
		if b.Bytes > max(2*rep.FirstChunk, maxRecord) {
			multi++
		}
	}
	// On a link so slow that each write, or each TLS record (which arrives
	// whole), takes half a round trip, every read is a burst: only bursts
	// of several reads tell idle time.
	if rtt >= minSlowRTT && len(rep.Bursts) >= 2 && 2*multi >= len(rep.Bursts) {
		slow := len(rep.Bursts) >= 3 && rep.Bursts[0].Bytes <= maxInitWindow
		for i := 1; i < len(rep.Bursts); i++ {
			prev := rep.Bursts[i-1]
			gap := rep.Bursts[i].Start - prev.Start - prev.Dur
			if gap >= rtt/2 {
				idle += gap
			}
			slow = slow && gap >= rtt/2 && gap <= 2*rtt
		}
		if slow {
			iw = rep.Bursts[0].Bytes
		}
	}
	base, first := rep.FirstChunk, time.Duration(0)
	if b := rep.Bursts; len(b) >= 2 && b[0].Bytes <= maxRecord && b[0].Dur < minSpan {
		base, first = rep.Bursts[0].Bytes, rep.Bursts[0].Dur
	}
	if rep.Received <= base {
		return 0, iw, false
	}
	busy := max(rep.Span-first-idle, minSpan)
	return float64(rep.Received-base) / busy.Seconds(), iw, true
}

// FetchProfile asks the peer for its decode profile and keeps it.
func (m *Monitor) FetchProfile(ctx context.Context) (*adaptive.Profile, error) {
	b, err := m.svc.request(ctx, m.peer, []byte{opProfile}, nil, adaptive.MaxProfileSize)
	if err != nil {
		return nil, err
	}
	p := new(adaptive.Profile)
	if err := p.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("pathinfo: profile of %s: %w", m.peer, err)
	}
	m.mu.Lock()
	m.profile = p
	m.stats.Profiles++
	m.mu.Unlock()
	return p, nil
}

// ObserveExchange tells the monitor that n bytes sent to the peer were
// acknowledged after d, beyond the peer's decoding (what the adaptive
// scheme reports): short exchanges teach the fixed cost beyond the RTT,
// longer ones the rate.
func (m *Monitor) ObserveExchange(n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Exchanges++
	if d < m.path.RTT {
		m.path.RTT = d // an acknowledged exchange took a round trip at least
	}
	bw, fixed := m.path.Bandwidth, m.path.RTT+m.overhead
	if bw <= 0 {
		if xfer := d - fixed; xfer >= minSpan {
			m.path.Bandwidth = float64(n) / xfer.Seconds()
		}
		return
	}
	pred := time.Duration(float64(n) / bw * float64(time.Second))
	xfer := max(d-fixed, time.Microsecond)
	if pred < informative && xfer < minSpan {
		// Delays on a busy machine only ever add to the fixed cost: the
		// estimate follows low values fast and high ones slowly.
		o, a := max(d-m.path.RTT-pred, 0), 0.05
		if m.overhead == 0 {
			a = 1
		} else if o < m.overhead {
			a = 0.5
		}
		m.overhead += time.Duration(a * float64(o-m.overhead))
		return
	}
	span := xfer
	if span < minSpan {
		// Too short to time (a path faster than known): the whole
		// exchange bounds the rate from below.
		span = d
	}
	implied := float64(n) / span.Seconds()
	r, dir := float64(xfer)/float64(pred), 0
	if r > surprise {
		dir = 1
	} else if r < 1/surprise {
		dir = -1
	}
	switch {
	case dir == 0:
		m.streak = 0
		m.path.Bandwidth += feedAlpha * (implied - bw)
	case dir*m.streak >= 0 && max(m.streak, -m.streak)+1 >= changeAfter:
		m.path.Bandwidth, m.streak = implied, 0
		m.stats.Changes++
	case dir*m.streak >= 0:
		m.streak += dir
	default:
		m.streak = dir
	}
}
