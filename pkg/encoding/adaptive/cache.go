package adaptive

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Decisions are remembered per media type, size bucket and size of the
// rest of the message, and reused for the next reuseCount elements that
// share them: on a fast path, classifying and estimating every element
// would cost more than the choice saves. What moved since decides how
// much is redone:
//
//   - nothing (the path within pathDrift, the same receiver profile): the
//     decision stands;
//   - the path only: if the remembered choice would still be the best
//     with the transfers priced for the new path (stands), the decision
//     stands; otherwise the estimates' sizes and codec times stand and
//     only the transfers are repriced. A loopback or LAN round trip
//     jitters by more than pathDrift from one message to the next, and
//     the codecs' curves cost microseconds to read, a fair share of such
//     a message; checking that the choice stands costs a tenth of that
//     and allocates nothing;
//   - the receiver's profile: the estimates are made afresh, but the
//     element's kind is still the entry's. Sampling the content (a 2 KiB
//     entropy estimate) is most of a fresh decision's cost, and what the
//     data looks like does not depend on the link or the receiver.
//
// A decision to send as is that stands is then taken without the lock
// (fastPath), which looks at the path and the receiver's profile on every
// checkEvery-th element, and on any element more than checkAfter after
// its last look, not on every element.
//
// After reuseCount elements the content is sampled again whatever
// happened, or after more where deciding afresh would cost more than
// decideShare of the element's predicted time, up to maxReuse: a fresh
// decision reads every candidate's curves and costs tens of
// microseconds, which on loopback is a fifth of a small message's trip.
// With at most 256 uses, fresh decisions still cost loopback's 255 B
// messages 0.46 µs each on average in the grid, 0.9% of their exchange;
// 1024 of them are 50 ms of such traffic. Exploration is planned whenever
// the estimates change.
const (
	reuseCount  = 8
	maxReuse    = 1024
	decideShare = 0.002
	maxCached   = 256
	// pathDrift is how far (relative) the bandwidth or the RTT may move
	// before remembered decisions are repriced.
	pathDrift = 0.2
)

// cacheHit says what of a remembered decision stands.
type cacheHit int

const (
	cacheMiss     cacheHit = iota // classify and estimate
	cacheKind                     // the kind stands: estimate
	cachePrices                   // the estimates stand: reprice the transfers
	cacheDecision                 // the decision stands
)

type cacheKey struct {
	mime       string
	bucket     int
	restBucket int
}

type cacheEntry struct {
	// uses counts the elements that reused d, those the fast path has
	// reserved included (fastPath.left).
	uses  int64
	limit int64 // uses before the content is sampled again
	d     Decision
	prof  *Profile
	// reestimate: the choice turned out other than estimated, or was
	// estimated from priors; the models have learnt since.
	reestimate bool
}

// reuse fills d with what stands of the remembered decision for an
// element of n bytes with rest bytes of other content: all of it
// (cacheDecision), a copy of its estimates for n bytes, to be repriced
// (cachePrices), or its kind (cacheKind); nothing for cacheMiss.
func (s *Scheme) reuse(d *Decision, mime string, n, rest int, path Path, prof *Profile) cacheHit {
	key := cacheKey{mediaType(mime), bucketOf(n), bucketOf(rest)}
	s.mu.Lock()
	defer s.mu.Unlock()
	ce := s.cache[key]
	if f := s.fast.Load(); f != nil && f.entry == ce {
		s.dropFast() // its uses not taken are the entry's again
	}
	if ce == nil || ce.uses >= ce.limit {
		return cacheMiss
	}
	ce.uses++
	switch {
	case ce.prof != prof || ce.reestimate:
		*d = Decision{Kind: ce.d.Kind}
		return cacheKind
	case drifted(ce.d.Path, path) && !stands(ce.d.Estimates, ce.d.Best, ce.d.Size, n, rest, path):
		*d = Decision{Kind: ce.d.Kind, Estimates: scaled(ce.d.Estimates, ce.d.Size, n)}
		return cachePrices
	}
	*d = ce.d
	d.Size, d.Path, d.Explored, d.Shadowed = n, path, false, nil
	d.Chosen = d.Best
	// Reused decisions still fill the exploration budget.
	share := time.Duration(float64(d.Estimates[d.Best].Total) * s.explore.Share)
	s.tokens += share
	if q := ce.limit - ce.uses; d.Best == 0 && q > 0 && !drifted(ce.d.Path, path) && len(mime) <= len(fastPath{}.mime) {
		s.dropFast()
		f := &fastPath{mimeLen: uint8(len(mime)), bucket: uint8(key.bucket), restBucket: uint8(key.restBucket),
			fastRest: &fastRest{entry: ce, quota: q, share: share, prof: prof, path: ce.d.Path, d: *d}}
		copy(f.mime[:], mime)
		f.left.Store(q)
		ce.uses += q
		f.checked.Store(sinceEpoch())
		s.fast.Store(f)
	}
	return cacheDecision
}

// fastPath is the last decision reused to send an element as it is, for
// the next elements like it to take without the lock or the map: on a
// fast path, where sending as is wins, the scheme's memory is cold after
// each trip through the network stack and the codecs, and each cache line
// it touches costs a fair share of what deciding may cost (a tenth of a
// microsecond each, for a 40 µs loopback exchange; in the grid, with six
// codecs' tables run between two of auto's messages, the fast path cost
// 1.5 µs more than identity's copy of the message when it also read its
// entry's count and a shared budget). It is replaced whenever an entry
// changes under the lock.
//
// What asIs reads and writes for every element is this struct, 64 bytes:
// the allocator places it on one cache line. The MIME type is kept in
// place (a string's bytes would be one more line elsewhere), so only types
// of up to 32 bytes take the fast path. The uses it may take are reserved
// from its entry when it is set (left), so that it counts them on its own
// line; those it did not take go back to the entry, and the exploration
// budget of those it took is added, when it is dropped (dropFast) or when
// plan runs (creditFast).
type fastPath struct {
	mime       [32]byte // the element's MIME type as given
	mimeLen    uint8
	bucket     uint8 // the key's
	restBucket uint8
	// left counts down the uses reserved; below zero, none is left, or
	// the fast path was dropped (withdrawn).
	left    atomic.Int64
	checked atomic.Int64 // when the path was last checked (sinceEpoch)
	*fastRest
}

// fastRest is what the fast path reads only on a check, a trace or under
// the lock.
type fastRest struct {
	entry    *cacheEntry
	quota    int64         // uses reserved from entry
	credited int64         // uses whose share was added to the budget (under mu)
	share    time.Duration // added to the exploration budget per use
	prof     *Profile
	path     Path     // the decision's
	d        Decision // as reuse gives it, for a trace
}

// withdrawn is a dropped fast path's left: below zero whatever asIs
// subtracts after.
const withdrawn = math.MinInt64 / 2

// asIs returns the last decision reused to send an element as it is
// (fastPath) if it stands for an element of n bytes of type mime with rest
// bytes of other content, as reuse would report cacheDecision, and counts
// the use; otherwise nil.
//
// Whether the path has drifted or the receiver's profile changed is
// checked on every checkEvery-th use, and on any use more than checkAfter
// after the last check: reading them is two calls through interfaces into
// the path source's memory, which costs a third of a microsecond when it
// is cold (BenchmarkEncodeCold), more than all the rest, while reading
// the clock costs tens of nanoseconds. So a remembered decision to send
// as is outlives a change by at most checkEvery−1 elements, all sent
// within checkAfter of the last check. The clock is the system's, not the scheme's Clock (which times
// codecs): this bounds freshness, it measures nothing.
func (s *Scheme) asIs(mime string, n, rest int) *fastPath {
	f := s.fast.Load()
	if f == nil || len(mime) != int(f.mimeLen) || string(f.mime[:len(mime)]) != mime ||
		bucketOf(n) != int(f.bucket) || bucketOf(rest) != int(f.restBucket) {
		return nil
	}
	u := f.left.Add(-1)
	if u < 0 {
		return nil // used up: reuse sees it so too, and decides afresh
	}
	if now := sinceEpoch(); u%checkEvery == 0 || now-f.checked.Load() > int64(checkAfter) {
		if !s.stillAsIs(f) {
			f.left.Add(1) // reuse counts it
			return nil
		}
		f.checked.Store(now)
	}
	return f
}

// dropFast drops the fast path, if any: the uses it did not take go back
// to its entry, and the exploration budget of those it took is added.
// Call with mu held.
func (s *Scheme) dropFast() {
	f := s.fast.Swap(nil)
	if f == nil {
		return
	}
	unused := max(f.left.Swap(withdrawn), 0)
	f.entry.uses -= unused
	s.creditFast(f, f.quota-unused)
}

// creditFast adds to the exploration budget the share of f's uses not yet
// added, of used so far. Call with mu held.
func (s *Scheme) creditFast(f *fastPath, used int64) {
	s.tokens += time.Duration(used-f.credited) * f.share
	f.credited = used
}

// The fast path checks the path and the receiver's profile every
// checkEvery uses, and on a use more than checkAfter after the last check.
// The at most checkEvery−1 elements that may go before a check sees a
// change all go within checkAfter of the last check: on a fast path,
// where sending as is wins. A link that became slow enough for encoding
// to win spaces its messages further apart than that, so that checkAfter
// catches the change at the next one (grid: LAN to DSL).
const (
	checkEvery = 16
	checkAfter = 10 * time.Millisecond
)

// epoch makes sinceEpoch monotonic: time.Since reads the monotonic clock.
var epoch = time.Now()

func sinceEpoch() int64 { return int64(time.Since(epoch)) }

// stillAsIs reports whether f's decision stands for the path and the
// receiver's profile of now.
func (s *Scheme) stillAsIs(f *fastPath) bool {
	return f.prof == s.receiverProfile() && !drifted(f.path, s.currentPath())
}

// scaled copies estimates made for an element of n0 bytes for one of n
// bytes in the same size bucket: sizes and times in proportion.
func scaled(ests []Estimate, n0, n int) []Estimate {
	out := slices.Clone(ests)
	if f := scaleFactor(n0, n); f != 1 {
		for i := range out {
			out[i] = scaleBy(out[i], f)
		}
	}
	return out
}

// scaleFactor is how much larger an element of n bytes is than one of n0.
func scaleFactor(n0, n int) float64 {
	if n == n0 || n0 <= 0 {
		return 1
	}
	return float64(n) / float64(n0)
}

// scaleBy scales an estimate's size and codec times by f.
func scaleBy(e Estimate, f float64) Estimate {
	e.Size = int(float64(e.Size)*f + 0.5)
	e.Encode = time.Duration(float64(e.Encode) * f)
	e.Decode = time.Duration(float64(e.Decode) * f)
	return e
}

// stands reports whether best would still be the best of estimates made
// for an element of n0 bytes, were they scaled for n bytes and repriced
// for path with rest bytes of other content: what scaled, reprice and
// best would say, without copying the estimates. A path that drifts
// rarely changes the choice: with no slow start and no loss, a larger RTT
// adds the same to every choice's transfer, and only the bandwidth weighs
// the bytes a codec saves against its time.
func stands(ests []Estimate, best, n0, n, rest int, path Path) bool {
	f := scaleFactor(n0, n)
	total := func(e Estimate) time.Duration {
		if f != 1 {
			e = scaleBy(e, f)
		}
		return e.Encode + path.TransferTime(rest+e.Size) + e.Decode + e.Excess
	}
	return bestOf(len(ests), func(i int) time.Duration { return total(ests[i]) }) == best
}

// reprice sets the transfer times of estimates for path, with rest bytes
// of other content in the message.
func reprice(ests []Estimate, rest int, path Path) {
	xz := path.TransferTime(rest)
	for i := range ests {
		e := &ests[i]
		e.Transfer = path.TransferTime(rest + e.Size)
		e.Total = e.Encode + e.Transfer + e.Decode + e.Excess
		if i > 0 {
			e.xferZero = xz
		}
	}
}

// remember keeps d for the elements like it that follow. A decision that
// reused part of its entry (hit is not cacheMiss) replaces the entry's
// decision but keeps its count of uses, so that the content is sampled
// again after reuseCount elements whatever the path did.
//
// took is what deciding cost: the entry is reused for as many elements as
// keep that cost under decideShare of their predicted time.
func (s *Scheme) remember(d Decision, mime string, n, rest int, prof *Profile, hit cacheHit, took time.Duration) {
	key := cacheKey{mediaType(mime), bucketOf(n), bucketOf(rest)}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A choice estimated from priors is estimated again next time, from
	// what its encode teaches the models.
	again := !d.Estimates[d.Best].Known
	s.dropFast() // the entry it holds may change
	if ce := s.cache[key]; hit != cacheMiss && ce != nil {
		ce.d, ce.prof, ce.reestimate = d, prof, again
		return
	}
	limit := int64(reuseCount)
	if pbest := float64(d.Estimates[d.Best].Total); pbest > 0 {
		limit = int64(min(max(float64(took)/(decideShare*pbest), reuseCount), maxReuse))
	}
	if s.cache == nil || len(s.cache) >= maxCached {
		s.cache = make(map[cacheKey]*cacheEntry)
	}
	s.cache[key] = &cacheEntry{d: d, prof: prof, limit: limit, reestimate: again}
}

// surprised marks the remembered decision for elements like one of n
// bytes to be estimated again: encoding it took or produced far from what
// was estimated, and the models have just learnt better.
// If resample, the content is sampled again too.
func (s *Scheme) surprised(mime string, n, rest int, resample bool) {
	key := cacheKey{mediaType(mime), bucketOf(n), bucketOf(rest)}
	s.mu.Lock()
	if ce := s.cache[key]; ce != nil {
		s.dropFast()
		ce.reestimate = true
		if resample {
			ce.uses = ce.limit
		}
	}
	s.mu.Unlock()
}

// surprising reports whether a measured quantity is far enough from its
// estimate to estimate again.
func surprising(measured, estimated float64) bool {
	return math.Abs(measured-estimated) > surprise*math.Max(estimated, 0)
}

// surprisingTime is surprising for durations, which must also be off by
// more than minSurprise: deciding afresh costs microseconds, and a short
// encode's time jitters by more than a quarter on a busy machine.
func surprisingTime(measured, estimated time.Duration) bool {
	return surprising(float64(measured), float64(estimated)) && max(measured-estimated, estimated-measured) > minSurprise
}

// surprise is how far (relative) an encode's time or size may be from its
// estimate before remembered decisions are estimated again.
const (
	surprise    = 0.25
	minSurprise = 20 * time.Microsecond
)

func drifted(a, b Path) bool {
	rel := func(x, y float64) bool { return math.Abs(x-y) > pathDrift*max(x, y) }
	return rel(a.Bandwidth, b.Bandwidth) || rel(float64(a.RTT), float64(b.RTT)) || a.Loss != b.Loss || a.InitWindow != b.InitWindow
}
