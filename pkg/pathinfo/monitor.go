package pathinfo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	msmux "github.com/multiformats/go-multistream"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// Probing: trains start small and grow fourfold until their dispersion is
// long enough to time well, so a dial-up link costs a 4 KiB train and a
// gigabit one a few hundred KiB.
const (
	firstProbe = 4 << 10
	minSpan    = 10 * time.Millisecond
	// A train arriving in less than steadySpan is timed twice more and
	// the median kept: on a busy machine, reads of a fast link bunch up.
	steadySpan = 50 * time.Millisecond
	pings      = 3
	// maxTrainTime stops the trains growing.
	maxTrainTime = time.Second
)

// Feedback: an exchange taking more than surprise times (or less than
// 1/surprise of) its prediction is a surprise; two faster in a row,
// slowRepeat slower in a row, or one 16·surprise times too slow, mean the
// path changed.
const (
	surprise   = 2.0
	slowRepeat = 3
	feedAlpha  = 0.25
)

// Monitor tracks the path to one peer and that peer's decode profile. It
// is an adaptive.PathSource and an adaptive.ProfileSource. It is safe for
// concurrent use.
type Monitor struct {
	svc  *Service
	peer peer.ID
	key  string
	kick chan struct{}

	mu        sync.Mutex
	path      adaptive.Path
	known     bool // the bandwidth was measured
	pathAt    time.Time
	profile   *adaptive.Profile
	profileAt time.Time
	overhead  time.Duration           // fixed cost of an exchange beyond the RTT
	overheadN int                     // exchanges it was learned from
	streak    int                     // consecutive surprises, signed by direction
	streakBW  float64                 // the highest rate a slow streak implied
	classes   map[string]*sizeClasses // short exchanges by kind and size, for Excess
	watching  bool
	stats     Stats
	// view is path and profile as Path and ReceiverProfile give them, for
	// them to read without the lock: the adaptive scheme asks for both
	// before every element it sends, and on a fast link taking a mutex
	// whose cache line another core last wrote costs a fair share of the
	// scheme's whole time per element. Set by publish.
	view atomic.Pointer[monitorView]
}

type monitorView struct {
	path    adaptive.Path // bandwidth 0 until measured
	profile *adaptive.Profile
}

// publish sets view from the fields; m.mu must be held. A view that did
// not change is kept, so an exchange that teaches nothing allocates
// nothing.
func (m *Monitor) publish() {
	v := monitorView{path: m.path, profile: m.profile}
	if !m.known {
		v.path.Bandwidth = 0
	}
	if old := m.view.Load(); old != nil && *old == v {
		return
	}
	m.view.Store(&v)
}

// Stats counts what a monitor did.
type Stats struct {
	Probes, ProbeBytes, Pings, Profiles, Exchanges, Changes int
}

var (
	_ adaptive.PathSource    = (*Monitor)(nil)
	_ adaptive.ProfileSource = (*Monitor)(nil)
	_ adaptive.Calibration   = (*Monitor)(nil)
)

func newMonitor(s *Service, p peer.ID) *Monitor {
	m := &Monitor{svc: s, peer: p, key: p.String(), kick: make(chan struct{}, 1)}
	if r, ok := s.models.Peer(m.key); ok {
		m.path, m.pathAt, m.known = r.Path, r.PathAt, r.Path.Known()
		m.profile, m.profileAt = r.Profile, r.ProfileAt
	}
	m.publish()
	return m
}

// Peer returns the peer monitored.
func (m *Monitor) Peer() peer.ID { return m.peer }

// Path returns the path as known now. Its bandwidth is 0 until measured;
// its RTT is the monitor's own, or the peerstore's latency EWMA if the
// monitor has not measured one.
func (m *Monitor) Path() adaptive.Path {
	p := m.view.Load().path
	if p.RTT <= 0 {
		p.RTT = m.svc.host.Peerstore().LatencyEWMA(m.peer)
	}
	return p
}

// ReceiverProfile returns the peer's decode profile, or nil.
func (m *Monitor) ReceiverProfile() *adaptive.Profile {
	return m.view.Load().profile
}

// Stats returns what the monitor did so far.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// SetPath sets the path, as from a source the monitor cannot observe (a
// configured link, a loss rate from the network's operator).
func (m *Monitor) SetPath(p adaptive.Path) {
	m.mu.Lock()
	m.path, m.known, m.pathAt = p, p.Known(), m.svc.cfg.clock.Now()
	clear(m.classes)
	m.publish()
	m.mu.Unlock()
	m.save()
}

func (m *Monitor) save() {
	m.mu.Lock()
	r := adaptive.PeerRecord{Path: m.path, PathAt: m.pathAt, Profile: m.profile, ProfileAt: m.profileAt}
	if !m.known {
		r.Path.Bandwidth = 0
	}
	m.mu.Unlock()
	m.svc.models.SetPeer(m.key, r)
}

// Ensure makes sure the monitor knows the path and the receiver's profile
// before a sender relies on them. Without a remembered measurement newer
// than the service's max age it probes; with one it checks the RTT with
// libp2p pings and probes again only if the RTT moved by more than half.
// It fetches the profile if none is remembered. A peer that does not run
// the pathinfo protocol leaves the path with the RTT pings measured and
// no bandwidth (the scheme then assumes adaptive.DefaultPath's), and no
// profile; that is not an error. Other failures are.
func (m *Monitor) Ensure(ctx context.Context) error {
	m.mu.Lock()
	fresh := m.known && m.svc.cfg.clock.Now().Sub(m.pathAt) <= m.svc.cfg.maxAge
	old := m.path.RTT
	hasProfile := m.profile != nil
	m.mu.Unlock()
	probe := !fresh
	if fresh {
		rtt, err := m.PingRTT(ctx)
		if err != nil {
			return err
		}
		if old <= 0 || rtt > old*3/2 || rtt < old/2 {
			probe = true
		}
	}
	if probe {
		if _, err := m.Probe(ctx); err != nil && !errors.Is(err, errUnsupported) {
			return err
		}
	}
	if !hasProfile {
		if _, err := m.FetchProfile(ctx); err != nil && !errors.Is(err, errUnsupported) {
			return err
		}
	}
	return nil
}

var errUnsupported = errors.New("pathinfo: peer does not speak " + string(ProtocolID))

// PingRTT measures the RTT with libp2p pings (the least of three; each
// also goes into the peerstore's latency EWMA) and records it.
func (m *Monitor) PingRTT(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	ch := ping.Ping(ctx, m.svc.host, m.peer)
	var best time.Duration
	var err error
	for got := 0; got < pings; got++ {
		r, ok := <-ch
		if !ok {
			break
		}
		if r.Error != nil {
			err = r.Error
			break
		}
		if best == 0 || r.RTT < best {
			best = r.RTT
		}
	}
	cancel()
	for range ch { // let the pinger exit
	}
	if best == 0 {
		if err == nil {
			err = ctx.Err()
		}
		return 0, fmt.Errorf("pathinfo: ping %s: %w", m.peer, err)
	}
	m.mu.Lock()
	m.path.RTT = best
	m.stats.Pings += pings
	m.publish()
	m.mu.Unlock()
	return best, nil
}

// Probe measures the path: the RTT with pings, then the bottleneck rate
// (and the initial window, if slow start shows) with probe trains of
// growing size, 4 KiB first, until one takes at least 4 ms to arrive or
// the service's largest probe is reached.
func (m *Monitor) Probe(ctx context.Context) (adaptive.Path, error) {
	rtt, err := m.PingRTT(ctx)
	if err != nil {
		return adaptive.Path{}, err
	}
	var bw float64
	iw := 0
	gap := max(rtt/2, time.Millisecond)
	for size := firstProbe; ; size *= 4 {
		size = min(size, m.svc.cfg.maxProbe)
		last := size >= m.svc.cfg.maxProbe
		rep, took, err := m.probe(ctx, size, gap)
		if err != nil {
			return adaptive.Path{}, err
		}
		// A train that took long is long enough to time, whatever the
		// receiver made of it: the next would take four times longer.
		last = last || took > maxTrainTime
		if rep.Span < minSpan && !last {
			continue
		}
		type sample struct {
			rep  report
			took time.Duration
		}
		samples := []sample{{rep, took}}
		if rep.Span < steadySpan {
			for range 2 {
				r, took, err := m.probe(ctx, size, gap)
				if err != nil {
					return adaptive.Path{}, err
				}
				samples = append(samples, sample{r, took})
			}
		}
		var rates []float64
		senderRate := 0.0
		for _, sm := range samples {
			// What the sender saw: the train and the report back took
			// the RTT plus the train's time on the link, and more.
			b, w, ok := estimate(sm.rep, rtt)
			idle := time.Duration(0)
			if ok {
				idle = max(sm.rep.Span-time.Duration(float64(sm.rep.Received-sm.rep.FirstChunk)/b*float64(time.Second)), 0)
			}
			sr := float64(size) / max(sm.took-rtt-idle, time.Microsecond).Seconds()
			senderRate = max(senderRate, sr)
			// A receiver descheduled while the train arrived reads most
			// of it at once and times nothing; a rate the sender's own
			// clock contradicts by far is such a reading.
			if !ok || 2*sm.rep.FirstChunk > sm.rep.Received || b > 4*sr {
				continue
			}
			// The rate of the wire bytes, as messages in large writes see it.
			rates = append(rates, b*(1+chunkOverhead/float64(probeChunk(size))))
			iw = w
		}
		if len(rates) > 0 {
			slices.Sort(rates)
			bw = rates[len(rates)/2]
		} else if !last {
			continue // try a longer train
		} else {
			bw = senderRate
		}
		break
	}
	m.mu.Lock()
	m.path.RTT = rtt
	if bw > 0 {
		m.path.Bandwidth, m.path.InitWindow, m.known = bw, iw, true
	}
	m.pathAt = m.svc.cfg.clock.Now()
	m.streak = 0
	clear(m.classes)
	p := m.path
	m.publish()
	m.mu.Unlock()
	m.save()
	return p, nil
}

func (m *Monitor) probe(ctx context.Context, size int, gap time.Duration) (report, time.Duration, error) {
	req := appendProbeHeader(nil, probeHeader{Size: size, Gap: gap})
	start := m.svc.cfg.clock.Now()
	b, err := m.svc.request(ctx, m.peer, req, func(w io.Writer) error {
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
	took := m.svc.cfg.clock.Now().Sub(start)
	if err != nil {
		if isUnsupported(err) {
			return report{}, 0, errUnsupported
		}
		return report{}, 0, err
	}
	m.mu.Lock()
	m.stats.Probes++
	m.stats.ProbeBytes += size
	m.mu.Unlock()
	rep, err := parseReport(b)
	if err == nil && rep.Received != size {
		err = fmt.Errorf("%w: %d of %d probe bytes reported", ErrProtocol, rep.Received, size)
	}
	return rep, took, err
}

// probeChunk is the write size of a probe train of size bytes: a 32nd of
// it, between 1 KiB and 16 KiB.
func probeChunk(size int) int { return min(max(size/32, 1<<10), 16<<10) }

// chunkOverhead approximates what a write costs on the wire beyond its
// bytes: a yamux frame header and a TLS record's.
const chunkOverhead = 12 + 22

// Slow start shows in a probe as bursts a round trip apart. It is looked
// for only where it costs something (an RTT of at least minSlowRTT) and
// where scheduling noise cannot fake it, and only below maxInitWindow: a
// stall at libp2p's initial stream window (256 KiB) is the probe stream's
// own, not the connection's, whose long-lived message streams have grown
// their windows.
const (
	minSlowRTT    = 5 * time.Millisecond
	maxInitWindow = 128 << 10
)

// estimate reads a probe report: the rate is the train's bytes after the
// first read over their dispersion, less the gaps of at least half a round
// trip on paths where round trips are long enough to tell from scheduling
// noise and writes cross in less than that (the link was idle then: slow
// start, or a stall at the probe stream's window). When the gaps split the train into bursts each about a
// round trip after the last (at least two of them), the first burst is the
// initial window.
func estimate(rep report, rtt time.Duration) (bw float64, iw int, ok bool) {
	idle := time.Duration(0)
	// On a link so slow that each write takes half a round trip to cross,
	// every read is a burst of its own and the gaps are the link's work:
	// only bursts of several reads tell idle time.
	multi := 0
	for _, b := range rep.Bursts {
		if b.Bytes > 2*rep.FirstChunk {
			multi++
		}
	}
	if rtt >= minSlowRTT && len(rep.Bursts) >= 2 && 2*multi >= len(rep.Bursts) {
		slow := len(rep.Bursts) >= 3 && rep.Bursts[0].Bytes <= maxInitWindow
		for i := 1; i < len(rep.Bursts); i++ {
			prev := rep.Bursts[i-1]
			gap := rep.Bursts[i].Start - prev.Start - prev.Dur
			if gap >= rtt/2 {
				idle += gap
			}
			if gap < rtt/2 || gap > 2*rtt {
				slow = false
			}
		}
		if slow {
			iw = rep.Bursts[0].Bytes
		}
	}
	busy := rep.Span - idle
	if busy <= 0 || rep.Received <= rep.FirstChunk {
		return 0, iw, false
	}
	return float64(rep.Received-rep.FirstChunk) / busy.Seconds(), iw, true
}

// FetchProfile asks the peer for its decode profile and keeps it.
func (m *Monitor) FetchProfile(ctx context.Context) (*adaptive.Profile, error) {
	b, err := m.svc.request(ctx, m.peer, []byte{opProfile}, nil, adaptive.MaxProfileSize)
	if err != nil {
		if isUnsupported(err) {
			return nil, errUnsupported
		}
		return nil, err
	}
	p, err := adaptive.ParseProfile(b)
	if err != nil {
		return nil, fmt.Errorf("pathinfo: profile of %s: %w", m.peer, err)
	}
	m.mu.Lock()
	m.profile, m.profileAt = p, m.svc.cfg.clock.Now()
	m.stats.Profiles++
	m.publish()
	m.mu.Unlock()
	m.save()
	return p, nil
}

func isUnsupported(err error) bool {
	return errors.Is(err, msmux.ErrNotSupported[protocol.ID]{})
}

// ObserveExchange tells the monitor that an application exchange sent n
// bytes to the peer and had its answer back after d, not counting the
// time spent encoding here and decoding there (an acknowledged message,
// a request and its response). The monitor refines the bandwidth from
// exchanges whose transfer time is long enough to tell, learns the fixed
// cost of an exchange from the others, and when exchanges contradict the
// path in a row (twice if faster, three times if slower, once if far
// slower) takes the path as changed: it resets the bandwidth to what they
// imply and asks its watch loop, if running, to probe again.
func (m *Monitor) ObserveExchange(n int, d time.Duration) {
	m.ObserveExchangeOf("", n, d)
}

// ObserveExchangeOf is ObserveExchange for an exchange whose content was
// sent as kind says: adaptive.Identity or a codec spec. Short exchanges
// are also kept by kind for Excess, which compares a codec's with sending
// as is. The monitor tells at most maxKinds kinds apart.
func (m *Monitor) ObserveExchangeOf(kind string, n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	if m.observe(kind, n, d) {
		m.save()
	}
}

// maxKinds bounds the kinds of exchange a monitor keeps size classes for.
const maxKinds = 8

// Excess says by how much exchanges of messages of about size bytes whose
// element went encoded with spec outlasted what the path predicts (its RTT
// and their bytes at its rate), beyond what exchanges of messages of about
// raw bytes sent as is (kind adaptive.Identity) outlasted it: from the
// medians of the recent short exchanges of each, reported with
// ObserveExchangeOf. ok is false until there are enough of both, and
// while the difference is within the noise of the two medians (excessZ
// standard errors).
//
// It is what the model misses and the codec adds: the receiver's work
// around the codec, garbage, a rate that is not one rate (on loopback,
// bytes cost more per byte at 43 kB than at 172 kB). With it, the
// difference a sender predicts between a codec and sending as is comes
// out as the one it has seen. It implements adaptive.Calibration.
func (m *Monitor) Excess(spec string, size, raw int) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, id := m.classes[spec], m.classes[adaptive.Identity]
	if k == nil || id == nil {
		return 0, false
	}
	lk, sk, ok := k.leftAt(size, m.path.Bandwidth)
	if !ok {
		return 0, false
	}
	li, si, ok := id.leftAt(raw, m.path.Bandwidth)
	if !ok {
		return 0, false
	}
	x := lk - li
	if math.Abs(float64(x)) <= excessZ*math.Hypot(sk, si) {
		return 0, false
	}
	return x, true
}

// informative is the least transfer time, by the current estimate, an
// exchange must have to say anything of the bandwidth; shorter ones (and
// those shorter than half the exchange's fixed costs) tell those costs.
const informative = 2 * time.Millisecond

// maxRise is how many times higher one exchange may say the rate is.
const maxRise = 16 * surprise

// observe updates the path from one exchange and reports whether the
// bandwidth was set anew.
func (m *Monitor) observe(kind string, n int, d time.Duration) bool {
	m.mu.Lock()
	defer func() {
		m.publish()
		m.mu.Unlock()
	}()
	m.stats.Exchanges++
	if !m.known {
		if xfer := d - m.path.RTT - m.overhead; xfer >= minSpan {
			m.path.Bandwidth, m.known, m.pathAt = float64(n)/xfer.Seconds(), true, m.svc.cfg.clock.Now()
			return true
		}
		return false
	}
	pred := time.Duration(float64(n) / m.path.Bandwidth * float64(time.Second))
	far := max(pred, informative) * 16 * surprise
	small := pred < informative || pred < (m.path.RTT+m.overhead)/2
	if excess := d - m.path.RTT - m.overhead; small && (excess < far || n < 4<<10) {
		// It tells the fixed cost of an exchange: the RTT as the exchange
		// sees it (pipes, endpoint, acknowledgement) beyond the ping's.
		// Delays on a busy machine only ever add to it, so the estimate
		// follows low values fast and high ones slowly.
		o := max(d-m.path.RTT-pred, 0)
		switch {
		case m.overheadN == 0:
			m.overhead = o
		case o < m.overhead:
			m.overhead += time.Duration(0.5 * float64(o-m.overhead))
		default:
			m.overhead += time.Duration(0.05 * float64(o-m.overhead))
		}
		m.overheadN++
		// Only where the transfer is n/rate: with slow start, what short
		// exchanges leave depends on their round trips.
		if m.path.InitWindow > 0 {
			return false
		}
		sc := m.classes[kind]
		if sc == nil {
			if len(m.classes) >= maxKinds {
				return false
			}
			if m.classes == nil {
				m.classes = map[string]*sizeClasses{}
			}
			sc = new(sizeClasses)
			m.classes[kind] = sc
		}
		sc.add(n, d)
		return false
	}
	// An exchange can say the rate is at most maxRise times higher: one
	// whose transfer is lost in the fixed cost's jitter would otherwise
	// imply any rate at all (9 GB/s on a 12.5 MB/s LAN, in a grid run),
	// and a rate believed far too high makes every later message look too
	// small to correct it.
	xfer := max(d-m.path.RTT-m.overhead, pred/maxRise, time.Microsecond)
	r := float64(xfer) / float64(pred)
	implied := float64(n) / xfer.Seconds()
	// A path much slower than thought is believed at once (waiting costs
	// the most), whatever the size of the exchange; any other surprise
	// must repeat in the same direction: a faster one twice, a slower one
	// slowRepeat times, as the least delayed of them says. Delays only
	// ever make an exchange slower: on loopback, where "transfer" is
	// copying, two garbage collections in a row made 3.5 MB exchanges
	// look 2–3 times slower than the path, and the sender then sent s2
	// (11 ms) in place of as is (6 ms) until the rate was seen again.
	dir := 0
	if r > surprise {
		dir = 1
	} else if r < 1/surprise {
		dir = -1
	}
	run, need := 1, 2 // surprises in a row, this one included
	if dir != 0 && dir*m.streak > 0 {
		run = dir*m.streak + 1
	}
	if dir > 0 {
		need = slowRepeat
		if run == 1 {
			m.streakBW = 0
		}
		m.streakBW = max(m.streakBW, implied)
	}
	switch {
	case r > 16*surprise || dir != 0 && run >= need && (m.overheadN > 0 || r > surprise*surprise || r < 1/(surprise*surprise)):
		if dir > 0 && r <= 16*surprise {
			implied = m.streakBW
		}
		m.path.Bandwidth, m.streak = implied, 0
		m.pathAt = m.svc.cfg.clock.Now()
		m.stats.Changes++
		clear(m.classes)
		select {
		case m.kick <- struct{}{}:
		default:
		}
		return true
	case dir != 0:
		m.streak = dir * run
	case m.overheadN == 0:
		// Until the fixed cost is known, the rate is not refined.
		m.streak = 0
	default:
		// Delays only ever lower the implied rate: follow rises faster.
		m.streak = 0
		a := feedAlpha / 2
		if implied > m.path.Bandwidth {
			a = feedAlpha
		}
		m.path.Bandwidth += a * (implied - m.path.Bandwidth)
	}
	return false
}

// Watch keeps the path current while ctx lasts (or until the service
// closes): every interval it pings the peer, and it probes again when the
// RTT moved by more than half since the last probe or an exchange said
// the path changed. One watch runs per monitor; a second call returns at
// once.
func (m *Monitor) Watch(ctx context.Context, interval time.Duration) {
	m.mu.Lock()
	if m.watching {
		m.mu.Unlock()
		return
	}
	m.watching = true
	m.mu.Unlock()
	m.svc.mu.Lock()
	if m.svc.closed {
		m.svc.mu.Unlock()
		return
	}
	m.svc.wg.Add(1)
	m.svc.mu.Unlock()
	go func() {
		defer m.svc.wg.Done()
		defer func() { m.mu.Lock(); m.watching = false; m.mu.Unlock() }()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(m.svc.ctx, cancel)
		defer stop()
		t := time.NewTicker(interval)
		defer t.Stop()
		m.mu.Lock()
		probed := m.path.RTT
		m.mu.Unlock()
		for {
			reprobe := false
			select {
			case <-ctx.Done():
				return
			case <-m.kick:
				reprobe = true
			case <-t.C:
				rtt, err := m.PingRTT(ctx)
				if err != nil {
					continue
				}
				reprobe = probed <= 0 || rtt > probed*3/2 || rtt < probed/2
			}
			if reprobe {
				if p, err := m.Probe(ctx); err == nil {
					probed = p.RTT
				}
			}
		}
	}()
}
