package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// The AMTT experiment reproduces the Compression Pipe Adapter study
// (papers/000, "Testing"): a sender and a receiver joined by two
// bidirectional pipes, the communication pipe that carries the handshake
// and the control messages, and the pipe an encoding adapter is fitted on.
// Each trial sends the control message (its XML element not encoded) on
// the communication pipe, then the same message through the adapter of
// each codec in turn; the receiver acknowledges each message once it has
// it, decoded, and the sender times send-to-acknowledgement
// (bidirectional benchmarking: one clock, no synchronisation). A trial
// set is the trials of one document; its first Warmup trials are
// discarded, then the highest and the lowest of each series, and the
// average of the rest is the AMTT (average message transit time).
//
// One control message per trial serves every codec of the run: a codec's
// row compares it with the control sent just before it in the same trial
// (the paper ran one test per codec, each with its own control). The
// codecs' order rotates from trial to trial.

// CodecNone is the codec spec of the control only: its AMTT is the
// control's.
const CodecNone = "none"

// DefaultAMTTCodecs are the codecs of `p2pmsg lab amtt` by default.
var DefaultAMTTCodecs = []string{CodecNone, "gzip", "zstd"}

// Defaults of AMTTConfig.
const (
	DefaultAMTTTrials = 5
	DefaultAMTTWarmup = 1
	// MinAMTTTrials leaves one trial once the highest and the lowest are
	// dropped.
	MinAMTTTrials = 3
)

// Errors of the AMTT experiment.
var (
	ErrAMTTConfig   = errors.New("lab: invalid AMTT configuration")
	ErrAMTTProtocol = errors.New("lab: AMTT protocol violation")
)

// AMTTConfig describes an AMTT experiment. Zero fields take the defaults.
type AMTTConfig struct {
	// Profile names the link in the results.
	Profile string
	// Link is the sender's access link: Up shapes what the sender sends,
	// Down what it receives. The receiver's side is not shaped (in the
	// paper it sat on a campus network).
	Link linkemu.Link
	// Codecs are codec specs ("gzip", "gzip:9", "zstd:19", "xml@employees":
	// encoding.ParseSpec, codecbench's models by name, no seal) or
	// CodecNone; default DefaultAMTTCodecs.
	Codecs []string
	// Records are the employee record counts of the documents, one trial
	// set each; default datasets.EmployeeCounts (the paper's seven).
	Records []int
	// Trials per set that count; default DefaultAMTTTrials, at least
	// MinAMTTTrials.
	Trials int
	// Warmup trials discarded at the start of each set; 0 means
	// DefaultAMTTWarmup, negative none.
	Warmup int
	// Seed seeds the link's jitter (default 1), so a run can be repeated.
	Seed uint64
	// Progress, when set, receives progress lines: profile, codecs,
	// document, trials done and an estimate of the time left.
	Progress io.Writer
}

// Validate reports a configuration RunAMTT would refuse; the error wraps
// ErrAMTTConfig.
func (c AMTTConfig) Validate() error {
	_, err := c.normalize()
	return err
}

func (c AMTTConfig) normalize() (AMTTConfig, error) {
	if len(c.Codecs) == 0 {
		c.Codecs = DefaultAMTTCodecs
	}
	seen := map[string]bool{}
	for _, s := range c.Codecs {
		if seen[s] {
			return c, fmt.Errorf("%w: codec %q given twice", ErrAMTTConfig, s)
		}
		seen[s] = true
		if s == CodecNone {
			continue
		}
		if _, err := newCodec(s); err != nil {
			return c, fmt.Errorf("%w: %w", ErrAMTTConfig, err)
		}
	}
	if len(c.Records) == 0 {
		c.Records = datasets.EmployeeCounts
	}
	// A document measured twice would be two results of one row: the
	// reports key their rows by record count and would show only one.
	seenRecords := map[int]bool{}
	for _, n := range c.Records {
		if n < 1 || n > datasets.MaxEmployees {
			return c, fmt.Errorf("%w: %d employee records out of range [1, %d]", ErrAMTTConfig, n, datasets.MaxEmployees)
		}
		if seenRecords[n] {
			return c, fmt.Errorf("%w: %d employee records given twice", ErrAMTTConfig, n)
		}
		seenRecords[n] = true
	}
	switch {
	case c.Trials == 0:
		c.Trials = DefaultAMTTTrials
	case c.Trials < MinAMTTTrials:
		return c, fmt.Errorf("%w: %d trials, need at least %d (the highest and the lowest are dropped)", ErrAMTTConfig, c.Trials, MinAMTTTrials)
	}
	switch {
	case c.Warmup == 0:
		c.Warmup = DefaultAMTTWarmup
	case c.Warmup < 0:
		c.Warmup = 0
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if err := c.Link.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrAMTTConfig, err)
	}
	if c.Profile == "" {
		c.Profile = "custom"
	}
	return c, nil
}

// AMTTResult is one row of the paper's Tables 5–7: one codec on one
// document. Its JSON form is the line `p2pmsg lab amtt --json` prints.
type AMTTResult struct {
	Profile string `json:"profile"`
	Codec   string `json:"codec"`
	Records int    `json:"records"`
	Bytes   int    `json:"bytes"` // the XML document's size
	// Trials is how many trials were measured (warm-up excluded); the
	// averages leave out the highest and the lowest.
	Trials      int           `json:"trials"`
	ControlAMTT time.Duration `json:"control_amtt_ns"`
	AMTT        time.Duration `json:"amtt_ns"`
	// DecreasePct is 100·(control − AMTT)/control: negative when the
	// codec made the transfer slower.
	DecreasePct float64 `json:"decrease_pct"`
	// Link is the sender's access link the run emulated (up: what the
	// sender sends), Warmup the trials discarded before those averaged,
	// Seed the seed of the link's jitter: with the rest, what a run is
	// repeated with, as a profile's name alone does not say once its
	// link is changed or custom.
	Link   linkemu.Link `json:"link"`
	Warmup int          `json:"warmup"`
	Seed   uint64       `json:"seed"`
	// EncodedBytes is the size of the document's element as it crossed
	// the link in this row's message, the codec's header included (the
	// paper's Table 2): Bytes for the control. ControlSpread and Spread
	// are how the control's and the codec's Trials measured trials
	// spread (all of them: the highest and the lowest too), the figures
	// that tell whether a difference between two AMTTs is noise. All
	// three are absent from results written before they were recorded.
	EncodedBytes  int         `json:"encoded_bytes,omitempty"`
	ControlSpread *AMTTSpread `json:"control_spread,omitempty"`
	Spread        *AMTTSpread `json:"spread,omitempty"`
}

// AMTTSpread describes one series of measured trials: its median, its
// sample standard deviation (0 for a single trial), and its lowest and
// highest.
type AMTTSpread struct {
	Median time.Duration `json:"median_ns"`
	StdDev time.Duration `json:"stddev_ns"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
}

// spreadOf describes d (nil when d is empty).
func spreadOf(d []time.Duration) *AMTTSpread {
	if len(d) == 0 {
		return nil
	}
	s := slices.Clone(d)
	slices.Sort(s)
	sp := &AMTTSpread{Min: s[0], Max: s[len(s)-1], Median: s[len(s)/2]}
	if len(s)%2 == 0 {
		sp.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) > 1 {
		var mean float64
		for _, v := range s {
			mean += float64(v)
		}
		mean /= float64(len(s))
		var ss float64
		for _, v := range s {
			ss += (float64(v) - mean) * (float64(v) - mean)
		}
		sp.StdDev = time.Duration(math.Round(math.Sqrt(ss / float64(len(s)-1))))
	}
	return sp
}

// AMTTPipes are one side's ends of the experiment's two bidirectional
// pipes. Comm is the communication pipe (handshake, control messages and
// their acknowledgements); Data is the raw pipe the encoding adapter is
// fitted on: the engine wraps it itself. They are the engine's transport
// seam: bidirectional pipes (pkg/pipe) in RunAMTT and the Testground plan,
// anything that sends and receives messages in order in tests.
type AMTTPipes struct {
	Comm encoding.SendReceiver
	Data encoding.SendReceiver
}

// Protocol elements, all in namespace amttNS.
const (
	amttNS      = "amtt"
	amttVersion = "1"

	elOp      = "op"
	elVersion = "version"
	elCodecs  = "codecs"
	elRecords = "records"
	elSeq     = "seq"
	elDoc     = "doc"
	elError   = "error"

	opHello = "hello"
	opReady = "ready"
	opSet   = "set"
	opCtl   = "ctl"
	opEnc   = "enc"
	opAck   = "ack"
	opDone  = "done"
	opBye   = "bye"
	opError = "error"
)

func protoMsg(op string, kv ...string) *message.Message {
	m := message.New(message.Text(amttNS, elOp, op))
	for i := 0; i+1 < len(kv); i += 2 {
		m.Add(message.Text(amttNS, kv[i], kv[i+1]))
	}
	return m
}

func field(m *message.Message, name string) string {
	e, ok := m.Get(amttNS, name)
	if !ok {
		return ""
	}
	return string(e.Data)
}

// expect receives one message on r and checks it is op (and, when seq is
// not empty, that it carries seq).
func expect(ctx context.Context, r encoding.Receiver, op, seq string) (*message.Message, error) {
	m, err := r.Receive(ctx)
	if err != nil {
		return nil, err
	}
	got := field(m, elOp)
	if got == opError {
		return nil, fmt.Errorf("%w: the other side failed: %s", ErrAMTTProtocol, field(m, elError))
	}
	if got != op {
		return nil, fmt.Errorf("%w: got %q, want %q", ErrAMTTProtocol, got, op)
	}
	if seq != "" && field(m, elSeq) != seq {
		return nil, fmt.Errorf("%w: %s for trial %s, want %s", ErrAMTTProtocol, op, field(m, elSeq), seq)
	}
	return m, nil
}

// codecAdapter is one codec's adapter on the sender's data pipe.
type codecAdapter struct {
	spec  string
	bidi  *encoding.Bidi
	sizes map[int]int // encoded element size by record count
}

// RunAMTTSender runs the sender's side of the protocol over pipes already
// connected to a receiver running ServeAMTTReceiver, and returns a result
// per codec and document, in the order of cfg.Codecs then cfg.Records.
func RunAMTTSender(ctx context.Context, cfg AMTTConfig, p AMTTPipes) ([]AMTTResult, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	docs := make(map[int][]byte, len(cfg.Records))
	for _, n := range cfg.Records {
		docs[n] = datasets.Employees(n)
	}
	var adapters []*codecAdapter
	for _, spec := range cfg.Codecs {
		if spec == CodecNone {
			continue
		}
		c, _ := newCodec(spec) // checked by normalize
		scheme, err := encoding.New([]encoding.Codec{c})
		if err != nil {
			return nil, err
		}
		b, err := encoding.NewBidi(p.Data, scheme)
		if err != nil {
			return nil, err
		}
		a := &codecAdapter{spec: spec, bidi: b, sizes: map[int]int{}}
		for n, doc := range docs {
			e, err := scheme.EncodeElement(encoding.Producer{}.XML(amttNS, elDoc, doc))
			if err != nil {
				return nil, fmt.Errorf("lab: %s on %d records: %w", spec, n, err)
			}
			a.sizes[n] = len(e.Data)
		}
		adapters = append(adapters, a)
	}

	if err := p.Comm.Send(ctx, protoMsg(opHello, elVersion, amttVersion, elCodecs, strings.Join(cfg.Codecs, ","))); err != nil {
		return nil, fmt.Errorf("lab: amtt handshake: %w", err)
	}
	if _, err := expect(ctx, p.Comm, opReady, ""); err != nil {
		return nil, fmt.Errorf("lab: amtt handshake: %w", err)
	}

	est := newEstimator(cfg, docs, adapters)
	var results []AMTTResult
	perCodec := make(map[string][]AMTTResult)
	for _, n := range cfg.Records {
		doc := docs[n]
		rs := strconv.Itoa(n)
		if err := p.Comm.Send(ctx, protoMsg(opSet, elRecords, rs)); err != nil {
			return nil, err
		}
		if _, err := expect(ctx, p.Comm, opReady, ""); err != nil {
			return nil, err
		}
		ctl := make([]time.Duration, 0, cfg.Trials)
		enc := make([][]time.Duration, len(adapters))
		total := cfg.Warmup + cfg.Trials
		for t := range total {
			seq := strconv.Itoa(t)
			tctx, cancel := context.WithTimeout(ctx, est.trialTimeout(n))
			start := time.Now()
			d, err := timeMessage(tctx, p.Comm, p.Comm, message.New(
				message.Element{Namespace: amttNS, Name: elDoc, MIME: message.XMLUTF8, Data: doc},
				message.Text(amttNS, elOp, opCtl), message.Text(amttNS, elSeq, seq)), seq)
			if err != nil {
				cancel()
				return nil, fmt.Errorf("lab: amtt %d records, trial %d, control: %w", n, t, err)
			}
			if t >= cfg.Warmup {
				ctl = append(ctl, d)
			}
			for k := range adapters {
				i := (k + t) % len(adapters) // rotate the codecs' order
				a := adapters[i]
				// The same elements as the control message: only the
				// encoding differs on the wire.
				m := message.New(a.bidi.Producer().XML(amttNS, elDoc, doc),
					message.Text(amttNS, elOp, opEnc), message.Text(amttNS, elSeq, seq))
				d, err := timeMessage(tctx, a.bidi, a.bidi, m, seq)
				if err != nil {
					cancel()
					return nil, fmt.Errorf("lab: amtt %d records, trial %d, %s: %w", n, t, a.spec, err)
				}
				if t >= cfg.Warmup {
					enc[i] = append(enc[i], d)
				}
			}
			cancel()
			est.done(n, time.Since(start))
			est.report(n, t+1, total)
		}
		control := trimmedMean(ctl)
		for _, spec := range cfg.Codecs {
			r := AMTTResult{Profile: cfg.Profile, Codec: spec, Records: n, Bytes: len(doc), Trials: cfg.Trials, ControlAMTT: control, AMTT: control,
				Link: cfg.Link, Warmup: cfg.Warmup, Seed: cfg.Seed,
				EncodedBytes: len(doc), ControlSpread: spreadOf(ctl), Spread: spreadOf(ctl)}
			if spec != CodecNone {
				i := slices.IndexFunc(adapters, func(a *codecAdapter) bool { return a.spec == spec })
				r.AMTT = trimmedMean(enc[i])
				r.EncodedBytes = adapters[i].sizes[n]
				r.Spread = spreadOf(enc[i])
			}
			r.DecreasePct = Decrease(r.ControlAMTT, r.AMTT)
			perCodec[spec] = append(perCodec[spec], r)
		}
	}
	if err := p.Comm.Send(ctx, protoMsg(opDone)); err != nil {
		return nil, err
	}
	if _, err := expect(ctx, p.Comm, opBye, ""); err != nil {
		return nil, err
	}
	for _, spec := range cfg.Codecs {
		results = append(results, perCodec[spec]...)
	}
	return results, nil
}

// timeMessage sends m on s and waits for its acknowledgement on r.
func timeMessage(ctx context.Context, s encoding.Sender, r encoding.Receiver, m *message.Message, seq string) (time.Duration, error) {
	start := time.Now()
	if err := s.Send(ctx, m); err != nil {
		return 0, err
	}
	if _, err := expect(ctx, r, opAck, seq); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// Decrease is the paper's "% decrease": 100·(control − amtt)/control.
func Decrease(control, amtt time.Duration) float64 {
	if control <= 0 {
		return 0
	}
	return 100 * float64(control-amtt) / float64(control)
}

// trimmedMean drops the highest and the lowest value (when there are at
// least MinAMTTTrials) and averages the rest.
func trimmedMean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) >= MinAMTTTrials {
		s = s[1 : len(s)-1]
	}
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return sum / time.Duration(len(s))
}

// ServeAMTTReceiver runs the receiver's side until the sender says it is
// done (nil), ctx ends, or a pipe fails. It decodes every message of the
// data pipe through an input adapter and checks it against the document
// before acknowledging it.
func ServeAMTTReceiver(ctx context.Context, p AMTTPipes) error {
	hello, err := p.Comm.Receive(ctx)
	if err != nil {
		return fmt.Errorf("lab: amtt handshake: %w", err)
	}
	if op, v := field(hello, elOp), field(hello, elVersion); op != opHello || v != amttVersion {
		p.Comm.Send(ctx, protoMsg(opError, elError, "expected hello version "+amttVersion))
		return fmt.Errorf("%w: handshake %q version %q", ErrAMTTProtocol, op, v)
	}
	dec, err := newSpecDecoder(strings.Split(field(hello, elCodecs), ","))
	if err != nil {
		p.Comm.Send(ctx, protoMsg(opError, elError, err.Error()))
		return fmt.Errorf("lab: amtt: %w", err)
	}
	data, err := encoding.NewBidi(p.Data, dec)
	if err != nil {
		return err
	}
	if err := p.Comm.Send(ctx, protoMsg(opReady)); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu  sync.Mutex
		doc []byte
	)
	current := func() []byte { mu.Lock(); defer mu.Unlock(); return doc }
	check := func(m *message.Message) error {
		e, ok := m.Get(amttNS, elDoc)
		want := current()
		switch {
		case !ok:
			return fmt.Errorf("%w: message without a document", ErrAMTTProtocol)
		case !message.SameMIME(e.MIME, message.XMLUTF8):
			return fmt.Errorf("%w: document arrived as %s", ErrAMTTProtocol, e.MIME)
		case !bytes.Equal(e.Data, want):
			return fmt.Errorf("%w: document of %d bytes differs from the %d-byte original", ErrAMTTProtocol, len(e.Data), len(want))
		}
		return nil
	}
	dataErr := make(chan error, 1)
	go func() {
		dataErr <- func() error {
			for {
				m, err := data.Receive(ctx) // decoded by the input adapter
				if err != nil {
					return err
				}
				if field(m, elOp) != opEnc {
					return fmt.Errorf("%w: %q on the data pipe", ErrAMTTProtocol, field(m, elOp))
				}
				if err := check(m); err != nil {
					return err
				}
				if err := data.Send(ctx, protoMsg(opAck, elSeq, field(m, elSeq))); err != nil {
					return err
				}
			}
		}()
	}()
	stop := func(err error) error {
		cancel()
		if derr := <-dataErr; err == nil && derr != nil && !errors.Is(derr, context.Canceled) {
			err = derr
		}
		if err != nil {
			// Tell the sender on both pipes: it may be waiting on either.
			ectx, ecancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ecancel()
			p.Comm.Send(ectx, protoMsg(opError, elError, err.Error()))
			data.Send(ectx, protoMsg(opError, elError, err.Error()))
			return fmt.Errorf("lab: amtt receiver: %w", err)
		}
		return nil
	}
	comm := make(chan *message.Message)
	commErr := make(chan error, 1)
	go func() {
		for {
			m, err := p.Comm.Receive(ctx)
			if err != nil {
				commErr <- err
				return
			}
			select {
			case comm <- m:
			case <-ctx.Done():
				commErr <- ctx.Err()
				return
			}
		}
	}()
	defer func() { cancel(); <-commErr }()
	for {
		var m *message.Message
		select {
		case m = <-comm:
		case err := <-commErr:
			commErr <- err // for the deferred wait
			return stop(err)
		case err := <-dataErr:
			dataErr <- err
			return stop(err)
		}
		switch op := field(m, elOp); op {
		case opSet:
			n, aerr := strconv.Atoi(field(m, elRecords))
			if aerr != nil || n < 1 || n > datasets.MaxEmployees {
				return stop(fmt.Errorf("%w: set of %q records", ErrAMTTProtocol, field(m, elRecords)))
			}
			mu.Lock()
			doc = datasets.Employees(n)
			mu.Unlock()
			err = p.Comm.Send(ctx, protoMsg(opReady))
		case opCtl:
			if err = check(m); err == nil {
				err = p.Comm.Send(ctx, protoMsg(opAck, elSeq, field(m, elSeq)))
			}
		case opDone:
			err := p.Comm.Send(ctx, protoMsg(opBye))
			return stop(err)
		default:
			err = fmt.Errorf("%w: %q on the communication pipe", ErrAMTTProtocol, op)
		}
		if err != nil {
			return stop(err)
		}
	}
}

// specDecoder is the receiver's scheme: it decodes with the codecs the
// sender announced (so trained codecs, xml and zstd with codecbench's
// models, decode too), choosing among those that share a name (zstd:3 and
// zstd@employees) by the dictionary the element's header records.
type specDecoder struct {
	byKey map[codecKey]*encoding.Decoder
}

var _ encoding.Scheme = (*specDecoder)(nil)

type codecKey struct {
	name string
	dict uint32
}

func newSpecDecoder(specs []string) (*specDecoder, error) {
	d := &specDecoder{byKey: map[codecKey]*encoding.Decoder{}}
	for _, spec := range specs {
		if spec == CodecNone || spec == "" {
			continue
		}
		c, err := newCodec(spec)
		if err != nil {
			return nil, err
		}
		k := codecKey{c.Name(), c.Params().DictID}
		if d.byKey[k] != nil {
			continue // same codec, another level: decodes the same
		}
		reg, err := encoding.NewRegistry(c)
		if err != nil {
			return nil, err
		}
		if d.byKey[k], err = encoding.NewDecoder(encoding.WithRegistry(reg)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Encode returns m unchanged: the receiver only acknowledges.
func (d *specDecoder) Encode(m *message.Message) (*message.Message, error) { return m, nil }

// Decode decodes m with the decoder its first encoded element names.
func (d *specDecoder) Decode(m *message.Message) (*message.Message, error) {
	for _, e := range m.All() {
		if !encoding.IsEncoded(e) {
			continue
		}
		h, _, err := encoding.ParseHeader(e.Data)
		if err != nil {
			return nil, err
		}
		dec := d.byKey[codecKey{h.Codec, h.Params.DictID}]
		if dec == nil {
			return nil, fmt.Errorf("%w: %q (dictionary %d) was not announced", encoding.ErrUnknownCodec, h.Codec, h.Params.DictID)
		}
		return dec.Decode(m)
	}
	return m, nil
}

// estimator predicts the time left from a model of each trial's cost on
// the link, scaled by how long the trials so far really took.
type estimator struct {
	cfg              AMTTConfig
	cost             map[int]time.Duration // modelled cost of one trial, by record count
	left             time.Duration         // modelled cost of the trials not yet run
	doneModel, spent time.Duration
	lastReport       time.Time
	codecs           string
}

// msgCost models one message and its acknowledgement: propagation both
// ways, serialization, and a little per-byte processing.
func (c AMTTConfig) msgCost(n int) time.Duration {
	const overhead = 128 // pipe, endpoint, TLS and yamux bytes around it
	return c.Link.RTT() + c.Link.Up.SerializationTime(n+overhead) + c.Link.Down.SerializationTime(2*overhead) +
		200*time.Microsecond + time.Duration(n)*10 // 100 MB/s of encoding and copying
}

func newEstimator(cfg AMTTConfig, docs map[int][]byte, adapters []*codecAdapter) *estimator {
	e := &estimator{cfg: cfg, cost: map[int]time.Duration{}, lastReport: time.Now(), codecs: strings.Join(cfg.Codecs, ",")}
	for _, n := range cfg.Records {
		c := cfg.msgCost(len(docs[n]))
		for _, a := range adapters {
			c += cfg.msgCost(a.sizes[n])
		}
		e.cost[n] = c
		e.left += c * time.Duration(cfg.Warmup+cfg.Trials)
	}
	return e
}

func (e *estimator) done(n int, took time.Duration) {
	e.left -= e.cost[n]
	e.doneModel += e.cost[n]
	e.spent += took
}

// trialTimeout bounds one trial: generous, so only a stuck pipe hits it.
func (e *estimator) trialTimeout(n int) time.Duration {
	return max(time.Minute, 50*e.cost[n])
}

func (e *estimator) remaining() time.Duration {
	ratio := 1.0
	if e.doneModel > 0 {
		ratio = float64(e.spent) / float64(e.doneModel)
	}
	return time.Duration(math.Max(0, float64(e.left)*ratio))
}

func (e *estimator) report(n, done, total int) {
	if e.cfg.Progress == nil {
		return
	}
	if done < total && time.Since(e.lastReport) < time.Second {
		return
	}
	e.lastReport = time.Now()
	fmt.Fprintf(e.cfg.Progress, "lab amtt: %s · %s · %s · trial %d/%d · %s left\n",
		e.cfg.Profile, e.codecs, english.Count(n, "record", "records"), done, total, e.remaining().Round(time.Second))
}
