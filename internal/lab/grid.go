package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pathinfo"
)

// The grid experiment measures the adaptive scheme ("auto") against
// sending as is ("identity") and every fixed codec, by AMTT, on a grid of
// emulated links × documents × receiver CPUs. It runs the AMTT
// experiment's trial protocol (amtt.go) on the same peers and pipes: per
// document a handshake, then rounds in which every choice sends the
// document through its encoding adapter on the data pipe in turn (in an
// order shuffled afresh each round) and the receiver acknowledges each
// message once decoded; the first Warmup rounds are discarded, then each
// series' highest and lowest fifth, and the rest averaged. All choices of a cell
// are thus measured side by side, in one run, on one connection, which is
// what makes them comparable on a busy machine. The order is shuffled
// rather than rotated because an exchange pays for some of what the one
// before it left behind (garbage to collect, goroutines still winding
// down): rotated, every choice would always follow the same neighbour,
// and a light choice placed after a heavy codec (auto after xml, in the
// list's order) would carry that codec's wake for the whole run.
//
// Shuffled, that wake is noise, and where exchanges are short it is most
// of the noise: on loopback, a 255 B document sent as is took 56 µs after
// itself and 69–77 µs after a codec's exchange with a slow receiver (the
// codec's tables in the caches, a core that had spun or slept), and the
// slower an exchange starts, the more a choice pays for each cache line
// it touches. So a choice whose last exchange took less than settleBelow
// first sends the document once more, untimed: each is timed as it would
// be in a stream of its own messages, the way an application sends them.
// Long exchanges are timed without: what their predecessor left weighs
// little on them, and settling would double a slow link's run. And a
// fixed choice found more than twice as slow as the best is retired from
// the cell's later rounds (retire), which then go to the choices that
// might be the best, identity and auto. A cell in which the machine
// stalled more exchanges than the trimmed mean absorbs is measured again
// (disturbedShare), and the least disturbed measurement kept: auto's
// models learn on through it, as they would from any traffic.
//
// The sender is one p2pmsg node for the whole run: its adaptive models
// persist from cell to cell as a node's would from day to day, its path
// to each new receiver is probed by pathinfo (no history: a new peer per
// link). Each choice sends through its own encoding.Bidi over the data
// pipe and receives the acknowledgement through it, so auto's scheme
// times its own exchanges and feeds its path model as any user's does
// (encoding.Observer); nothing else is reported to the path monitor. The
// receiver decodes with a timing decoder and serves its decode profile
// over pathinfo; its acknowledgements say how long it decoded, for the
// trace.

// Errors of the grid experiment.
var ErrGridConfig = errors.New("lab: invalid grid configuration")

// Choice names of the grid besides codec specs.
const (
	ChoiceIdentity = "identity" // the element as it is
	ChoiceAuto     = "auto"     // the adaptive scheme
)

// Receiver CPUs.
const (
	CPUFast = "fast" // this machine's speed
	CPUSlow = "slow" // decode throttled to a 450 MHz-class speed
)

// DefaultSlowFactor is how many times longer a "slow" receiver takes to
// decode: a 450 MHz Pentium II against one core of the 2-3 GHz EPYC class
// machine this runs on, about 6× by clock and 3× by work per cycle.
const DefaultSlowFactor = 20

// MaxSlowFactor bounds the slow factor: at 1000 a millisecond's decode
// already takes a second, and the grid's largest documents' (tens of
// milliseconds each) most of a minute a round, which no CPU a peer still
// runs on comes near; beyond it a slow cell would run for hours.
const MaxSlowFactor = 1000

// SlowFactorRule is what ValidSlowFactor allows, in words: for the
// errors of GridConfig and for a flag's help, so that they say the same.
var SlowFactorRule = fmt.Sprintf("more than 1 and at most %d", MaxSlowFactor)

// ValidSlowFactor reports whether f is a slow factor GridConfig takes:
// more than 1 (a receiver slower than this machine) and at most
// MaxSlowFactor. NaN is not.
func ValidSlowFactor(f float64) bool {
	return f > 1 && f <= MaxSlowFactor
}

// Grid defaults.
var (
	// AllGridProfiles are the full grid's links.
	AllGridProfiles = []string{"dialup", "dsl", "cable", "t1", "lan", "transatlantic", "gbe", "loopback"}
	// DefaultGridProfiles are the default run's.
	DefaultGridProfiles = []string{"loopback", "lan", "dsl", "transatlantic"}
	// AllGridChoices are the full grid's fixed choices: identity and
	// every compressing codec, at its default level and the extremes.
	AllGridChoices = []string{ChoiceIdentity, "gzip:1", "gzip:6", "gzip:9", "deflate:6", "zstd:1", "zstd:3", "zstd:9", "zstd:19", "s2:1", "s2:3", "xml:1", "xml:3"}
	// DefaultGridChoices are the default run's: identity and every
	// compressing codec at its default level, and zstd at its strongest.
	DefaultGridChoices = []string{ChoiceIdentity, "gzip:6", "deflate:6", "zstd:3", "zstd:19", "s2:1", "xml:3"}
)

// Grid defaults of GridConfig.
const (
	DefaultGridTrials     = 5
	DefaultGridWarmup     = 3
	DefaultGridMaxMessage = 30 * time.Second
	DefaultGridDocBudget  = 3 * time.Second
	DefaultGridRemeasure  = 2
)

// GridConfig describes a grid run. Zero fields take the defaults.
type GridConfig struct {
	Profiles []string // link profiles (linkemu names, "loopback")
	Docs     []string // documents (LoadGridDoc names)
	// Choices are the fixed choices: ChoiceIdentity and codec specs
	// (encoding.ParseSpec; codecbench's models by name, no seal).
	// Auto chooses among the same codecs.
	Choices []string
	CPUs    []string // receiver CPUs: CPUFast, CPUSlow
	// SlowFactor is the slow receiver's decode slowdown (ValidSlowFactor);
	// default DefaultSlowFactor.
	SlowFactor float64
	Trials     int // counted rounds per document, at least MinAMTTTrials
	Warmup     int // discarded rounds first; negative: none
	// DocBudget lets fast cells repeat: after its warm-up a document gets
	// rounds until DocBudget has passed, between Trials and
	// maxRoundsPerTrial·Trials. Negative: always Trials. Default
	// DefaultGridDocBudget.
	DocBudget time.Duration
	// MaxMessage skips a fixed choice in a cell when sending its encoded
	// document over the link would take longer (the link's analytic time),
	// so that a full grid's dial-up column ends today.
	MaxMessage time.Duration
	// Remeasure is how many more times a cell is measured when the
	// machine disturbed its measurement (disturbedShare); the least
	// disturbed measurement is kept. Default DefaultGridRemeasure;
	// negative: never.
	Remeasure int
	// Models are the sender's models, kept across cells; default new.
	Models *adaptive.Models
	Seed   uint64
	// Progress, when set, receives a line per document and cell.
	Progress io.Writer
	// Trace, when set, receives a line per auto decision. Tracing adds a
	// little to auto's time per element: each decision is copied out.
	Trace io.Writer
}

// Check reports whether RunGrid would refuse c's configuration (an error
// matching ErrGridConfig), without running anything.
func (c GridConfig) Check() error {
	_, err := c.normalize()
	return err
}

func (c GridConfig) normalize() (GridConfig, error) {
	if len(c.Profiles) == 0 {
		c.Profiles = DefaultGridProfiles
	}
	for _, p := range c.Profiles {
		if _, err := linkemu.Lookup(p); err != nil {
			return c, fmt.Errorf("%w: %w", ErrGridConfig, err)
		}
	}
	if len(c.Docs) == 0 {
		c.Docs = DefaultGridDocs
	}
	for _, d := range c.Docs {
		if _, err := LoadGridDoc(d); err != nil {
			return c, err
		}
	}
	if len(c.Choices) == 0 {
		c.Choices = DefaultGridChoices
	}
	seen := map[string]bool{}
	for _, s := range c.Choices {
		if seen[s] || s == ChoiceAuto {
			return c, fmt.Errorf("%w: choice %q given twice (auto is always measured)", ErrGridConfig, s)
		}
		seen[s] = true
		if s == ChoiceIdentity {
			continue
		}
		if _, err := newCodec(s); err != nil {
			return c, fmt.Errorf("%w: %w", ErrGridConfig, err)
		}
	}
	if !seen[ChoiceIdentity] {
		c.Choices = append([]string{ChoiceIdentity}, c.Choices...)
	}
	// Auto chooses among the fixed choices' codecs: with none it has
	// nothing to measure against identity.
	if len(c.Choices) < 2 {
		return c, fmt.Errorf("%w: choices %q name no codec for auto to choose among", ErrGridConfig, c.Choices)
	}
	if len(c.CPUs) == 0 {
		c.CPUs = []string{CPUFast}
	}
	// A cell measured twice would be two results of one cell: the
	// reports key their cells by link, CPU and document.
	for _, l := range []struct {
		what  string
		names []string
	}{{"profile", c.Profiles}, {"document", c.Docs}, {"receiver CPU", c.CPUs}} {
		seen := map[string]bool{}
		for _, n := range l.names {
			if seen[n] {
				return c, fmt.Errorf("%w: %s %q given twice", ErrGridConfig, l.what, n)
			}
			seen[n] = true
		}
	}
	for _, cpu := range c.CPUs {
		if cpu != CPUFast && cpu != CPUSlow {
			return c, fmt.Errorf("%w: receiver CPU %q (want fast or slow)", ErrGridConfig, cpu)
		}
	}
	if c.SlowFactor == 0 {
		c.SlowFactor = DefaultSlowFactor
	}
	if !ValidSlowFactor(c.SlowFactor) {
		return c, fmt.Errorf("%w: slow factor %g: want %s", ErrGridConfig, c.SlowFactor, SlowFactorRule)
	}
	switch {
	case c.Trials == 0:
		c.Trials = DefaultGridTrials
	case c.Trials < MinAMTTTrials:
		return c, fmt.Errorf("%w: %d trials, need at least %d", ErrGridConfig, c.Trials, MinAMTTTrials)
	}
	switch {
	case c.Warmup == 0:
		c.Warmup = DefaultGridWarmup
	case c.Warmup < 0:
		c.Warmup = 0
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultGridMaxMessage
	}
	if c.DocBudget == 0 {
		c.DocBudget = DefaultGridDocBudget
	}
	if c.Remeasure == 0 {
		c.Remeasure = DefaultGridRemeasure
	}
	if c.Models == nil {
		c.Models = adaptive.NewModels()
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c, nil
}

// GridResult is one choice in one cell. Its JSON form is a line of
// `p2pmsg lab grid --json`.
type GridResult struct {
	Profile string `json:"profile"`
	CPU     string `json:"cpu"`
	Doc     string `json:"doc"`
	Bytes   int    `json:"bytes"`
	Choice  string `json:"choice"`
	// Trials measured (warm-up excluded); AMTT averages them without the
	// highest and the lowest fifth (gridMean). Zero when Skipped.
	Trials int           `json:"trials"`
	AMTT   time.Duration `json:"amtt_ns"`
	// SentBytes is the element's size as sent (auto: its average).
	SentBytes int `json:"sent_bytes"`
	// Skipped says why the choice was not measured in this cell.
	Skipped string `json:"skipped,omitempty"`
	// Settled counts the trials preceded by an untimed exchange of the
	// same choice (settleBelow).
	Settled int `json:"settled,omitempty"`
	// Retired reports that the choice was measured in fewer rounds than
	// the cell had: it was more than retireFactor times slower than the
	// best fixed choice (retire).
	Retired bool `json:"retired,omitempty"`
	// Measured is how many times the cell was measured: more than once
	// when the machine disturbed it (GridConfig.Remeasure). The same for
	// every choice of a cell, as is Disturbed.
	Measured int `json:"measured,omitempty"`
	// Disturbed is the share of the kept measurement's exchanges that
	// the machine disturbed (disturbedShare).
	Disturbed float64 `json:"disturbed,omitempty"`
	// Picks counts what auto sent in the counted trials, by spec.
	Picks map[string]int `json:"picks,omitempty"`
	// Paired gives auto, for each fixed choice measured beside it, the
	// median over rounds of auto's exchange time over that choice's in
	// the same round. The rounds' machine load and the order they ran in
	// weigh on both alike, so this is the steadier figure for how much
	// slower or faster auto is than a choice close to it, such as
	// identity on a fast path.
	Paired map[string]float64 `json:"paired,omitempty"`
	// PairedCI is each Paired ratio's 95% confidence interval, [low,
	// high] (pairedInterval), where there were rounds enough for one. On
	// a fast path two identical choices measured side by side differ by a
	// few percent in a cell, so whether auto is within 2% of identity
	// there is a question for the interval, not the ratio alone.
	PairedCI map[string][2]float64 `json:"paired_ci,omitempty"`
	// Link is the emulated link the cell ran on (the profile's, which a
	// profile's name alone does not pin down across versions), Seed the
	// seed of its jitter and of the rounds' order, SlowFactor the slow
	// receiver's decode slowdown (CPU slow only): what the row was
	// measured with. Absent from rows written before they were recorded
	// (and then unknown, not zero).
	Link       *linkemu.Link `json:"link,omitempty"`
	Seed       uint64        `json:"seed,omitempty"`
	SlowFactor float64       `json:"slow_factor,omitempty"`
}

// describe sets what r was measured with: link, seed and, on a slow
// receiver, its slowdown.
func (r *GridResult) describe(link linkemu.Link, cfg GridConfig) {
	r.Link, r.Seed = &link, cfg.Seed
	if r.CPU == CPUSlow {
		r.SlowFactor = cfg.SlowFactor
	}
}

// RunGrid runs the grid and returns a result per cell and choice: per
// receiver CPU, per profile, per document, the fixed choices in order and
// then auto.
func RunGrid(ctx context.Context, cfg GridConfig) ([]GridResult, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	docs := make([]GridDoc, len(cfg.Docs))
	for i, name := range cfg.Docs {
		docs[i], _ = LoadGridDoc(name)
	}
	var out []GridResult
	for _, cpu := range cfg.CPUs {
		// One receiver machine per CPU: its models (its decode profile)
		// carry over from link to link.
		rmodels := adaptive.NewModels()
		for _, profile := range cfg.Profiles {
			res, err := runGridProfile(ctx, cfg, profile, cpu, docs, rmodels)
			out = append(out, res...)
			if err != nil {
				return out, fmt.Errorf("lab: grid %s/%s: %w", profile, cpu, err)
			}
		}
	}
	return out, nil
}

// gridPair is a sender and a receiver joined by the experiment's pipes
// over one emulated link, with pathinfo on both.
type gridPair struct {
	snd, rcv   *AMTTPeer
	sp, rp     AMTTPipes
	ssvc, rsvc *pathinfo.Service
	mon        *pathinfo.Monitor
	rdec       *encoding.Decoder
}

func (g *gridPair) Close() error {
	var errs []error
	for _, s := range []*pathinfo.Service{g.ssvc, g.rsvc} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	for _, p := range []*AMTTPeer{g.snd, g.rcv} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

// openGridPair starts both peers and connects the pipes; the sender's
// link is link, or sw's when sw is not nil.
func openGridPair(ctx context.Context, link linkemu.Link, sw *linkemu.Switch, seed uint64, cpu string, slow float64, choices []string, smodels, rmodels *adaptive.Models) (*gridPair, error) {
	g := &gridPair{}
	fail := func(err error) (*gridPair, error) { g.Close(); return nil, err }
	comm, data, err := NewAMTTAdvs()
	if err != nil {
		return nil, err
	}
	if g.rcv, err = NewAMTTPeer(ctx, linkemu.Link{}, 0, ""); err != nil {
		return fail(err)
	}
	if sw != nil {
		g.snd, err = newSwitchedPeer(ctx, sw, seed)
	} else {
		g.snd, err = NewAMTTPeer(ctx, link, seed, "")
	}
	if err != nil {
		return fail(err)
	}
	if err := g.rcv.Listen(comm, data); err != nil {
		return fail(err)
	}
	acc := make(chan error, 1)
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	go func() {
		var err error
		g.rp, err = g.rcv.Accept(actx)
		acc <- err
	}()
	g.sp, err = g.snd.Connect(ctx, comm, data, g.rcv.Node.AddrInfo())
	if err != nil {
		acancel()
	}
	if aerr := <-acc; err == nil {
		err = aerr
	}
	if err != nil {
		return fail(fmt.Errorf("connecting the pipes: %w", err))
	}
	reg, err := gridRegistry(choices, cpu, slow)
	if err != nil {
		return fail(err)
	}
	if g.rdec, err = encoding.NewDecoder(encoding.WithRegistry(reg), rmodels.TimeDecodes()); err != nil {
		return fail(err)
	}
	// The receiver's profile covers its codecs before it decodes any.
	rmodels.CalibrateDecode(reg)
	if g.rsvc, err = pathinfo.New(g.rcv.Node.Host(), rmodels); err != nil {
		return fail(err)
	}
	if g.ssvc, err = pathinfo.New(g.snd.Node.Host(), smodels); err != nil {
		return fail(err)
	}
	g.mon = g.ssvc.Monitor(g.rcv.Node.ID())
	return g, nil
}

// gridRegistry holds a decoder for every codec of the choices, each
// throttled on a slow receiver.
func gridRegistry(choices []string, cpu string, slow float64) (*encoding.Registry, error) {
	reg, err := encoding.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, spec := range choices {
		if spec == ChoiceIdentity {
			continue
		}
		c, err := newCodec(spec)
		if err != nil {
			return nil, err
		}
		if _, err := reg.Lookup(c.Name()); err == nil {
			continue
		}
		if cpu == CPUSlow {
			c = &slowCodec{Codec: c, factor: slow}
		}
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// slowCodec emulates a slower CPU on the decoding side: each decode is
// followed by a pause of (factor−1) times the typical duration of decodes
// of its sizes (the median of the last few, its own included), so that
// the decode takes about factor times the work it did. Only the work is
// multiplied, not what the machine added to it: a decode the machine
// interrupted (a VM's pause, the collector) took longer without doing
// more work, and a slower CPU would not have multiplied the interruption.
// Multiplied by 20 it did decide cells: in one grid run a 3.5 MB decode
// took 327 ms against 40–160 ms for the others; in the next, with the
// multiplied time capped at twice the median, the cable/slow 3.5 MB
// cell's decodes still ranged from 171 to 309 ms, 6.7% between two
// choices that sent the same bytes. The median alone makes the pause the
// same for the same work.
//
// Pauses shorter than spinBelow spin, as the slower CPU would be busy:
// a sleeping receiver lets its core idle, and on this VM the exchange
// after an idle core took 75–100 µs on loopback against 40–60 µs, noise
// larger than what the grid compares there. Longer pauses sleep, leaving
// the machine's cores to the sender (which shares them in this process)
// and to a grid run beside this one.
type slowCodec struct {
	encoding.Codec
	factor float64

	mu      sync.Mutex
	typical map[[2]int]*recentDurations // by size classes of input and output
}

// spinBelow is the longest pause slowCodec spins rather than sleeps.
const spinBelow = time.Millisecond

// recentDurations holds the last few durations of a kind of decode.
type recentDurations struct {
	d    [9]time.Duration
	n, i int
}

// add records d and returns the median of the last few, d included.
func (r *recentDurations) add(d time.Duration) time.Duration {
	r.d[r.i] = d
	r.i = (r.i + 1) % len(r.d)
	r.n = min(r.n+1, len(r.d))
	s := slices.Clone(r.d[:r.n])
	slices.Sort(s)
	return s[len(s)/2]
}

func (c *slowCodec) Decode(dst, src []byte, p encoding.Params, b encoding.Binding, max int) ([]byte, error) {
	t0 := time.Now()
	out, err := c.Codec.Decode(dst, src, p, b, max)
	d := time.Since(t0)
	if err == nil {
		d = c.worked(len(src), len(out), d)
	}
	pause(time.Duration((c.factor - 1) * float64(d)))
	return out, err
}

// pause waits d: spinning below spinBelow, sleeping from there.
func pause(d time.Duration) {
	if d >= spinBelow {
		time.Sleep(d)
		return
	}
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// worked is the decode time to multiply for a decode of in bytes to out
// that took d: the median of the last decodes of the same sizes, d's
// included.
func (c *slowCodec) worked(in, out int, d time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.typical == nil {
		c.typical = map[[2]int]*recentDurations{}
	}
	k := [2]int{bits.Len(uint(in)), bits.Len(uint(out))}
	r := c.typical[k]
	if r == nil {
		r = &recentDurations{}
		c.typical[k] = r
	}
	return r.add(d)
}

// timedScheme keeps what its scheme's encodes produce, to be looked at
// once the exchange is timed.
type timedScheme struct {
	encoding.Scheme
	out atomic.Pointer[message.Message] // the last encoded message
}

func (t *timedScheme) Encode(m *message.Message) (*message.Message, error) {
	out, err := t.Scheme.Encode(m)
	if err == nil {
		t.out.Store(out)
	}
	return out, err
}

// Sending and Delivered pass the encoding.Observer's calls on to the
// scheme, if it observes (auto's does).
func (t *timedScheme) Sending(m *message.Message) {
	if o, ok := t.Scheme.(encoding.Observer); ok {
		o.Sending(m)
	}
}

func (t *timedScheme) Delivered(ok bool) {
	if o, is := t.Scheme.(encoding.Observer); is {
		o.Delivered(ok)
	}
}

// sentAs says how the last encoded message carried the document: the
// codec spec its header names ("name:level"), or identity, and the
// element's size as sent.
func (t *timedScheme) sentAs() (spec string, size int) {
	m := t.out.Load()
	if m == nil {
		return "", 0
	}
	e, ok := m.Get(amttNS, elDoc)
	if !ok {
		return "", 0
	}
	if !encoding.IsEncoded(e) {
		return ChoiceIdentity, len(e.Data)
	}
	h, _, err := encoding.ParseHeader(e.Data)
	if err != nil {
		return "", len(e.Data)
	}
	return h.Spec().String(), len(e.Data)
}

// identityScheme sends selected elements as they are (their Producer mark
// removed): today's uncompressed practice.
type identityScheme struct{}

func (identityScheme) Encode(m *message.Message) (*message.Message, error) {
	out := m.Clone()
	for i, e := range m.All() {
		out.Set(i, encoding.Unmark(e))
	}
	return out, nil
}

func (identityScheme) Decode(m *message.Message) (*message.Message, error) { return m, nil }

// gridChoice is one choice's adapter on the sender's data pipe: it
// sends the documents and receives their acknowledgements.
type gridChoice struct {
	name   string
	scheme *timedScheme
	out    *encoding.Bidi
	size   map[string]int // encoded element size by document (fixed choices)
}

// Protocol elements of the grid beyond the AMTT experiment's.
const (
	elChoice  = "choice" // the choice a data message was sent with
	elDocName = "docname"
	elDecode  = "dec" // receiver's decode time, ns, in an acknowledgement
)

func runGridProfile(ctx context.Context, cfg GridConfig, profile, cpu string, docs []GridDoc, rmodels *adaptive.Models) ([]GridResult, error) {
	p, _ := linkemu.Lookup(profile)
	g, err := openGridPair(ctx, p.Link, nil, cfg.Seed, cpu, cfg.SlowFactor, cfg.Choices, cfg.Models, rmodels)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	rctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serveGridReceiver(rctx, g.rp, g.rdec) }()
	res, err := runGridSender(ctx, cfg, profile, cpu, p.Link, docs, g)
	if err != nil {
		cancel()
		<-served
		return res, err
	}
	cancel()
	if serr := <-served; serr != nil && !errors.Is(serr, context.Canceled) {
		return res, serr
	}
	return res, nil
}

func newChoices(cfg GridConfig, g *gridPair, trace func(adaptive.Decision)) ([]*gridChoice, *adaptive.Scheme, error) {
	var out []*gridChoice
	var codecs []encoding.Codec
	for _, spec := range cfg.Choices {
		var s encoding.Scheme = identityScheme{}
		if spec != ChoiceIdentity {
			c, err := newCodec(spec)
			if err != nil {
				return nil, nil, err
			}
			codecs = append(codecs, c)
			if s, err = encoding.New([]encoding.Codec{c}); err != nil {
				return nil, nil, err
			}
		}
		out = append(out, &gridChoice{name: spec, scheme: &timedScheme{Scheme: s}, size: map[string]int{}})
	}
	opts := []adaptive.Option{adaptive.WithModels(cfg.Models), adaptive.WithPeer(g.mon)}
	if trace != nil {
		opts = append(opts, adaptive.WithTrace(trace))
	}
	auto, err := adaptive.New(codecs, opts...)
	if err != nil {
		return nil, nil, err
	}
	out = append(out, &gridChoice{name: ChoiceAuto, scheme: &timedScheme{Scheme: auto}, size: map[string]int{}})
	for _, c := range out {
		if c.out, err = encoding.NewBidi(g.sp.Data, c.scheme); err != nil {
			return nil, nil, err
		}
	}
	return out, auto, nil
}

func runGridSender(ctx context.Context, cfg GridConfig, profile, cpu string, link linkemu.Link, docs []GridDoc, g *gridPair) ([]GridResult, error) {
	if err := g.mon.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("probing the path: %w", err)
	}
	// Auto's decisions are traced only for --trace: on the fastest links
	// copying each one out costs a fair share of what auto adds to an
	// exchange. What it sent is read off the message instead (sentAs).
	var mu sync.Mutex
	var lastDecision adaptive.Decision
	var trace func(adaptive.Decision)
	var wanted atomic.Bool // the round's decision goes to the trace
	if cfg.Trace != nil {
		trace = func(d adaptive.Decision) {
			if !wanted.Load() {
				return
			}
			mu.Lock()
			lastDecision = d
			mu.Unlock()
		}
	}
	choices, auto, err := newChoices(cfg, g, trace)
	if err != nil {
		return nil, err
	}
	defer auto.Wait() // its trials in the background, before the nodes close
	if cfg.Progress != nil {
		pth := g.mon.Path()
		fmt.Fprintf(cfg.Progress, "lab grid: %s/%s: probed rtt %v, %.3g MB/s\n", profile, cpu, pth.RTT.Round(time.Microsecond), pth.Bandwidth/1e6)
	}
	if err := g.sp.Comm.Send(ctx, protoMsg(opHello, elVersion, amttVersion)); err != nil {
		return nil, err
	}
	if _, err := expect(ctx, g.sp.Comm, opReady, ""); err != nil {
		return nil, err
	}
	var out []GridResult
	for _, doc := range docs {
		// The fixed choices' encoded sizes, and which fit the time limit.
		var run []*gridChoice
		skipped := map[string]string{}
		for _, c := range choices {
			size := len(doc.Data)
			if c.name != ChoiceAuto && c.name != ChoiceIdentity {
				e, err := c.scheme.Scheme.(*encoding.Codecs).EncodeElement(encoding.Producer{}.NewElement(amttNS, elDoc, doc.MIME, doc.Data))
				if err != nil {
					return out, err
				}
				size = len(e.Data)
			}
			c.size[doc.Name] = size
			if t := link.Up.TransferTime(size); c.name != ChoiceAuto && t > cfg.MaxMessage {
				skipped[c.name] = fmt.Sprintf("%v over the link", t.Round(time.Second))
				continue
			}
			run = append(run, c)
		}
		if len(run) == 1 { // auto alone: nothing to compare with
			skipped[ChoiceAuto] = "every fixed choice skipped"
			run = nil
		}
		if err := g.sp.Comm.Send(ctx, protoMsg(opSet, elDocName, doc.Name)); err != nil {
			return out, err
		}
		if _, err := expect(ctx, g.sp.Comm, opReady, ""); err != nil {
			return out, err
		}
		g.mon.FetchProfile(ctx) // what the receiver learned of its decoding so far
		order := newRoundOrder(cfg.Seed, doc.Name, len(run))
		last := make([]time.Duration, len(run)) // each choice's last exchange
		// exchange sends the document with c and times it to the
		// acknowledgement; the receiver's decode time comes with it.
		exchange := func(c *gridChoice, seq string, trace bool) (d, dec time.Duration, err error) {
			m := message.New(encoding.Producer{}.NewElement(amttNS, elDoc, doc.MIME, doc.Data),
				message.Text(amttNS, elOp, opEnc), message.Text(amttNS, elSeq, seq), message.Text(amttNS, elChoice, c.name))
			wanted.Store(trace)
			tctx, cancel := context.WithTimeout(ctx, max(time.Minute, 20*link.Up.TransferTime(c.size[doc.Name])))
			defer cancel()
			start := time.Now()
			err = c.out.Send(tctx, m)
			var ack *message.Message
			if err == nil {
				ack, err = expect(tctx, c.out, opAck, seq)
			}
			d = time.Since(start)
			if err != nil {
				return 0, 0, err
			}
			ns, _ := strconv.ParseInt(field(ack, elDecode), 10, 64)
			return d, time.Duration(ns), nil
		}
		// measure runs the cell's rounds once; round0 numbers its rounds
		// after a disturbed measurement's.
		measure := func(round0 int) (*cellRun, error) {
			m := &cellRun{times: make([][]time.Duration, len(run)), sent: make([]int, len(run)), settled: make([]int, len(run)), retired: make([]bool, len(run)), picks: map[string]int{}}
			var timed time.Time
			for t := 0; ; t++ {
				if done := t - cfg.Warmup; done >= cfg.Trials && done%cfg.Trials == 0 && bits.OnesCount(uint(done/cfg.Trials)) == 1 {
					retire(run, m.times, m.retired)
				}
				if t == cfg.Warmup {
					timed = time.Now()
				}
				if t >= cfg.Warmup+cfg.Trials && !moreRounds(cfg, t-cfg.Warmup, time.Since(timed)) {
					m.rounds = t
					return m, nil
				}
				seq := strconv.Itoa(round0 + t)
				for _, i := range order.next() {
					if m.retired[i] {
						continue
					}
					c := run[i]
					settle := settles(last[i])
					if settle {
						if _, _, err := exchange(c, seq+"s", false); err != nil {
							return m, fmt.Errorf("%s, round %d, %s, settling: %w", doc.Name, round0+t, c.name, err)
						}
					}
					d, dec, err := exchange(c, seq, c.name == ChoiceAuto && t >= cfg.Warmup && traced(t-cfg.Warmup))
					if err != nil {
						return m, fmt.Errorf("%s, round %d, %s: %w", doc.Name, round0+t, c.name, err)
					}
					last[i] = d
					if t < cfg.Warmup {
						continue
					}
					m.times[i] = append(m.times[i], d)
					if settle {
						m.settled[i]++
					}
					if c.name == ChoiceAuto {
						spec, size := c.scheme.sentAs()
						m.picks[spec]++
						m.sent[i] += size
						if cfg.Trace != nil && traced(t-cfg.Warmup) {
							mu.Lock()
							dd := lastDecision
							mu.Unlock()
							writeDecision(cfg.Trace, profile, cpu, doc.Name, round0+t, d, dec, dd)
						}
					} else {
						m.sent[i] += c.size[doc.Name]
					}
				}
			}
		}
		// A measurement the machine disturbed is repeated (see
		// disturbedShare), and the least disturbed one kept.
		var kept *cellRun
		measured, rounds := 0, 0
		for {
			m, err := measure(rounds)
			if err != nil {
				return out, err
			}
			measured++
			rounds += m.rounds
			m.disturbed = disturbedShare(run, m.times)
			if kept == nil || m.disturbed < kept.disturbed {
				kept = m
			}
			if kept.disturbed <= disturbedLimit || measured > cfg.Remeasure {
				break
			}
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "lab grid: %s/%s %s: %.0f%% of the exchanges disturbed, measuring again\n", profile, cpu, doc.Name, 100*m.disturbed)
			}
		}
		times, sent, settled, retired, picks := kept.times, kept.sent, kept.settled, kept.retired, kept.picks
		for _, c := range choices {
			r := GridResult{Profile: profile, CPU: cpu, Doc: doc.Name, Bytes: len(doc.Data), Choice: c.name, Skipped: skipped[c.name]}
			r.describe(link, cfg)
			if i := slices.Index(run, c); i >= 0 {
				r.Trials = len(times[i])
				r.AMTT = gridMean(times[i])
				r.SentBytes = sent[i] / max(len(times[i]), 1)
				r.Settled = settled[i]
				r.Retired = retired[i]
				r.Measured, r.Disturbed = measured, kept.disturbed
				if c.name == ChoiceAuto {
					r.Picks = picks
					r.Paired, r.PairedCI = map[string]float64{}, map[string][2]float64{}
					for j, o := range run {
						if j != i {
							r.Paired[o.name] = pairedRatio(times[i], times[j])
							if lo, hi, ok := pairedInterval(times[i], times[j]); ok {
								r.PairedCI[o.name] = [2]float64{lo, hi}
							}
						}
					}
				}
			}
			out = append(out, r)
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lab grid: %s/%s %s: %s (%.1f%% disturbed", profile, cpu, doc.Name, progressLine(out[len(out)-len(choices):]), 100*kept.disturbed)
			if measured > 1 {
				fmt.Fprintf(cfg.Progress, ", measured %d times", measured)
			}
			fmt.Fprintln(cfg.Progress, ")")
		}
	}
	if err := g.sp.Comm.Send(ctx, protoMsg(opDone)); err != nil {
		return out, err
	}
	if _, err := expect(ctx, g.sp.Comm, opBye, ""); err != nil {
		return out, err
	}
	return out, nil
}

// gridMean is the AMTT of a series: the AMTT experiment's trimmed mean
// generalised to long series, dropping the highest and the lowest fifth
// (at least one each; for five trials exactly trimmedMean). On a machine
// shared with other work, delays come in bursts that a single dropped
// maximum does not absorb.
func gridMean(d []time.Duration) time.Duration {
	if len(d) < MinAMTTTrials {
		return trimmedMean(d)
	}
	s := slices.Clone(d)
	slices.Sort(s)
	k := max(1, len(s)/5)
	s = s[k : len(s)-k]
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return sum / time.Duration(len(s))
}

// cellRun is one measurement of a cell: per choice of the cell's run,
// its timed exchanges, the bytes it sent, how many were settled, whether
// it was retired; what auto sent; the rounds it took (warm-up included);
// and the share of its exchanges the machine disturbed.
type cellRun struct {
	times     [][]time.Duration
	sent      []int
	settled   []int
	retired   []bool
	picks     map[string]int
	rounds    int
	disturbed float64
}

// disturbedShare is the share of a measurement's exchanges of fixed
// choices that took more than disturbedFactor times their choice's
// median, and stallMin more. A fixed choice repeats one operation, so
// such an exchange is the machine's doing (another process, the host of
// a virtual machine), not the choice's; auto is left out, as what it
// sends may change. The floor leaves out the scheduler's ordinary jitter
// on the shortest exchanges: on loopback a 45 µs exchange took twice
// that in a tenth of the rounds on a quiet machine, which the trimmed
// mean absorbs; what it cannot is stalls of milliseconds.
// gridMean drops each series' highest fifth, which absorbs disturbances
// up to about half that; a measurement with more, a period in which the
// machine stalled the cell's exchanges again and again, is repeated
// (GridConfig.Remeasure). In one such period, 20 s on a virtual machine
// whose host was busy, 30% of auto's exchanges of a 602 B document over
// the Fast Ethernet link took more than twice their median (0.5 ms), up
// to 12 ms, and sending as is, hit more often than gzip, came out 31%
// behind it where it had been 4% ahead in a quiet run.
func disturbedShare(run []*gridChoice, times [][]time.Duration) float64 {
	var n, k int
	for i, c := range run {
		if c.name == ChoiceAuto || len(times[i]) == 0 {
			continue
		}
		med := median(times[i])
		limit := max(time.Duration(disturbedFactor*float64(med)), med+stallMin)
		for _, d := range times[i] {
			if d > limit {
				k++
			}
		}
		n += len(times[i])
	}
	if n == 0 {
		return 0
	}
	return float64(k) / float64(n)
}

// disturbedFactor, stallMin and disturbedLimit: an exchange more than
// twice its choice's median, and 1 ms more, is disturbed; a measurement
// with more than a tenth of its exchanges disturbed is repeated.
const (
	disturbedFactor = 2
	stallMin        = time.Millisecond
	disturbedLimit  = 0.10
)

// retire marks in retired the fixed choices, other than identity, whose
// AMTT so far is more than retireFactor times the best fixed choice's:
// measured in the rounds after, they could not become the best, and
// their rounds are time a cell with a slow receiver can give the choices
// that might. There, a round of every choice took 80 ms for a 172 kB
// document on GbE, of which identity and auto took 2 ms each; 93 rounds
// in 8 s put auto anywhere within ±5% of identity, which it sent too.
// Identity stays, as the choice the targets compare auto with round by
// round; auto's paired ratio to a retired choice is over the rounds they
// shared (pairedRatio). The grid retires at Trials timed rounds and at
// every doubling of them.
func retire(run []*gridChoice, times [][]time.Duration, retired []bool) {
	means := make([]time.Duration, len(run))
	best := time.Duration(0)
	for i, c := range run {
		if c.name == ChoiceAuto || len(times[i]) == 0 {
			continue
		}
		means[i] = gridMean(times[i])
		if best == 0 || means[i] < best {
			best = means[i]
		}
	}
	if best == 0 {
		return
	}
	for i, c := range run {
		if c.name != ChoiceAuto && c.name != ChoiceIdentity && float64(means[i]) > retireFactor*float64(best) {
			retired[i] = true
		}
	}
}

// retireFactor is how many times slower than the best fixed choice a
// choice is retired (retire): far beyond what a cell's noise can make of
// Trials rounds.
const retireFactor = 2

// settles reports whether a choice whose last exchange took last (0: none
// yet) sends the document once more, untimed, before its timed exchange:
// if last was shorter than settleBelow (see the grid's doc).
func settles(last time.Duration) bool { return last > 0 && last < settleBelow }

const settleBelow = 10 * time.Millisecond

// traced reports whether auto's decision in timed round t goes to the
// trace: the first traceAll, then one in traceEvery, so that a fast
// cell's thousands of rounds do not write tens of megabytes.
func traced(t int) bool { return t < traceAll || t%traceEvery == 0 }

const traceAll, traceEvery = 200, 20

// moreRounds reports whether a document that had done timed rounds in
// elapsed, at least Trials, gets another (see DocBudget). Rounds are
// counted by the clock, not by the links' analytic times: those are far
// from what a loopback exchange through the whole stack takes.
func moreRounds(cfg GridConfig, done int, elapsed time.Duration) bool {
	return cfg.DocBudget >= 0 && elapsed < cfg.DocBudget && done < maxRoundsPerTrial*cfg.Trials
}

// A fast cell's rounds: choices that differ by a microsecond or two (auto
// sending as is, against identity) need thousands of rounds to be told
// apart from the machine's noise: two identical choices came out up to 8%
// apart in 1000 rounds on loopback.
const (
	maxRoundsPerTrial = 4000
)

func progressLine(rs []GridResult) string {
	var parts []string
	for _, r := range rs {
		if r.Skipped != "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %v", r.Choice, fmtDur(r.AMTT)))
	}
	return strings.Join(parts, ", ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// writeDecision writes one line of auto's trace for decision d. took is
// the exchange's time, dec the receiver's decode time (0 if not known):
// with the encode time the decision measured, they are what to hold the
// prediction against.
func writeDecision(w io.Writer, profile, cpu, doc string, round int, took, dec time.Duration, d adaptive.Decision) {
	b := d.Estimates[d.Best]
	fmt.Fprintf(w, "%s/%s %s round %d: sent %s (%d B, %v", profile, cpu, doc, round, d.Sent.Spec, d.Sent.Size, fmtDur(took))
	if d.Sent.Encode > 0 || dec > 0 {
		fmt.Fprintf(w, ": enc %v dec %v", fmtDur(d.Sent.Encode), fmtDur(dec))
	}
	fmt.Fprintf(w, ") best-predicted %s %v [enc %v xfer %v dec %v] path %.3gMB/s rtt %v",
		b.Spec, fmtDur(b.Total), fmtDur(b.Encode), fmtDur(b.Transfer), fmtDur(b.Decode),
		d.Path.Bandwidth/1e6, d.Path.RTT.Round(time.Microsecond))
	if len(d.Trials) > 0 {
		fmt.Fprintf(w, " trial %v", d.Trials)
	}
	fmt.Fprint(w, " |")
	for _, e := range d.Estimates {
		k := ""
		if !e.Known {
			k = "?"
		}
		fmt.Fprintf(w, " %s%s=%s(%s+%s+%s)", e.Spec, k, fmtDur(e.Total), fmtDur(e.Encode), fmtDur(e.Transfer), fmtDur(e.Decode))
	}
	fmt.Fprintln(w)
}

// serveGridReceiver answers the sender until it says it is done: it
// decodes every data message with dec, timing it, checks the document and
// acknowledges it with the decode time.
func serveGridReceiver(ctx context.Context, p AMTTPipes, dec encoding.Scheme) error {
	hello, err := p.Comm.Receive(ctx)
	if err != nil {
		return err
	}
	if op, v := field(hello, elOp), field(hello, elVersion); op != opHello || v != amttVersion {
		return fmt.Errorf("%w: handshake %q version %q", ErrAMTTProtocol, op, v)
	}
	if err := p.Comm.Send(ctx, protoMsg(opReady)); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu  sync.Mutex
		doc GridDoc
	)
	dataErr := make(chan error, 1)
	go func() {
		defer cancel() // a failure here ends the wait on the comm pipe too
		dataErr <- func() error {
			for {
				m, err := p.Data.Receive(ctx)
				if err != nil {
					return err
				}
				t0 := time.Now()
				m, err = dec.Decode(m)
				d := time.Since(t0)
				if err != nil {
					return err
				}
				e, ok := m.Get(amttNS, elDoc)
				mu.Lock()
				want := doc
				mu.Unlock()
				if !ok || !message.SameMIME(e.MIME, want.MIME) || string(e.Data) != string(want.Data) {
					return fmt.Errorf("%w: %s: document differs from %s", ErrAMTTProtocol, field(m, elChoice), want.Name)
				}
				if err := p.Data.Send(ctx, protoMsg(opAck, elSeq, field(m, elSeq), elDecode, strconv.FormatInt(int64(d), 10))); err != nil {
					return err
				}
			}
		}()
	}()
	defer func() { cancel(); <-dataErr }()
	for {
		m, err := p.Comm.Receive(ctx)
		if err != nil {
			select {
			case derr := <-dataErr:
				dataErr <- derr
				if derr != nil && !errors.Is(derr, context.Canceled) {
					return derr
				}
			default:
			}
			return err
		}
		switch op := field(m, elOp); op {
		case opSet:
			d, err := LoadGridDoc(field(m, elDocName))
			if err != nil {
				return err
			}
			mu.Lock()
			doc = d
			mu.Unlock()
			if err := p.Comm.Send(ctx, protoMsg(opReady)); err != nil {
				return err
			}
		case opDone:
			return p.Comm.Send(ctx, protoMsg(opBye))
		default:
			return fmt.Errorf("%w: %q on the communication pipe", ErrAMTTProtocol, op)
		}
	}
}
