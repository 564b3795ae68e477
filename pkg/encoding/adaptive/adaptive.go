// Package adaptive is the encoding layer's adaptive scheme: for each
// selected element it chooses whether to encode it and with which codec
// and level, so that the receiver holds the decoded element as early as
// possible. It is NAM's decision (Ghandeharizadeh et al.: compress when
// compression time + transfer of the smaller message + decompression time
// beats sending as is) made per element, among many codecs, from models
// learned online rather than fitted offline.
//
// It sits in the encoding layer beside the fixed schemes: a *Scheme is an
// encoding.Scheme, so the pipe adapters (encoding.NewOutput, NewInput,
// NewBidi) take it like any other, and receivers decode its elements with
// any scheme's Decode, since encoded elements describe themselves. It
// builds on pkg/encoding and klauspost/compress's compressibility
// estimate, imports no codec (the candidates are given) and knows no
// network: what it knows of the path and of the receiver enters through
// two small interfaces, PathSource and ProfileSource, which package
// pathinfo implements over a libp2p node.
//
// # The decision
//
// For an element of n bytes of kind k (its media type and a
// compressibility class from a 2 KiB sample) and each candidate c, with
// identity (sending the element as it is) always among them:
//
//	T(c) = encode_c(k, n) + path.TransferTime(rest + size_c(k, n)) + decode_receiver,c(n)
//
// where rest is the rest of the message. The scheme sends the candidate
// with the least T; if an encoding comes out no smaller than the element,
// the element goes as it is.
//
// # What it learns
//
// Models (shared by the schemes of a node, saved in its data directory)
// hold, per codec and level: the payload size per kind and the encode time
// per class, each as a function of size (piecewise linear through the
// centroids of power-of-two size buckets, EWMA within a bucket, timing
// outliers clipped); and the node's own decode times per codec, which it
// shares with its senders as a Profile. Every encode it performs teaches
// it; a receiver's decoder given Models.TimeDecodes, and a Scheme's
// Decode, time every decode. A codec not yet measured at some size is
// predicted through another codec that was, scaled by their relative
// ratio where both were measured.
//
// # Exploration
//
// Estimates only improve for what is tried. A shadow trial encodes the
// real element with a candidate without sending the result, which teaches
// the candidate's size and encode time on this content at this size; it
// runs in the background, off the path of the message (Wait waits for
// it), one batch at a time. Each
// candidate that might win (optimistically, at half its predicted size)
// is trialled once per kind of content and size bucket, if its encode
// costs no more than the best choice's predicted total; beyond that the
// scheme keeps a token bucket filled with a share (1% by default) of each
// element's predicted time, and spends it on trials of candidates whose
// estimates are unmeasured or stale, or predicted within 10% of the best:
// there the estimates' error decides, and what was learnt of a kind and
// size may not hold for this content (a trial's size far from its
// estimate has the decision made again, and weighs half in its bucket).
// Trials go first to the candidates whose estimates are the least sure:
// unmeasured ones, and those whose bucket's documents compressed far
// apart. Rarely (2% of the decisions it
// makes or reprices, not reuses) it also sends a candidate predicted
// within 10% of the best, so that real transfers and decodes
// check the models. All of it is bounded in cost by construction.
package adaptive

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Identity is the spec of the choice to send an element as it is.
const Identity = "identity"

// DefaultSpecs are the candidates a node offers the scheme when nothing
// says otherwise (`p2pmsg send --encode auto`): the fastest codec, zstd
// from fast to strongest, gzip at its default, and the XML codec. Build
// them with encoding.NewCodec.
var DefaultSpecs = []encoding.Spec{
	{Name: "s2", Level: 1}, {Name: "zstd", Level: 1}, {Name: "zstd", Level: 3},
	{Name: "zstd", Level: 19}, {Name: "gzip", Level: 6}, {Name: "xml", Level: 3},
}

// Clock tells the time; the scheme measures encodes and decodes with it.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// PathSource says what is known of the path to the receiver now.
type PathSource interface{ Path() Path }

// Calibration is what a PathSource may also know from the exchanges it
// saw (package pathinfo's Monitor does): by how much exchanges whose
// element went encoded with spec, in messages of about size bytes,
// outlasted their predicted times, beyond what exchanges of messages of
// about raw bytes sent as is outlasted theirs. ok is false when it has
// not seen enough of both. The scheme adds it to the codec's predicted
// time, so that the difference it predicts between the codec and sending
// as is is the one seen: the model misses what a codec costs around its
// own encode and decode (the decoder's work on the element, garbage),
// and on loopback the rate is not one rate.
type Calibration interface {
	Excess(spec string, size, raw int) (d time.Duration, ok bool)
}

// PathFunc adapts a function to PathSource.
type PathFunc func() Path

// Path calls f.
func (f PathFunc) Path() Path { return f() }

// StaticPath is a PathSource for a path that does not change.
func StaticPath(p Path) PathSource { return PathFunc(func() Path { return p }) }

// ProfileSource gives the receiver's decode profile, or nil if unknown.
type ProfileSource interface{ ReceiverProfile() *Profile }

// ProfileFunc adapts a function to ProfileSource.
type ProfileFunc func() *Profile

// ReceiverProfile calls f.
func (f ProfileFunc) ReceiverProfile() *Profile { return f() }

type candidate struct {
	spec   string
	name   string
	params encoding.Params
	enc    *encoding.Codecs
}

// Scheme chooses per element among identity and its candidate codecs.
// It is safe for concurrent use.
type Scheme struct {
	// fast is the last decision reused to send an element as it is
	// (asIs). With config's first fields it is what a fast path reads of
	// the scheme, on one cache line.
	fast atomic.Pointer[fastPath]
	config
	cands []candidate // cands[0] is identity
	specs []string    // the codecs' specs, for relative estimates
	dec   *encoding.Decoder

	mu     sync.Mutex
	rng    *rand.Rand
	tokens time.Duration
	cache  map[cacheKey]*cacheEntry
	// shadowing is set while a batch of shadow trials runs.
	shadowing bool
	wg        sync.WaitGroup
}

var _ encoding.Scheme = (*Scheme)(nil)

// specOf names a codec as the models know it: encoding.SpecOf's spec,
// "name:level", with "@dictID" when it compresses with a dictionary.
func specOf(c encoding.Codec) string { return encoding.SpecOf(c.Name(), c.Params()).String() }

// New returns an adaptive scheme choosing among sending each selected
// element as it is and encoding it with one of codecs. Codecs the models
// know nothing of are measured first on a built-in sample (a few tens of
// milliseconds; see WithoutCalibration).
func New(codecs []encoding.Codec, opts ...Option) (*Scheme, error) {
	cfg := config{clock: systemClock{}, seed: 1, explore: DefaultExploration, calibrate: true}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.models == nil {
		cfg.models = NewModels()
	}
	s := &Scheme{config: cfg, cands: []candidate{{spec: Identity}}, rng: rand.New(rand.NewPCG(cfg.seed, 0x61646170))}
	for _, c := range codecs {
		if c == nil {
			return nil, fmt.Errorf("%w: nil codec", encoding.ErrBadOption)
		}
		spec := specOf(c)
		if slices.Contains(s.specs, spec) {
			return nil, fmt.Errorf("%w: codec %s given twice", encoding.ErrBadOption, spec)
		}
		var bind []encoding.Option
		if cfg.pipeID != "" {
			bind = append(bind, encoding.WithPipeID(cfg.pipeID))
		}
		enc, err := encoding.New([]encoding.Codec{c}, bind...)
		if err != nil {
			return nil, err
		}
		s.cands = append(s.cands, candidate{spec: spec, name: c.Name(), params: c.Params(), enc: enc})
		s.specs = append(s.specs, spec)
	}
	dec, err := newTimedDecoder(&s.config)
	if err != nil {
		return nil, err
	}
	s.dec = dec
	if cfg.calibrate {
		var todo []encoding.Codec
		for _, c := range codecs {
			if !cfg.models.hasEncode(specOf(c)) || !cfg.models.hasDecode(c.Name()) {
				todo = append(todo, c)
			}
		}
		if err := cfg.models.Calibrate(todo, cfg.clock); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Models returns the models the scheme learns into.
func (s *Scheme) Models() *Models { return s.models }

// Candidates returns the specs the scheme chooses among, identity first.
func (s *Scheme) Candidates() []string {
	out := make([]string, len(s.cands))
	for i, c := range s.cands {
		out[i] = c.spec
	}
	return out
}

// Producer returns the element producer.
func (s *Scheme) Producer() encoding.Producer { return encoding.Producer{} }

// Decode restores a message's encoded elements as encoding.Decoder does
// with the options of WithDecoding, timing each decode.
func (s *Scheme) Decode(m *message.Message) (*message.Message, error) { return s.dec.Decode(m) }

// DecodeReport is Decode that also tells how each element was decoded
// (encoding.Decoder.DecodeReport).
func (s *Scheme) DecodeReport(m *message.Message) (*message.Message, []encoding.ElementReport, error) {
	return s.dec.DecodeReport(m)
}
