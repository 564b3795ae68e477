package adaptive

import (
	"math"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

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

func keyOf(mime string, n, rest int) cacheKey {
	return cacheKey{mediaType(mime), bucketOf(n), bucketOf(rest)}
}

// decide returns the decision for raw, with rest bytes of other content:
// a remembered one that stands, or one made afresh (fresh).
func (s *Scheme) decide(raw message.Element, rest int) (k kind, d Decision, fresh bool) {
	n := len(raw.Data)
	path, prof := s.current()
	key := keyOf(raw.MIME, n, rest)
	s.mu.Lock()
	if ce := s.cache[key]; ce != nil && ce.uses < reuseCount && ce.prof == prof && !drifted(ce.d.Path, path) {
		ce.uses++
		k, d = ce.k, ce.d
		s.mu.Unlock()
		d.Size, d.Trials = n, nil
		return k, d, false
	}
	s.mu.Unlock()
	k = classify(raw)
	d = s.decideAfresh(k, n, rest, path, prof)
	s.mu.Lock()
	if s.cache == nil || len(s.cache) >= maxCached {
		s.cache = make(map[cacheKey]*cacheEntry)
	}
	s.cache[key] = &cacheEntry{d: d, k: k, prof: prof, uses: 1}
	s.mu.Unlock()
	return k, d, true
}

// forget drops the remembered decision for elements like one of n bytes
// of type mime with rest bytes of other content.
func (s *Scheme) forget(mime string, n, rest int) {
	s.mu.Lock()
	delete(s.cache, keyOf(mime, n, rest))
	s.mu.Unlock()
}

func drifted(a, b Path) bool {
	rel := func(x, y float64) bool { return math.Abs(x-y) > pathDrift*max(x, y) }
	return rel(a.Bandwidth, b.Bandwidth) || rel(float64(a.RTT), float64(b.RTT)) || a.InitWindow != b.InitWindow
}
