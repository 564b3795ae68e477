package adaptive

import (
	"math"
	"time"
)

// Decisions are remembered per media type, size bucket and size of the
// rest of the message, and reused for the next reuseCount elements that
// share them while the path and the receiver's profile stay as they were:
// on a fast path, classifying and estimating every element would cost
// more than the choice saves. Exploration happens when a decision is made
// afresh.
const (
	reuseCount = 8
	maxCached  = 256
	// pathDrift is how far (relative) the bandwidth or the RTT may move
	// before remembered decisions are made afresh.
	pathDrift = 0.2
)

type cacheKey struct {
	mime       string
	bucket     int
	restBucket int
}

type cacheEntry struct {
	d    Decision
	prof *Profile
	uses int
}

func (s *Scheme) reuse(d *Decision, mime string, n, rest int, path Path, prof *Profile) bool {
	key := cacheKey{mediaType(mime), bucketOf(n), bucketOf(rest)}
	s.mu.Lock()
	defer s.mu.Unlock()
	ce := s.cache[key]
	if ce == nil || ce.uses >= reuseCount || ce.prof != prof || drifted(ce.d.Path, path) {
		return false
	}
	ce.uses++
	*d = ce.d
	d.Size, d.Path, d.Explored, d.Shadowed = n, path, false, nil
	d.Chosen = d.Best
	// Reused decisions still fill the exploration budget.
	s.tokens += time.Duration(float64(d.Estimates[d.Best].Total) * s.explore.Share)
	return true
}

func (s *Scheme) remember(d Decision, mime string, n, rest int, prof *Profile) {
	key := cacheKey{mediaType(mime), bucketOf(n), bucketOf(rest)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil || len(s.cache) >= maxCached {
		s.cache = make(map[cacheKey]*cacheEntry)
	}
	s.cache[key] = &cacheEntry{d: d, prof: prof}
}

func drifted(a, b Path) bool {
	rel := func(x, y float64) bool { return math.Abs(x-y) > pathDrift*math.Max(x, y) }
	return rel(a.Bandwidth, b.Bandwidth) || rel(float64(a.RTT), float64(b.RTT)) || a.Loss != b.Loss || a.InitWindow != b.InitWindow
}
