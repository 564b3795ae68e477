package adaptive

import (
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Estimate is the predicted cost of one choice for one element.
type Estimate struct {
	Spec     string        // codec spec, or Identity
	Size     int           // bytes of the element as sent
	Encode   time.Duration // encode time here
	Transfer time.Duration // transfer time of the message with this choice
	Decode   time.Duration // decode time at the receiver
	// Excess is what exchanges with this choice took beyond their
	// predicted times, compared with sending as is, as the path source
	// saw them (see Calibration); 0 when it has not.
	Excess time.Duration
	Total  time.Duration
	// Known reports that size and encode time were measured near this
	// size for this kind of content.
	Known    bool
	stale    bool
	encKnown bool
	xferZero time.Duration // the transfer time were the element empty
	sizeDev  float64       // how far the known size's samples strayed (point.dev)
}

// Decision is what the scheme decided for one element and why.
type Decision struct {
	Index int // position of the element in the message
	Kind  Kind
	Size  int
	Path  Path
	// Estimates are per candidate, identity first. A reused decision
	// keeps the estimates it was made with (for the size and path of
	// then) for as long as the path has not moved enough to change the
	// choice.
	Estimates []Estimate
	Best      int      // index of the least Total
	Chosen    int      // index of the choice sent
	Explored  bool     // Chosen was sent to explore, not because it was best
	Shadowed  []string // specs being trial-encoded in the background, not sent
	// EncodeTime is the measured encode time of the choice sent (0 for
	// identity), SentSize the size of the element as sent.
	EncodeTime time.Duration
	SentSize   int
	// Fallback reports that the encoding came out no smaller than the
	// element, which was sent as it is instead.
	Fallback bool
}

// Choice returns the spec of the choice sent.
func (d Decision) Choice() string { return d.Estimates[d.Chosen].Spec }

// elemOverhead approximates the bytes an element costs on the wire beyond
// its data and names.
const elemOverhead = 16

// Encode returns a copy of m whose selected elements are each sent as the
// decision rule says: as they are, or encoded with the best candidate.
// Unselected elements are shared with m; if nothing is selected, m itself
// is returned.
func (s *Scheme) Encode(m *message.Message) (*message.Message, error) {
	var out *message.Message
	total := 0
	// Indexed, not ranged over m.All(): the iterator's closures are code
	// lines of their own, cold on a fast path (fastPath).
	for i := range m.Len() {
		total += wireSize(m.At(i))
	}
	for i := range m.Len() {
		e := m.At(i)
		if encoding.IsEncoded(e) || !encoding.IsMarked(e) && (s.sel == nil || !s.sel.Select(e)) {
			continue
		}
		base := total - wireSize(e)
		enc, err := s.encodeElement(i, e, base)
		if err != nil {
			return nil, &encoding.ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Err: err}
		}
		total = base + wireSize(enc)
		if out == nil {
			out = m.Clone()
		}
		out.Set(i, enc)
	}
	if out == nil {
		return m, nil
	}
	return out, nil
}

func wireSize(e message.Element) int {
	return len(e.Data) + len(e.Name) + len(e.Namespace) + len(e.MIME) + elemOverhead
}

// Decide returns the decision the scheme would make for e alone in a
// message, without encoding anything or exploring.
func (s *Scheme) Decide(e message.Element) Decision {
	raw := encoding.Unmark(e)
	k := Classify(raw)
	path := s.currentPath()
	d := Decision{Kind: k, Size: len(e.Data), Path: path}
	d.Estimates = s.estimates(k, len(raw.Data), wireSize(raw)-len(raw.Data), raw.MIME, path, s.receiverProfile())
	d.Best = best(d.Estimates)
	d.Chosen = d.Best
	return d
}

func (s *Scheme) currentPath() Path {
	if s.path == nil {
		return DefaultPath
	}
	p := s.path.Path()
	if !p.Known() {
		// Keep what is known (an RTT) and assume the rest.
		p.Bandwidth = DefaultPath.Bandwidth
		if p.RTT <= 0 {
			p.RTT = DefaultPath.RTT
		}
	}
	return p
}

func (s *Scheme) receiverProfile() *Profile {
	if s.recv == nil {
		return nil
	}
	return s.recv.ReceiverProfile()
}

// best is the index of the estimate to send: the least Total, unless that
// saves less than identityMargin of sending as is (index 0), which is then
// chosen.
func best(ests []Estimate) int {
	return bestOf(len(ests), func(i int) time.Duration { return ests[i].Total })
}

// identityMargin is the share of sending as is's predicted time that a
// codec must save to be sent instead. Sending as is costs what it is
// predicted to cost; a codec's prediction carries its model's error (a
// decode seen cold at the receiver, a rate known to 10%), and where the
// gain is smaller than that error, it is a coin toss whose loss the
// application sees against its uncompressed practice. Passing up a gain
// of at most 2% costs at most that much against the best choice.
const identityMargin = 0.02

// bestOf is best over n totals, the first of equal ones.
func bestOf(n int, total func(int) time.Duration) int {
	t0 := total(0)
	b, tb := 0, t0
	for i := 1; i < n; i++ {
		if t := total(i); t < tb {
			b, tb = i, t
		}
	}
	if b != 0 && float64(t0-tb) <= identityMargin*float64(t0) {
		return 0
	}
	return b
}

// encodeElement sends e as the decision for it says, and traces the
// decision. Sending as is by a decision that stands (asIs) is most of what
// a fast path does, and there the scheme's memory is cold after each trip
// through the network stack: that path touches as little as it can, and
// what deciding needs (a Decision is hundreds of bytes of stack) is in
// decideAndEncode.
func (s *Scheme) encodeElement(idx int, e message.Element, base int) (message.Element, error) {
	raw := encoding.Unmark(e)
	n := len(raw.Data)
	rest := base + wireSize(raw) - n
	if f := s.asIs(raw.MIME, n, rest); f != nil {
		if s.trace != nil {
			s.traceAsIs(f, idx, n)
		}
		return raw, nil
	}
	return s.decideAndEncode(idx, e, raw, rest, s.currentPath(), s.receiverProfile())
}

// traceAsIs traces a decision taken on the fast path, with the path it
// was made for, from which the path had not drifted at the last check
// (reading the path source again would cost the fast path what its checks
// save). It is out of line so that the copy of the Decision is not in
// encodeElement's frame.
//
//go:noinline
func (s *Scheme) traceAsIs(f *fastPath, idx, n int) {
	d := f.d
	d.Index, d.Size, d.Path, d.SentSize = idx, n, f.path, n
	s.trace(d)
}

// decideAndEncode is encodeElement's way when no decision to send as is
// stands: it reuses what it can of a remembered decision or decides
// afresh, plans exploration, and encodes.
//
//go:noinline
func (s *Scheme) decideAndEncode(idx int, e, raw message.Element, rest int, path Path, prof *Profile) (message.Element, error) {
	n := len(raw.Data)
	var d Decision
	var shadows []int
	if hit := s.reuse(&d, raw.MIME, n, rest, path, prof); hit != cacheDecision {
		t0 := s.clock.Now()
		switch hit {
		case cacheMiss:
			d.Kind = Classify(raw)
			fallthrough
		case cacheKind:
			d.Estimates = s.estimates(d.Kind, n, rest, raw.MIME, path, prof)
		case cachePrices:
			reprice(d.Estimates, rest, path)
		}
		d.Size, d.Path = n, path
		d.Best = best(d.Estimates)
		shadows = s.plan(&d, d.Kind, n)
		s.remember(d, raw.MIME, n, rest, prof, hit, s.clock.Now().Sub(t0))
	}
	d.Index = idx

	var out message.Element
	c := s.cands[d.Chosen]
	if c.enc == nil {
		out = raw
	} else {
		t0 := s.clock.Now()
		enc, err := c.enc.EncodeElement(raw)
		dt := s.clock.Now().Sub(t0)
		if err != nil {
			if len(shadows) > 0 {
				s.mu.Lock()
				s.shadowing = false
				s.mu.Unlock()
			}
			return e, err
		}
		d.EncodeTime = dt
		s.models.RecordEncode(c.spec, d.Kind, n, max(len(enc.Data)-headerLen(c, raw.MIME, n), 0), dt)
		if e := d.Estimates[d.Chosen]; surprising(float64(len(enc.Data)), float64(e.Size)) {
			s.surprised(raw.MIME, n, rest, true) // the content may have changed
		} else if surprisingTime(dt, e.Encode) {
			s.surprised(raw.MIME, n, rest, false)
		}
		out = enc
		if len(enc.Data) >= n {
			out, d.Fallback = raw, true
		}
	}
	d.SentSize = len(out.Data)
	if len(shadows) > 0 {
		for _, i := range shadows {
			d.Shadowed = append(d.Shadowed, s.cands[i].spec)
		}
		s.shadow(raw, d.Kind, rest, shadows, d.Estimates)
	}
	s.traceDecision(d)
	return out, nil
}

func (s *Scheme) traceDecision(d Decision) {
	if s.trace != nil {
		s.trace(d)
	}
}

// estimates predicts every candidate's cost for n bytes of kind k sent
// with rest bytes of other content in the same message.
func (s *Scheme) estimates(k Kind, n, rest int, mime string, path Path, prof *Profile) []Estimate {
	out := s.predict(k, n, rest, mime, path, prof)
	if s.calib != nil {
		// Outside the models' lock: the source has its own.
		for i := 1; i < len(out); i++ {
			if x, ok := s.calib.Excess(out[i].Spec, rest+out[i].Size, rest+n); ok {
				out[i].Excess = x
				out[i].Total += x
			}
		}
	}
	return out
}

// predict is estimates by the models alone.
func (s *Scheme) predict(k Kind, n, rest int, mime string, path Path, prof *Profile) []Estimate {
	m := s.models
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Estimate, len(s.cands))
	xfer := path.TransferTime(rest + n)
	out[0] = Estimate{Spec: Identity, Size: n, Transfer: xfer, Total: xfer, Known: true}
	factor := -1.0
	for i, c := range s.cands[1:] {
		se := m.predictSize(c.spec, k, n, s.specs)
		et := m.predictEncode(c.spec, k.Class, n)
		size := headerLen(c, mime, n) + int(se.bytes+0.5)
		ratio := se.bytes / float64(max(n, 1))
		dt, ok := prof.DecodeTime(c.name, n, ratio)
		if !ok {
			if factor < 0 {
				factor = m.cpuFactor(prof)
			}
			lt, ok := m.localDecode(c.name, n, ratio)
			if !ok {
				lt = priorDecode(n)
			}
			dt = time.Duration(float64(lt) * factor)
		}
		xt := path.TransferTime(rest + size)
		xz := path.TransferTime(rest)
		e := Estimate{Spec: c.spec, Size: size, Encode: et.d, Transfer: xt, Decode: dt, Total: et.d + xt + dt, Known: se.known && et.known, encKnown: et.known, xferZero: xz, sizeDev: se.dev}
		// Stale: measured long ago, or once only (one sample may have been
		// a descheduled thread's).
		if sa := s.explore.StaleAfter; sa > 0 && e.Known && (m.seq-min(se.seq, m.seq) > sa || m.seq-min(et.seq, m.seq) > sa) ||
			e.Known && (se.w < 2 || et.w < 2) {
			e.stale = true
		}
		out[i+1] = e
	}
	return out
}

// headerLen is the length of the header candidate c writes for an element
// of n bytes of type mime.
func headerLen(c candidate, mime string, n int) int {
	var buf [512]byte
	h := encoding.Header{Codec: c.name, Params: c.params, MIME: mime, Size: uint64(n)}
	return len(encoding.AppendHeader(buf[:0], h))
}
