package adaptive

import (
	"bytes"
	"math"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Estimate is one choice's cost for one element: predicted, or as a
// Decision's Sent, measured.
type Estimate struct {
	Spec     string        // codec spec, or identity
	Size     int           // bytes of the element as sent
	Encode   time.Duration // encode time here
	Transfer time.Duration // transfer time of the message with this choice
	Decode   time.Duration // decode time at the receiver
	Total    time.Duration
	// Known reports that size and encode time were measured near this
	// size for this kind of content.
	Known bool
}

// Decision is what the scheme decided for one element and why.
type Decision struct {
	Path Path
	// Estimates are per candidate, identity first, and Best the index of
	// the least Total; a reused decision keeps those it was made with.
	Estimates []Estimate
	Best      int
	// Sent is the choice sent: Estimates[Best] with the size sent and the
	// encode time measured, and identity's spec if the encoding came out
	// no smaller than the element. Decide's is the prediction.
	Sent   Estimate
	Trials []string // specs trial-encoded in the background, not sent
}

// elemOverhead approximates the bytes an element costs on the wire beyond
// its data and names (lengths, flags; package wire's format).
const elemOverhead = 16

func wireSize(e message.Element) int {
	return len(e.Data) + len(e.Name) + len(e.Namespace) + len(e.MIME) + elemOverhead
}

func messageSize(m *message.Message) (n int) {
	for i := range m.Len() {
		n += wireSize(m.At(i))
	}
	return n
}

// Encode returns a copy of m whose selected elements are each sent as the
// decision rule says: as they are, or encoded with the best candidate.
// Unselected elements are shared with m; if nothing is selected, m itself
// is returned.
func (s *Scheme) Encode(m *message.Message) (*message.Message, error) {
	var out *message.Message
	total := messageSize(m)
	for i := range m.Len() {
		e := m.At(i)
		if !s.cands[1].enc.Selects(e) {
			continue
		}
		base := total - wireSize(e)
		enc, err := s.encodeElement(e, base)
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

// Decide returns the decision the scheme would make for e alone in a
// message, without encoding anything or exploring.
func (s *Scheme) Decide(e message.Element) Decision {
	raw := encoding.Unmark(e)
	path, prof := s.current()
	d := s.decideAfresh(classify(raw), len(raw.Data), wireSize(raw)-len(raw.Data), path, prof)
	d.Sent = d.Estimates[d.Best]
	return d
}

func (s *Scheme) current() (Path, *Profile) {
	if s.peer == nil {
		return defaultPath, nil
	}
	p := s.peer.Path()
	if p.Bandwidth <= 0 {
		// Keep what is known (an RTT) and assume the rest.
		p.Bandwidth = defaultPath.Bandwidth
		if p.RTT <= 0 {
			p.RTT = defaultPath.RTT
		}
	}
	return p, s.peer.ReceiverProfile()
}

// encodeElement sends e as the decision for it says, and traces it.
func (s *Scheme) encodeElement(e message.Element, base int) (message.Element, error) {
	raw := encoding.Unmark(e)
	n := len(raw.Data)
	rest := base + wireSize(raw) - n
	key := cacheKey{mediaType(raw.MIME), bucketOf(n), bucketOf(rest)}
	k, d, fresh := s.decide(raw, key, rest)
	trials := s.explore(&d, k, n, fresh)
	if fresh && (len(trials) > 0 || !d.Estimates[d.Best].Known) {
		s.forget(key) // what it was made from is about to be learnt better
	}
	d.Sent = d.Estimates[d.Best]
	out := raw
	if c := s.cands[d.Best]; c.enc != nil {
		enc, dt, err := s.encodeWith(c, raw, k, key, d.Sent.Size)
		if err != nil {
			s.endTrials(trials)
			return e, err
		}
		out, d.Sent.Encode = enc, dt
		if len(enc.Data) >= n {
			out, d.Sent.Spec = raw, identity
		}
		d.Sent.Size = len(out.Data)
	}
	for _, i := range trials {
		d.Trials = append(d.Trials, s.cands[i].spec)
	}
	if len(trials) > 0 {
		s.trial(raw, k, key, trials, d.Estimates)
	}
	if s.trace != nil {
		s.trace(d)
	}
	return out, nil
}

// decideAfresh decides for n bytes of kind k sent with rest bytes of
// other content, from what the models predict of every candidate.
func (s *Scheme) decideAfresh(k kind, n, rest int, path Path, prof *Profile) Decision {
	m := s.models
	m.mu.Lock()
	defer m.mu.Unlock()
	xfer := path.TransferTime(rest + n)
	d := Decision{Path: path, Estimates: make([]Estimate, len(s.cands))}
	d.Estimates[0] = Estimate{Spec: identity, Size: n, Transfer: xfer, Total: xfer, Known: true}
	for i, c := range s.cands[1:] {
		size, sizeKnown := m.predictSize(c.spec, k, n)
		enc, encKnown := m.predictEncode(c.spec, k.class, n)
		dec := m.decodeTime(prof, c.name, n)
		xt := path.TransferTime(rest + size)
		e := Estimate{Spec: c.spec, Size: size, Encode: enc, Transfer: xt, Decode: dec,
			Total: enc + xt + dec, Known: sizeKnown && encKnown}
		if d.Estimates[i+1] = e; e.Total < d.Estimates[d.Best].Total { // the first of equal ones
			d.Best = i + 1
		}
	}
	return d
}

// Reuse (see the package doc): a decision stands for reuseCount elements
// like the one it was made for, so a kind of content that changes shows
// within that many elements, while deciding costs a sixteenth of what it
// would per element; and while the path stays within pathDrift of the
// path it was made for, a move below which candidates' transfer times
// move together. maxCached bounds the remembered decisions: a node
// sending many kinds of content decides afresh more often, never grows.
const (
	reuseCount = 16
	pathDrift  = 0.25
	maxCached  = 256
)

type cacheKey struct {
	mime       string
	bucket     int
	restBucket int
}

type cacheEntry struct {
	d    Decision
	k    kind
	prof *Profile
	uses int
}

// decide returns the decision for raw, with rest bytes of other content
// (key says which elements it stands for): a remembered one that stands,
// or one made afresh (fresh).
func (s *Scheme) decide(raw message.Element, key cacheKey, rest int) (k kind, d Decision, fresh bool) {
	path, prof := s.current()
	s.mu.Lock()
	if ce := s.cache[key]; ce != nil && ce.uses < reuseCount && ce.prof == prof && !drifted(ce.d.Path, path) {
		ce.uses++
		k, d = ce.k, ce.d
		s.mu.Unlock()
		return k, d, false
	}
	s.mu.Unlock()
	k = classify(raw)
	d = s.decideAfresh(k, len(raw.Data), rest, path, prof)
	s.mu.Lock()
	if s.cache == nil || len(s.cache) >= maxCached {
		s.cache = make(map[cacheKey]*cacheEntry)
	}
	s.cache[key] = &cacheEntry{d: d, k: k, prof: prof, uses: 1}
	s.mu.Unlock()
	return k, d, true
}

func (s *Scheme) forget(key cacheKey) {
	s.mu.Lock()
	delete(s.cache, key)
	s.mu.Unlock()
}

func drifted(a, b Path) bool {
	rel := func(x, y float64) bool { return math.Abs(x-y) > pathDrift*max(x, y) }
	return rel(a.Bandwidth, b.Bandwidth) || rel(float64(a.RTT), float64(b.RTT)) || a.InitWindow != b.InitWindow
}

// surprising reports whether a measured size is far enough from its
// estimate to decide afresh: by more than a quarter, beyond what
// documents of one kind and size bucket commonly differ by, so that a
// change of content shows, not its ordinary spread.
func surprising(measured, estimated int) bool {
	return math.Abs(float64(measured-estimated)) > 0.25*float64(max(estimated, 0))
}

// nearTie is how much worse than the best's a measured candidate's
// predicted total may be to be tried again on the content at hand (see
// the package doc).
const nearTie = 0.1

// explore picks, for a fresh decision, the candidates to try on the
// element without sending them: the first sight of a candidate on a kind
// and size bucket, and near ties the budget pays for (candidates measured
// too slow to win even if they compressed to nothing are not tried). Then
// it adds the element's share of its predicted time to the budget, which
// holds at most one such element's time: what is not spent on a near tie
// soon is not hoarded for a burst of trials later.
func (s *Scheme) explore(d *Decision, k kind, n int, fresh bool) []int {
	if s.share == 0 {
		return nil
	}
	pbest := d.Estimates[d.Best].Total
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, e := range d.Estimates {
		switch {
		case !fresh || s.trialing || i == 0 || i == d.Best || e.Encode+e.Decode >= pbest:
		case !e.Known:
			if e.Encode <= pbest && s.models.firstTry(s.cands[i].spec, k, n) {
				out = append(out, i)
			}
		case float64(e.Total) <= float64(pbest)*(1+nearTie) && e.Encode <= s.tokens:
			s.tokens -= e.Encode
			out = append(out, i)
		}
	}
	s.trialing = s.trialing || len(out) > 0
	s.tokens = min(s.tokens+time.Duration(float64(pbest)*s.share), max(pbest, s.tokens))
	return out
}

func (s *Scheme) endTrials(trials []int) {
	if len(trials) > 0 {
		s.mu.Lock()
		s.trialing = false
		s.mu.Unlock()
	}
}

// encodeWith encodes e with c, timed, and learns what it did; a size far
// from its estimate est has the decision for elements like e made afresh.
// A codec that fails on the input learns nothing.
func (s *Scheme) encodeWith(c candidate, e message.Element, k kind, key cacheKey, est int) (message.Element, time.Duration, error) {
	t0 := time.Now()
	enc, err := c.enc.EncodeElement(e)
	dt := time.Since(t0)
	if err != nil {
		return e, 0, err
	}
	s.models.recordEncode(c.spec, k, true, len(e.Data), len(enc.Data), dt)
	if surprising(len(enc.Data), est) {
		s.forget(key)
	}
	return enc, dt, nil
}

// trial encodes e with the candidates at idx in the background, off the
// path of the message, and learns what they do. It works on its own copy
// of the data, which the caller may reuse once sent.
func (s *Scheme) trial(e message.Element, k kind, key cacheKey, idx []int, ests []Estimate) {
	e.Data = bytes.Clone(e.Data)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.endTrials(idx)
		for _, i := range idx {
			s.encodeWith(s.cands[i], e, k, key, ests[i].Size)
		}
	}()
}

// Wait waits for the trials under way, so that what they learn is in the
// models (before saving them, or in a test).
func (s *Scheme) Wait() { s.wg.Wait() }
