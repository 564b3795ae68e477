package adaptive

import (
	"bytes"
	"slices"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// plan picks what to send (d.Chosen) and which candidates to trial
// without sending, within the exploration budget.
func (s *Scheme) plan(d *Decision, k Kind, n int) (shadows []int) {
	ex := s.explore
	d.Chosen = d.Best
	pbest := d.Estimates[d.Best].Total
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.fast.Load(); f != nil {
		s.creditFast(f, f.quota-max(f.left.Load(), 0))
	}
	if ex.Share > 0 {
		limit := time.Duration(float64(pbest) * (1 + ex.FirstSight))
		s.tokens = min(s.tokens+time.Duration(float64(pbest)*ex.Share), max(limit, s.tokens))
	}
	if ex.SendRate > 0 && s.rng.Float64() < ex.SendRate {
		// The least known candidate predicted near the best.
		pick := -1
		for i, e := range d.Estimates {
			if i == d.Best || float64(e.Total) > float64(pbest)*(1+ex.SendSlack) {
				continue
			}
			if pick < 0 || !e.Known && d.Estimates[pick].Known || s.rng.IntN(2) == 0 {
				pick = i
			}
		}
		if pick >= 0 {
			d.Chosen, d.Explored = pick, true
		}
	}
	if ex.MaxShadows == 0 || s.shadowing {
		return nil
	}
	defer func() { s.shadowing = len(shadows) > 0 }()
	var todo []int
	for i, e := range d.Estimates {
		// A known estimate is trialled again when stale, or when it is a
		// near tie: then the estimates' error decides, and an estimate
		// known for a kind and size may not be this content's. Two XML
		// documents of 43 and 46 kB, of one kind, compress alike with
		// zstd:3 (13% and 15%) and 2× apart with xml:3 (6% and 11%);
		// learnt from both, xml:3 came out 2% behind zstd:3 for the first
		// and was 16% ahead.
		if i == 0 || i == d.Chosen || e.Known && !e.stale && float64(e.Total) > float64(pbest)*(1+nearTie) {
			continue
		}
		if e.encKnown && e.Encode+e.Decode >= pbest {
			continue // measured too slow to win even if it compressed to nothing
		}
		todo = append(todo, i)
	}
	// Most promising first: by an optimistic total, the transfer of the
	// predicted size less what it may be off by: half, for an unmeasured
	// ratio; for a measured one, as much as its bucket's samples strayed
	// from it (at most half). So a near tie whose documents of a kind and
	// size compress 2× apart is trialled before steadier ones: on cable
	// with the slow receiver, xml:3 came fifth of five near ties for its
	// decode, was trialled after the other four, and the cell's first two
	// messages went with zstd:3 (64 ms) where xml:3 took 56.
	opt := func(e Estimate) time.Duration {
		f := 0.5
		if e.Known {
			f = 1 - min(e.sizeDev, 0.5)
		}
		return e.Encode + e.Decode + e.xferZero + time.Duration(float64(e.Transfer-e.xferZero)*f)
	}
	slices.SortFunc(todo, func(a, b int) int { return int(opt(d.Estimates[a]) - opt(d.Estimates[b])) })
	// MaxShadows bounds the trials of unmeasured and stale candidates;
	// near ties are bounded by the budget alone, and all are tried: the
	// one whose estimate is not this content's is not the most promising
	// by its estimate (on cable with the slow receiver, xml:3 came fifth
	// of five near ties, for its decode).
	others := 0
	for _, i := range todo {
		e := d.Estimates[i]
		tie := e.Known && !e.stale
		if !tie && others == ex.MaxShadows {
			continue
		}
		// First sight: a candidate unmeasured for this kind and size that
		// might win is tried once, if it costs at most FirstSight·pbest.
		if ex.FirstSight > 0 && !e.Known && float64(opt(e)) <= 1.5*float64(pbest) &&
			float64(e.Encode) <= ex.FirstSight*float64(pbest) && s.models.firstTry(s.cands[i].spec, k, n, pbest) {
			shadows = append(shadows, i)
			others++
			continue
		}
		if e.Encode <= s.tokens {
			s.tokens -= e.Encode
			shadows = append(shadows, i)
			if !tie {
				others++
			}
		}
	}
	return shadows
}

// nearTie is how much worse than the best's a known candidate's predicted
// total may be to be trialled again (paid from the budget, as any other).
const nearTie = 0.1

// shadow trial-encodes e with the candidates at idx in the background,
// off the path of the message being sent, and records what they do. One
// batch runs at a time (plan plans none while one runs); it works on
// its own copy of the data, which the caller may reuse once sent. A size
// far from its estimate has the decision for elements like e (of rest
// bytes of other content) estimated again, with what it taught.
func (s *Scheme) shadow(e message.Element, k Kind, rest int, idx []int, ests []Estimate) {
	e.Data = bytes.Clone(e.Data)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { s.mu.Lock(); s.shadowing = false; s.mu.Unlock() }()
		n := len(e.Data)
		for _, i := range idx {
			c := s.cands[i]
			t0 := s.clock.Now()
			enc, err := c.enc.EncodeElement(e)
			dt := s.clock.Now().Sub(t0)
			s.mu.Lock()
			s.tokens -= dt - ests[i].Encode // settle the reservation
			s.mu.Unlock()
			if err != nil {
				continue // a codec that fails on this input is simply not learned
			}
			s.models.RecordEncode(c.spec, k, n, max(len(enc.Data)-headerLen(c, e.MIME, n), 0), dt)
			if surprising(float64(len(enc.Data)), float64(ests[i].Size)) {
				s.surprised(e.MIME, n, rest, false)
			}
		}
	}()
}

// Wait waits for the shadow trials under way, so that what they learn is
// in the models (before saving them, or in a test).
func (s *Scheme) Wait() { s.wg.Wait() }

// firstTry reports whether spec has not been tried on kind k at size n
// yet (or was tried when elements of it were a tenth as costly to send),
// and marks it tried.
func (m *Models) firstTry(spec string, k Kind, n int, pbest time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := sightKey{spec, k, bucketOf(n)}
	last, seen := m.firstSight[key]
	if seen && pbest < 10*last {
		return false
	}
	m.firstSight[key] = pbest
	return true
}
