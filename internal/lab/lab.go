// Package lab holds the experiment engines behind `p2pmsg lab` and the
// Testground plans: the per-layer round-trip study of the JXTA layer paper
// (Jan & Noblet, INRIA RR-5350), the AMTT and codec experiments, and message
// rate under load. The swarm engine is package swarm's, which links none
// of this package's dependencies.
//
// It sits above every layer: each layer under test is a Layer that knows how
// to set up a sender and an echoing receiver on loopback. Raw TCP and raw
// libp2p streams are measured the same way, side by side, as baselines.
package lab

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownLayer is returned for a layer name nobody registered.
var ErrUnknownLayer = errors.New("lab: unknown layer")

// ErrRateConfig reports a RateConfig RunRate cannot run (a size or a
// shape out of range).
var ErrRateConfig = errors.New("lab: invalid rate configuration")

// Transports the libp2p-based layers run on.
const (
	TransportTCP  = "tcp"
	TransportQUIC = "quic"
)

// TransportJXTATCP is JXTA's own TCP transport, the jxta-* and jxse-*
// layers' whatever the study's transport (reported, not chosen).
const TransportJXTATCP = "jxta-tcp"

// CheckTransport refuses a transport the libp2p-based layers do not run
// on ("" is TransportTCP).
func CheckTransport(transport string) error {
	if _, err := LoopbackAddr(transport); err != nil {
		return err
	}
	return nil
}

// Pair is a connected sender and echoing receiver for one layer.
type Pair interface {
	// RoundTrip sends payload and waits until the receiver's echo of the
	// same size has arrived in full.
	RoundTrip(ctx context.Context, payload []byte) error
	// WireBytes is what the layer writes to its stream per message beyond
	// the payload, for a payload of size bytes.
	WireBytes(size int) int
	io.Closer
}

// Batcher is a Pair that can run n consecutive message/echo pairs itself,
// each message sent once the previous echo has arrived in full. A layer
// whose echo arrives in a callback implements it so that, like the
// baselines' loops, it does not hand every echo over to the caller's
// goroutine: the time then measures the layer, not that hand-off.
type Batcher interface {
	RoundTrips(ctx context.Context, payload []byte, n int) error
}

// TimedBatcher is a Pair that times its own runs of n pairs: RunRTT takes
// the time it reports instead of the wall time around the call. The
// JXSE-to-JXSE reference layers are timed so, inside the JVM, which the
// command that starts a run would otherwise be counted in.
type TimedBatcher interface {
	TimedRoundTrips(ctx context.Context, payload []byte, n int) (time.Duration, error)
}

// Layer sets up pairs for one communication layer.
type Layer interface {
	Name() string
	Open(ctx context.Context, transport string) (Pair, error)
}

// fixedTransport is a Layer that ignores the transport Open is given
// and always runs on its own (raw TCP, JXTA's TCP): its results name that
// one, not the libp2p transport the study asked for.
type fixedTransport interface {
	Transport() string
}

// layerTransport is the transport layer's pairs run on when the study
// asks for transport.
func layerTransport(layer Layer, transport string) string {
	if f, ok := layer.(fixedTransport); ok {
		return f.Transport()
	}
	return transport
}

// RTTConfig describes a round-trip study. Zero fields take the defaults.
//
// The paper warms up with 1,000 pairs, as the default does, and times five
// runs of 100 pairs per size (Runs 5, Pairs 100 reproduce that). The
// defaults spread about as many pairs (510) over 51 runs of 10: on a
// shared 2-core VM, whose neighbours steal the CPU for milliseconds at a
// time, five 3-ms runs put the paired ratio of two identical endpoint
// layers anywhere from 0.65 to 1.19 in six studies; 51 runs of 10, on
// one pair of nodes (see RunRTT), from 0.99 to 1.07 in five.
type RTTConfig struct {
	Layers    []Layer
	Sizes     []int  // payload sizes in bytes; default DefaultSizes
	Transport string // TransportTCP (default) or TransportQUIC
	Warmup    int    // message/echo pairs before measuring; default 1000
	Runs      int    // timed runs per size; default DefaultRuns
	Pairs     int    // consecutive pairs per run; default DefaultPairs
	// Baseline, when it names one of Layers, gives every result the
	// paired ratio of its runs to the baseline's (RTTResult.Ratio).
	Baseline string
	// Progress, when set, receives one line per finished size.
	Progress io.Writer
}

// The schedule of a study by default (see RTTConfig).
const (
	DefaultRuns  = 51
	DefaultPairs = 10
)

// DefaultSizes are the payload sizes of `p2pmsg lab rtt` by default.
var DefaultSizes = []int{1, 64, 512, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 128 << 10, 512 << 10, 1 << 20, 4 << 20, 16 << 20}

// RTTResult is the median of the runs for one layer and size.
type RTTResult struct {
	Layer     string        `json:"layer"`
	Transport string        `json:"transport"`
	Size      int           `json:"size"`
	RTT       time.Duration `json:"rtt_ns"`
	Latency   time.Duration `json:"latency_ns"`
	Bandwidth float64       `json:"bandwidth_Bps"` // 2·size/RTT, bytes per second
	WireBytes int           `json:"wire_bytes"`
	// Ratio is the median over rounds of this layer's run time divided by
	// the baseline layer's in the same round (0 without a baseline). The
	// two runs of a round are minutes closer than the medians' runs may
	// be, so the ratio of a pair is spared the machine's drift; the
	// median of those ratios is the steadier figure to hold a target
	// such as "pipe RTT ≤ 1.1× endpoint RTT" against.
	Ratio float64 `json:"ratio_to_baseline,omitempty"`
	// Baseline is the layer Ratio is over (absent without one); Warmup,
	// Runs and Pairs the schedule the row was measured with, so that two
	// files' rows can be compared without their run.json.
	Baseline string `json:"baseline,omitempty"`
	Warmup   int    `json:"warmup"`
	Runs     int    `json:"runs,omitempty"`
	Pairs    int    `json:"pairs,omitempty"`
}

// RunRTT runs the study: every layer's pair is opened and warmed up, then
// for each size Runs rounds in which every layer makes one timed run of
// Pairs consecutive message/echo pairs, in an order shuffled afresh each
// round (from a fixed seed). The result per layer and size is the median
// run's time divided by Pairs; results come layer by layer, in
// cfg.Layers' order.
//
// Interleaving the layers' runs, rather than measuring one layer after
// the other, puts every layer under the same machine load: a busy
// neighbour or a frequency change then shifts all of a round's runs
// alike, and the ratios between layers (what the study is about) stay
// put even when the absolute times drift. Shuffling rather than rotating
// keeps one layer from always following the same other, whose garbage
// and winding-down goroutines it would otherwise always pay for (see the
// grid experiment).
//
// The endpoint, pipe and socket layers all run on one pair of nodes,
// connected once: the pipe's messages then travel on the very stream the
// endpoint layer's do, and the socket's stream shares their connection.
// Pairs of nodes differ from each other, some running a whole study
// several percent faster than others; sharing them leaves the layer as
// the only difference between those layers' runs.
func RunRTT(ctx context.Context, cfg RTTConfig) ([]RTTResult, error) {
	if len(cfg.Layers) == 0 {
		return nil, errors.New("lab: no layers to measure")
	}
	sizes := cfg.Sizes
	if len(sizes) == 0 {
		sizes = DefaultSizes
	}
	transport := cmp(cfg.Transport, TransportTCP)
	warmup, runs, pairs := cmpInt(cfg.Warmup, 1000), cmpInt(cfg.Runs, DefaultRuns), cmpInt(cfg.Pairs, DefaultPairs)
	if cfg.Warmup < 0 {
		warmup = 0
	}
	maxSize := slices.Max(sizes)
	payload := make([]byte, maxSize)
	for i := range payload {
		payload[i] = byte(i*31 + 7)
	}
	n := len(cfg.Layers)
	base := -1
	if cfg.Baseline != "" {
		base = slices.IndexFunc(cfg.Layers, func(l Layer) bool { return l.Name() == cfg.Baseline })
		if base < 0 {
			return nil, fmt.Errorf("%w: baseline %q is not among the layers measured", ErrUnknownLayer, cfg.Baseline)
		}
	}
	for i, l := range cfg.Layers {
		if _, ok := l.(stackLayer); ok && slices.ContainsFunc(cfg.Layers[:i], func(o Layer) bool { return o.Name() == l.Name() }) {
			return nil, fmt.Errorf("lab: layer %s given twice (it shares its nodes with the other layers of the study)", l.Name())
		}
	}
	var shared *stack // the stackLayers' nodes
	open := make([]Pair, 0, n)
	defer func() {
		for _, p := range open {
			p.Close()
		}
		if shared != nil {
			shared.Close()
		}
	}()
	fail := func(i int, err error) ([]RTTResult, error) {
		return nil, fmt.Errorf("lab: layer %s: %w", cfg.Layers[i].Name(), err)
	}
	for i, layer := range cfg.Layers {
		var p Pair
		var err error
		if sl, ok := layer.(stackLayer); ok {
			if shared == nil {
				if shared, err = openStack(ctx, transport); err != nil {
					return fail(i, err)
				}
			}
			p, err = sl.openOn(ctx, shared)
		} else {
			p, err = layer.Open(ctx, transport)
		}
		if err != nil {
			return fail(i, err)
		}
		open = append(open, p)
		if warmup > 0 {
			if err := roundTrips(ctx, p, payload[:1], warmup); err != nil {
				return fail(i, fmt.Errorf("warm-up: %w", err))
			}
		}
	}
	results := make([][]RTTResult, n)
	times := make([][]time.Duration, n)
	for i := range times {
		times[i] = make([]time.Duration, runs)
	}
	order := newRoundOrder(1, "rtt", n)
	for _, size := range sizes {
		for r := range runs {
			for _, i := range order.next() {
				d, err := timedRoundTrips(ctx, open[i], payload[:size], pairs)
				if err != nil {
					return fail(i, fmt.Errorf("size %d: %w", size, err))
				}
				times[i][r] = d / time.Duration(pairs)
			}
		}
		for i, layer := range cfg.Layers {
			rtt := median(times[i])
			res := RTTResult{
				Layer: layer.Name(), Transport: layerTransport(layer, transport), Size: size, RTT: rtt, Latency: rtt / 2,
				Bandwidth: 2 * float64(size) / rtt.Seconds(), WireBytes: open[i].WireBytes(size),
				Warmup: warmup, Runs: runs, Pairs: pairs,
			}
			if base >= 0 {
				res.Ratio = pairedRatio(times[i], times[base])
				res.Baseline = cfg.Baseline
			}
			results[i] = append(results[i], res)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "lab rtt: %s/%s size %s: rtt %v\n", res.Layer, res.Transport, FormatSize(size), rtt)
			}
		}
	}
	return slices.Concat(results...), nil
}

// roundOrder shuffles the order of a round's runs (layers, or a grid
// cell's choices) afresh for every round, from a seed, so that a run can
// be repeated exactly.
type roundOrder struct {
	rng  *rand.Rand
	perm []int
}

func newRoundOrder(seed uint64, doc string, n int) *roundOrder {
	h := fnv.New64a()
	h.Write([]byte(doc))
	o := &roundOrder{rng: rand.New(rand.NewPCG(seed, h.Sum64())), perm: make([]int, n)}
	for i := range o.perm {
		o.perm[i] = i
	}
	return o
}

// next returns the next round's order; it is valid until the next call.
func (o *roundOrder) next() []int {
	o.rng.Shuffle(len(o.perm), func(i, j int) { o.perm[i], o.perm[j] = o.perm[j], o.perm[i] })
	return o.perm
}

// timedRoundTrips runs n consecutive message/echo pairs on p and returns
// their time.
func timedRoundTrips(ctx context.Context, p Pair, payload []byte, n int) (time.Duration, error) {
	if t, ok := p.(TimedBatcher); ok {
		return t.TimedRoundTrips(ctx, payload, n)
	}
	start := time.Now()
	err := roundTrips(ctx, p, payload, n)
	return time.Since(start), err
}

// roundTrips runs n consecutive message/echo pairs on p.
func roundTrips(ctx context.Context, p Pair, payload []byte, n int) error {
	if t, ok := p.(TimedBatcher); ok {
		_, err := t.TimedRoundTrips(ctx, payload, n)
		return err
	}
	if b, ok := p.(Batcher); ok {
		return b.RoundTrips(ctx, payload, n)
	}
	for range n {
		if err := p.RoundTrip(ctx, payload); err != nil {
			return err
		}
	}
	return nil
}

// pairedRatio is the median of a[r]/b[r] over the rounds r where b[r] is
// positive.
func pairedRatio(a, b []time.Duration) float64 {
	var rs []float64
	for r := range min(len(a), len(b)) {
		if b[r] > 0 {
			rs = append(rs, float64(a[r])/float64(b[r]))
		}
	}
	if len(rs) == 0 {
		return 0
	}
	return median(rs)
}

// pairedInterval is the 95% confidence interval of pairedRatio(a, b): the
// distribution-free one for a median, between the order statistics of the
// per-round ratios that a sign test puts there (rounds taken as
// independent). ok is false for fewer than six rounds, too few for one.
func pairedInterval(a, b []time.Duration) (lo, hi float64, ok bool) {
	var rs []float64
	for r := range min(len(a), len(b)) {
		if b[r] > 0 {
			rs = append(rs, float64(a[r])/float64(b[r]))
		}
	}
	j := signRank(len(rs), 0.025)
	if j == 0 {
		return 0, 0, false
	}
	slices.Sort(rs)
	return rs[j-1], rs[len(rs)-j], true
}

// signRank is the largest rank j (from 1) with P(X < j) ≤ alpha for X
// binomial(n, ½): the j-th smallest and the j-th largest of n values
// bracket their median with confidence at least 1 − 2·alpha. Zero if no
// rank does.
func signRank(n int, alpha float64) int {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	cum := 0.0
	for j := 0; j <= n/2; j++ {
		// P(X = j)
		cum += math.Exp(lg(n) - lg(j) - lg(n-j) - float64(n)*math.Ln2)
		if cum > alpha {
			return j
		}
	}
	return n / 2
}

// median is the middle value of v (the mean of the middle two for an even
// count); v is left as it was.
func median[T ~int64 | ~float64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cmpInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// ParseSizes parses a comma-separated list of sizes such as
// "1,64,512,1K,4K,1M" (K = 1024, M = 1024², G = 1024³).
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult, digits := 1, f
		switch strings.ToUpper(f[len(f)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		}
		if mult != 1 {
			digits = f[:len(f)-1]
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return nil, fmt.Errorf("lab: size %q: want a whole number of bytes, with K, M or G for 1024, 1024² or 1024³", f)
		}
		if n < 1 || n > (1<<31-1)/mult {
			return nil, fmt.Errorf("lab: size %q: want 1 to 2147483647 bytes", f)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, errors.New("lab: no sizes given")
	}
	return out, nil
}

// FormatSize prints a size the way ParseSizes reads it, when exact.
func FormatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "K"
	}
	return strconv.Itoa(n)
}

// LayerNames returns the names of a set of layers, sorted.
func LayerNames(layers map[string]Layer) []string {
	names := make([]string, 0, len(layers))
	for n := range layers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
