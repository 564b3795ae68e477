package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// newSwitchedPeer is NewAMTTPeer on a link that can change while the
// connection runs.
func newSwitchedPeer(ctx context.Context, sw *linkemu.Switch, seed uint64) (*AMTTPeer, error) {
	listen, _ := LoopbackAddr(TransportTCP)
	opts := []node.Option{node.WithEphemeralKey(), node.WithListenAddrs(listen), node.WithLibp2pOptions(libp2p.NoTransports,
		libp2p.Transport(linkemu.NewTCPTransport(sw.Link(), linkemu.WithSeed(seed), linkemu.WithSwitch(sw))))}
	p := &AMTTPeer{}
	var err error
	if p.Node, err = node.New(ctx, opts...); err != nil {
		return nil, err
	}
	if p.Endpoint, err = endpoint.New(p.Node); err == nil {
		p.Pipes, err = pipe.New(p.Endpoint, pipe.WithoutRouting())
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// DefaultSwitchDoc is the link-change run's document: on this project's
// machines a fast codec is best for it on a LAN and the XML codec on DSL,
// so auto must change its choice.
const DefaultSwitchDoc = "dataset-110"

// SwitchConfig describes the link-change run: auto sends one document
// over one connection whose link changes mid-way. Zero fields take the
// defaults.
type SwitchConfig struct {
	From, To string // link profiles; default lan, then dsl
	Doc      string // default DefaultSwitchDoc
	// Before and After are how many messages auto sends on each link;
	// default 20 and 30.
	Before, After int
	// Choices are the fixed choices measured on each link for reference
	// (after auto's messages on it); default DefaultGridChoices.
	Choices    []string
	RefTrials  int              // rounds of the reference; default DefaultGridTrials
	CPU        string           // receiver CPU; default CPUFast
	SlowFactor float64          // default DefaultSlowFactor
	Models     *adaptive.Models // the sender's; default new
	Seed       uint64
	Progress   io.Writer
	Trace      io.Writer
}

// SwitchStep is one message of auto's.
type SwitchStep struct {
	Index     int           `json:"index"` // 1-based; the switch comes before message Before+1
	Link      string        `json:"link"`
	Choice    string        `json:"choice"`
	SentBytes int           `json:"sent_bytes"`
	Time      time.Duration `json:"time_ns"` // send to acknowledgement
}

// SwitchResult is the link-change run.
type SwitchResult struct {
	From, To string
	Doc      string
	Steps    []SwitchStep
	// Reference is every fixed choice's AMTT on each link.
	Reference []GridResult
	// BestFrom and BestTo are the best fixed choices on each link.
	BestFrom, BestTo GridResult
	// Adapted is how many messages after the switch auto needed: the
	// 1-based index (counting from the switch) of the first message from
	// which the median of each message and its two neighbours is within
	// 5% (or 1 ms) of BestTo's AMTT; -1 if auto never settled.
	Adapted int
	// LateMisses counts later messages that, alone, are not.
	LateMisses int
	// ChoiceAdapted is the first message from which every choice sent
	// is one whose reference AMTT on the new link is
	// within 5% (or 1 ms) of the best's.
	ChoiceAdapted int
}

// Tolerances of the targets: within 5% or 1 ms of a reference.
const (
	TargetPct   = 5.0
	TargetFloor = time.Millisecond
)

// within reports whether got is within 5% or 1 ms of ref.
func within(got, ref time.Duration, pct float64) bool {
	return got <= ref+max(time.Duration(float64(ref)*pct/100), TargetFloor)
}

// withinPct reports whether got is at most pct percent over ref, with no
// floor: the targets against identity and gzip always have none.
func withinPct(got, ref time.Duration, pct float64) bool {
	return float64(got) <= float64(ref)*(1+pct/100)
}

// Check reports whether RunSwitch would refuse cfg's configuration (an
// error matching ErrGridConfig: an unknown link or document, a bad
// choice), without running anything: a caller that runs a grid before
// the link change can refuse a mistyped --switch-from before the grid's
// minutes or hours, not after them.
func (cfg SwitchConfig) Check() error {
	_, _, err := cfg.normalize()
	return err
}

// normalize fills in cfg's defaults and checks it, with the grid
// configuration of its reference measurements.
func (cfg SwitchConfig) normalize() (SwitchConfig, GridConfig, error) {
	if cfg.From == "" {
		cfg.From = "lan"
	}
	if cfg.To == "" {
		cfg.To = "dsl"
	}
	if cfg.Doc == "" {
		cfg.Doc = DefaultSwitchDoc
	}
	if cfg.Before == 0 {
		cfg.Before = 20
	}
	if cfg.After == 0 {
		cfg.After = 30
	}
	if cfg.RefTrials == 0 {
		cfg.RefTrials = DefaultGridTrials
	}
	if cfg.CPU == "" {
		cfg.CPU = CPUFast
	}
	profiles := []string{cfg.From}
	if cfg.To != cfg.From {
		profiles = append(profiles, cfg.To)
	}
	gc, err := GridConfig{Profiles: profiles, Docs: []string{cfg.Doc}, Choices: cfg.Choices,
		CPUs: []string{cfg.CPU}, SlowFactor: cfg.SlowFactor, Trials: cfg.RefTrials, Warmup: -1, Models: cfg.Models, Seed: cfg.Seed}.normalize()
	if err != nil {
		return cfg, gc, err
	}
	if cfg.Before < 1 || cfg.After < 1 {
		return cfg, gc, fmt.Errorf("%w: before %d, after %d", ErrGridConfig, cfg.Before, cfg.After)
	}
	return cfg, gc, nil
}

// RunSwitch runs the link-change experiment.
func RunSwitch(ctx context.Context, cfg SwitchConfig) (*SwitchResult, error) {
	cfg, gc, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	from, _ := linkemu.Lookup(cfg.From)
	to, _ := linkemu.Lookup(cfg.To)
	doc, _ := LoadGridDoc(cfg.Doc)
	sw, err := linkemu.NewSwitch(from.Link)
	if err != nil {
		return nil, err
	}
	g, err := openGridPair(ctx, linkemu.Link{}, sw, gc.Seed, gc.CPUs[0], gc.SlowFactor, gc.Choices, gc.Models, adaptive.NewModels())
	if err != nil {
		return nil, err
	}
	defer g.Close()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serveGridReceiver(rctx, g.rp, g.rdec) }()
	res, err := runSwitchSender(ctx, cfg, gc, sw, from, to, doc, g)
	cancel()
	if serr := <-served; err == nil && serr != nil && !errors.Is(serr, context.Canceled) {
		err = serr
	}
	return res, err
}

func runSwitchSender(ctx context.Context, cfg SwitchConfig, gc GridConfig, sw *linkemu.Switch, from, to linkemu.Profile, doc GridDoc, g *gridPair) (*SwitchResult, error) {
	if err := g.mon.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("probing the path: %w", err)
	}
	var mu sync.Mutex
	var last adaptive.Decision
	choices, scheme, err := newChoices(gc, g, func(d adaptive.Decision) { mu.Lock(); last = d; mu.Unlock() })
	if err != nil {
		return nil, err
	}
	defer scheme.Wait()
	auto := choices[len(choices)-1]
	fixed := choices[:len(choices)-1]
	if err := g.sp.Comm.Send(ctx, protoMsg(opHello, elVersion, amttVersion)); err != nil {
		return nil, err
	}
	if _, err := expect(ctx, g.sp.Comm, opReady, ""); err != nil {
		return nil, err
	}
	if err := g.sp.Comm.Send(ctx, protoMsg(opSet, elDocName, doc.Name)); err != nil {
		return nil, err
	}
	if _, err := expect(ctx, g.sp.Comm, opReady, ""); err != nil {
		return nil, err
	}
	g.mon.FetchProfile(ctx)
	seq := 0
	send := func(c *gridChoice, link linkemu.Link) (time.Duration, error) {
		seq++
		s := strconv.Itoa(seq)
		m := message.New(encoding.Producer{}.NewElement(amttNS, elDoc, doc.MIME, doc.Data),
			message.Text(amttNS, elOp, opEnc), message.Text(amttNS, elSeq, s), message.Text(amttNS, elChoice, c.name))
		tctx, cancel := context.WithTimeout(ctx, max(time.Minute, 20*link.Up.TransferTime(len(doc.Data))))
		defer cancel()
		start := time.Now()
		err := c.out.Send(tctx, m)
		if err == nil {
			_, err = expect(tctx, c.out, opAck, s)
		}
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", c.name, err)
		}
		return d, nil
	}
	res := &SwitchResult{From: from.Name, To: to.Name, Doc: doc.Name}
	reference := func(p linkemu.Profile) (GridResult, error) {
		times := make([][]time.Duration, len(fixed))
		order := newRoundOrder(gc.Seed, doc.Name+"@"+p.Name, len(fixed))
		for range gc.Trials {
			for _, i := range order.next() {
				d, err := send(fixed[i], p.Link)
				if err != nil {
					return GridResult{}, err
				}
				times[i] = append(times[i], d)
			}
		}
		var best GridResult
		for i, c := range fixed {
			r := GridResult{Profile: p.Name, CPU: gc.CPUs[0], Doc: doc.Name, Bytes: len(doc.Data), Choice: c.name, Trials: len(times[i]), AMTT: gridMean(times[i])}
			r.describe(p.Link, gc)
			res.Reference = append(res.Reference, r)
			if best.Choice == "" || r.AMTT < best.AMTT {
				best = r
			}
		}
		return best, nil
	}
	run := func(p linkemu.Profile, n int) error {
		for range n {
			d, err := send(auto, p.Link)
			if err != nil {
				return err
			}
			mu.Lock()
			dd := last
			mu.Unlock()
			st := SwitchStep{Index: len(res.Steps) + 1, Link: p.Name, Choice: dd.Sent.Spec, SentBytes: dd.Sent.Size, Time: d}
			res.Steps = append(res.Steps, st)
			if cfg.Trace != nil {
				writeDecision(cfg.Trace, p.Name, gc.CPUs[0], doc.Name, st.Index, d, 0, dd)
			}
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "lab grid switch: message %d on %s: %s, %d B, %v\n", st.Index, p.Name, st.Choice, st.SentBytes, fmtDur(d))
			}
		}
		return nil
	}
	if err := run(from, cfg.Before); err != nil {
		return res, err
	}
	if err := sw.Set(to.Link); err != nil {
		return res, err
	}
	if err := run(to, cfg.After); err != nil {
		return res, err
	}
	if res.BestTo, err = reference(to); err != nil {
		return res, err
	}
	if err := sw.Set(from.Link); err != nil {
		return res, err
	}
	if res.BestFrom, err = reference(from); err != nil {
		return res, err
	}
	res.Adapted, res.LateMisses = adaptation(res.Steps[cfg.Before:], res.BestTo.AMTT)
	res.ChoiceAdapted = choiceAdaptation(res.Steps[cfg.Before:], res.Reference, to.Name, res.BestTo.AMTT)
	return res, nil
}

// adaptation returns the 1-based index of the first step from which auto
// stays within the target of best: the median of every later message and
// its two neighbours is (one delayed message on a busy machine is not a
// wrong choice); -1 if it never does. It also returns how many later
// messages, taken alone, are not within it.
func adaptation(steps []SwitchStep, best time.Duration) (int, int) {
	med := func(i int) time.Duration { // of i and its neighbours; the larger of two at the ends
		w := []time.Duration{}
		for j := max(i-1, 0); j < min(i+2, len(steps)); j++ {
			w = append(w, steps[j].Time)
		}
		slices.Sort(w)
		return w[len(w)/2]
	}
	at := -1
	for i := len(steps) - 1; i >= 0; i-- {
		if !within(med(i), best, TargetPct) {
			break
		}
		at = i + 1
	}
	misses := 0
	if at > 0 {
		for _, s := range steps[at-1:] {
			if !within(s.Time, best, TargetPct) {
				misses++
			}
		}
	}
	return at, misses
}

// choiceAdaptation returns the 1-based index of the first step from which
// every choice auto sent is one whose reference AMTT
// is within the target of the best; -1 if none.
func choiceAdaptation(steps []SwitchStep, ref []GridResult, link string, best time.Duration) int {
	good := map[string]bool{}
	for _, r := range ref {
		if r.Profile == link && within(r.AMTT, best, TargetPct) {
			good[r.Choice] = true
		}
	}
	at := -1
	for i := len(steps) - 1; i >= 0; i-- {
		if !good[steps[i].Choice] {
			break
		}
		at = i + 1
	}
	return at
}
