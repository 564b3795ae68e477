// Package adaptive is the encoding layer's adaptive scheme: for each
// selected element it sends the element as it is or encodes it with the
// candidate codec and level that has the receiver hold it decoded soonest.
// A *Scheme is an encoding.Scheme like the fixed ones, so the pipe adapters
// (encoding.NewOutput, NewInput, NewBidi) take it, and any scheme's Decode
// decodes its elements. It builds on pkg/encoding and klauspost/compress's
// compressibility estimate, imports no codec (the candidates are given)
// and knows no network: what it knows of the receiver comes through Peer,
// which package pathinfo implements over a libp2p host.
//
// For an element of n bytes of kind k (its media type and a
// compressibility class from a 2 KiB sample) sent with rest bytes of other
// content, the scheme sends the candidate c with the least
//
//	T(c) = encode_c(k, n) + path.TransferTime(rest + size_c(k, n)) + decode_receiver,c(n)
//
// NAM's rule (Ghandeharizadeh et al.: compression time + transfer of the
// smaller message + decompression time against sending as is), per element
// and among many codecs. Identity, sending the element as it is, is always
// a candidate, and an encoding no smaller than the element is not sent.
//
// Sizes and encode times come from Models learned online per codec, level
// and kind (unknown codecs are measured on a built-in sample when a Scheme
// is made); decode times from the receiver's Profile; the path from the
// Peer, to which the scheme reports its exchanges.
//
// Estimates improve only for what is tried. A trial encodes the element
// with another candidate in the background and is not sent: a candidate
// not yet measured on this kind and size bucket is tried once if its
// predicted encode time is at most the best choice's predicted total; a
// measured one predicted within a tenth of the best is tried again when
// a budget of a hundredth of the traffic's predicted time allows, since
// documents of one kind and size compress differently by more than that.
//
// A decision is reused for up to 16 elements of the same media type and
// size (and message size), while the receiver's profile is the same and
// the path has not moved by a quarter: deciding afresh classifies a
// sample and reads every candidate's curves, which on a fast path costs a
// fair share of what the choice saves (BenchmarkEncodeReused).
// docs/adaptive.md tells more.
package adaptive

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// identity is the spec of the choice to send an element as it is.
const identity = "identity"

// Peer is what the scheme knows of the receiver, and where it reports
// what it sees of the path: package pathinfo's Monitor implements it.
type Peer interface {
	// Path is the path to the receiver as known now.
	Path() Path
	// ReceiverProfile is the receiver's decode profile, nil if unknown.
	ReceiverProfile() *Profile
	// ObserveExchange tells that n bytes sent to the receiver were
	// acknowledged after d, beyond the time the receiver is predicted to
	// take decoding what of them went encoded.
	ObserveExchange(n int, d time.Duration)
}

type candidate struct {
	spec string
	name string
	enc  *encoding.Codecs
}

// Scheme chooses per element among identity and its candidate codecs. It
// is an encoding.Observer: over an Output, it times its own exchanges. It
// is safe for concurrent use.
type Scheme struct {
	config
	cands []candidate // cands[0] is identity
	dec   *encoding.Decoder

	mu       sync.Mutex
	tokens   time.Duration
	cache    map[cacheKey]*cacheEntry
	trialing bool // a batch of trials runs
	wg       sync.WaitGroup

	xmu sync.Mutex
	x   exchange
}

// exchange is what the scheme sent since the last acknowledgement, from
// start (zero: nothing): bytes on the wire, and decode, the time the
// receiver is predicted to take decoding its encoded elements, which is
// not the path's.
type exchange struct {
	start  time.Time
	bytes  int
	decode time.Duration
}

var (
	_ encoding.Scheme   = (*Scheme)(nil)
	_ encoding.Observer = (*Scheme)(nil)
)

// specOf names a codec as the models know it: encoding.Header.Spec's spec,
// "name:level", with "@modelID" when it compresses with a model.
func specOf(c encoding.Codec) string {
	return encoding.Header{Codec: c.Name(), Params: c.Params()}.Spec().String()
}

// New returns an adaptive scheme choosing among sending each selected
// element as it is and encoding it with one of codecs (at least one).
// Codecs the models know nothing of are measured first on a built-in
// sample (a few tens of milliseconds).
func New(codecs []encoding.Codec, opts ...Option) (*Scheme, error) {
	cfg := config{share: defaultShare}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if len(codecs) == 0 {
		return nil, fmt.Errorf("%w: no codecs to choose among", encoding.ErrBadOption)
	}
	if cfg.models == nil {
		cfg.models = NewModels()
	}
	s := &Scheme{config: cfg, cands: []candidate{{spec: identity}}}
	var todo []encoding.Codec
	for _, c := range codecs {
		if c == nil {
			return nil, fmt.Errorf("%w: nil codec", encoding.ErrBadOption)
		}
		spec := specOf(c)
		if slices.ContainsFunc(s.cands, func(o candidate) bool { return o.spec == spec }) {
			return nil, fmt.Errorf("%w: codec %s given twice", encoding.ErrBadOption, spec)
		}
		enc, err := encoding.New([]encoding.Codec{c}, cfg.encOpts...)
		if err != nil {
			return nil, err
		}
		s.cands = append(s.cands, candidate{spec: spec, name: c.Name(), enc: enc})
		if !cfg.models.knows(spec, c.Name()) {
			todo = append(todo, c)
		}
	}
	dec, err := encoding.NewDecoder(append(slices.Clone(cfg.encOpts), cfg.models.TimeDecodes())...)
	if err != nil {
		return nil, err
	}
	s.dec = dec
	cfg.models.calibrate(todo)
	return s, nil
}

// Decode restores a message's encoded elements as encoding.Decoder does
// with the options of WithEncoding, timing each decode into the models.
func (s *Scheme) Decode(m *message.Message) (*message.Message, error) { return s.dec.Decode(m) }

// Sending is the encoding.Observer's: m, encoded by the scheme, is handed
// to the sender now. The exchange is timed from the first message sent
// since the last Delivered; without a Peer there is nothing to time it for.
func (s *Scheme) Sending(m *message.Message) {
	if s.peer == nil {
		return
	}
	n, dec := messageSize(m), s.decodeTimeOf(m)
	s.xmu.Lock()
	if s.x.start.IsZero() {
		s.x.start = time.Now()
	}
	s.x.bytes += n
	s.x.decode += dec
	s.xmu.Unlock()
}

// decodeTimeOf predicts the receiver's time decoding m's encoded
// elements, as decisions do.
func (s *Scheme) decodeTimeOf(m *message.Message) (d time.Duration) {
	prof := s.peer.ReceiverProfile()
	for i := range m.Len() {
		if !encoding.IsEncoded(m.At(i)) {
			continue
		}
		h, _, err := encoding.ParseHeader(m.At(i).Data)
		if err != nil {
			continue
		}
		s.models.mu.Lock()
		d += s.models.decodeTime(prof, h.Codec, int(min(h.Size, 1<<40)))
		s.models.mu.Unlock()
	}
	return d
}

// Delivered is the encoding.Observer's: what was sent since the last call
// was acknowledged (ok), or is not to be timed. The time since the first
// of it, less the receiver's predicted decoding of its encoded elements,
// is the path's, and goes to the Peer. That prediction's error goes with
// it, but a decode takes little of an exchange where the path matters
// (a slow link), and without encoded exchanges a scheme that encodes
// everything would never see the path change.
func (s *Scheme) Delivered(ok bool) {
	s.xmu.Lock()
	x := s.x
	s.x = exchange{}
	s.xmu.Unlock()
	if d := time.Since(x.start) - x.decode; ok && !x.start.IsZero() && d > 0 {
		s.peer.ObserveExchange(x.bytes, d)
	}
}
