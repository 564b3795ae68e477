package adaptive

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Models is what a node has learned: per codec and level, the compressed
// size and encode time of each kind of content as functions of size; its
// own decode speeds (the profile it shares with senders); and per peer the
// last measured path and decode profile. Schemes on one node share one
// Models. It is safe for concurrent use, and Save and Load keep it across
// restarts.
type Models struct {
	mu     sync.Mutex
	seq    uint64
	codecs map[string]*codecStats // by spec, "zstd:3"
	decode map[string]*decodeStats
	peers  map[string]PeerRecord
	// firstSight remembers which candidates were trialled on which kind
	// and size, with the best's predicted time then (not persisted: a
	// restarted node may look once more).
	firstSight map[sightKey]time.Duration
	// decGen counts changes to decode; cpu caches cpuFactor for one
	// profile at one decGen (it reads every curve of both: tens of
	// microseconds, on every fresh decision otherwise).
	decGen uint64
	cpu    struct {
		prof *Profile
		gen  uint64
		f    float64
	}
}

type sightKey struct {
	spec   string
	kind   Kind
	bucket int
}

// codecStats is what is known of one codec at one level.
type codecStats struct {
	// size is the payload size (bytes out, header excluded) by kind, and
	// class the same for all kinds of one compressibility class.
	size  map[Kind]*curve
	class [NumClasses]curve
	// enc is the encode time in nanoseconds by compressibility class.
	enc [NumClasses]curve
}

// decodeStats is one codec's decode time in nanoseconds by ratio class.
type decodeStats struct {
	c [numRatioClasses]curve
}

// PeerRecord is what a node remembers of a peer between sessions.
type PeerRecord struct {
	Path      Path
	PathAt    time.Time // when Path was measured; zero if never
	Profile   *Profile  // the peer's decode profile, nil if none
	ProfileAt time.Time
}

// NewModels returns empty models.
func NewModels() *Models {
	return &Models{
		codecs:     make(map[string]*codecStats),
		decode:     make(map[string]*decodeStats),
		peers:      make(map[string]PeerRecord),
		firstSight: make(map[sightKey]time.Duration),
	}
}

func (m *Models) stats(spec string) *codecStats {
	s := m.codecs[spec]
	if s == nil {
		s = &codecStats{size: make(map[Kind]*curve)}
		m.codecs[spec] = s
	}
	return s
}

// RecordEncode records that encoding n bytes of kind k with the codec spec
// took d and produced a payload of out bytes (header excluded).
func (m *Models) RecordEncode(spec string, k Kind, n, out int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recordEncode(spec, k, n, out, d, true)
}

func (m *Models) recordEncode(spec string, k Kind, n, out int, d time.Duration, exact bool) {
	m.seq++
	s := m.stats(spec)
	c := k.Class % NumClasses
	if exact {
		kc := s.size[k]
		if kc == nil {
			kc = new(curve)
			s.size[k] = kc
		}
		kc.add(n, float64(out), m.seq, false)
	}
	s.class[c].add(n, float64(out), m.seq, false)
	s.enc[c].add(n, float64(d.Nanoseconds()), m.seq, true)
}

// RecordDecode records that decoding in bytes with the named codec into n
// bytes took d.
func (m *Models) RecordDecode(codec string, n, in int, d time.Duration) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.decGen++
	s := m.decode[codec]
	if s == nil {
		s = new(decodeStats)
		m.decode[codec] = s
	}
	s.c[ratioClass(float64(in)/float64(n))].add(n, float64(d.Nanoseconds()), m.seq, true)
}

// cpuFactor is cpuFactor(p, m.decode), cached; m.mu is held.
func (m *Models) cpuFactor(p *Profile) float64 {
	if c := &m.cpu; c.prof != p || c.gen != m.decGen || c.f == 0 {
		c.prof, c.gen, c.f = p, m.decGen, cpuFactor(p, m.decode)
	}
	return m.cpu.f
}

// Profile returns this node's decode profile, for its peers.
func (m *Models) Profile() *Profile {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &Profile{dec: make(map[string]*decodeStats, len(m.decode))}
	for name, s := range m.decode {
		c := *s
		p.dec[name] = &c
	}
	return p
}

// hasDecode reports whether anything is known of decoding with codec.
func (m *Models) hasDecode(codec string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.decode[codec]
	if s == nil {
		return false
	}
	for i := range s.c {
		if !s.c[i].empty() {
			return true
		}
	}
	return false
}

// hasEncode reports whether anything is known of encoding with spec.
func (m *Models) hasEncode(spec string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.codecs[spec]
	if s == nil {
		return false
	}
	for i := range s.enc {
		if !s.enc[i].empty() {
			return true
		}
	}
	return false
}

// Peer returns what is remembered of the peer with the given key.
func (m *Models) Peer(key string) (PeerRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.peers[key]
	return r, ok
}

// SetPeer remembers a peer.
func (m *Models) SetPeer(key string, r PeerRecord) {
	if len(key) > maxString {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.peers[key]; !ok && len(m.peers) >= maxPeers {
		// Forget the peer measured longest ago.
		oldest, at := "", time.Time{}
		for k, r := range m.peers {
			if oldest == "" || r.PathAt.Before(at) {
				oldest, at = k, r.PathAt
			}
		}
		delete(m.peers, oldest)
	}
	m.peers[key] = r
}

// Specs returns the codec specs the models know, sorted.
func (m *Models) Specs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.codecs))
}

// sizeEstimate is a predicted payload size and how well it is known.
type sizeEstimate struct {
	bytes float64
	known bool // measured for this kind within one bucket of this size
	dist  int  // buckets to the nearest measurement used; numBuckets if a prior
	seq   uint64
	w     float64 // samples behind it, when known
	dev   float64 // how far its samples were from it (point.dev), when known
}

// predictSize predicts the payload size of n bytes of kind k encoded with
// spec. Measured for this kind within a bucket of n, it is that. Otherwise
// it is the best-anchored of: the spec's own curve for the kind or for the
// class, extrapolated; or another candidate's measurement at this size,
// scaled by the two codecs' relative ratio where both were measured
// (compression ratios move together with size), for the kind or the
// class. Best-anchored is nearest in size to what it extrapolates from,
// class-level estimates counting one bucket further; with nothing at all,
// a prior by class.
func (m *Models) predictSize(spec string, k Kind, n int, peers []string) sizeEstimate {
	s := m.codecs[spec]
	if s == nil {
		return sizeEstimate{bytes: float64(n) * priorRatio[k.Class%NumClasses], dist: numBuckets}
	}
	b := bucketOf(n)
	kc := s.size[k]
	if kc != nil {
		if l := kc.at(n, true); l.ok && l.dist <= 1 {
			return sizeEstimate{bytes: l.y, known: true, dist: l.dist, seq: l.seq, w: l.w, dev: l.dev}
		}
	}
	best := sizeEstimate{dist: numBuckets + 1}
	consider := func(e sizeEstimate, ok bool) {
		if ok && e.dist < best.dist {
			best = e
		}
	}
	c := k.Class % NumClasses
	for level, own := range []*curve{kc, &s.class[c]} {
		if own == nil {
			continue
		}
		pick := func(cs *codecStats) *curve { return cs.size[k] }
		if level == 1 {
			pick = func(cs *codecStats) *curve { return &cs.class[c] }
		}
		if l := own.at(n, true); l.ok {
			consider(sizeEstimate{bytes: l.y, dist: l.dist + level, seq: l.seq}, true)
		}
		e, ok := m.relative(own, n, b, peers, pick)
		e.dist += level
		consider(e, ok)
	}
	if best.dist > numBuckets {
		return sizeEstimate{bytes: float64(n) * priorRatio[c], dist: numBuckets}
	}
	return best
}

// priorRatio is the payload/input ratio assumed for a class nothing is
// known of.
var priorRatio = [NumClasses]float64{1.0, 0.8, 0.5, 0.25}

func (m *Models) relative(own *curve, n, b int, peers []string, pick func(*codecStats) *curve) (sizeEstimate, bool) {
	best := sizeEstimate{dist: numBuckets + 1}
	bestW := 0.0
	for _, p := range peers {
		ps := m.codecs[p]
		if ps == nil {
			continue
		}
		pc := pick(ps)
		if pc == nil {
			continue
		}
		here := pc.at(n, true)
		if !here.ok || here.dist > 1 {
			continue
		}
		// The nearest bucket where both were measured.
		for d := 0; d < numBuckets && d <= best.dist; d++ {
			for _, i := range []int{b - d, b + d} {
				if i < 0 || i >= numBuckets {
					continue
				}
				ro, ok1 := own.ratioAt(i)
				rp, ok2 := pc.ratioAt(i)
				if !ok1 || !ok2 || rp <= 0 {
					continue
				}
				if d < best.dist || d == best.dist && here.w > bestW {
					best = sizeEstimate{bytes: here.y * ro / rp, dist: d, seq: own.p[i].seq}
					bestW = here.w
				}
			}
		}
	}
	return best, best.dist <= numBuckets
}

// timeEstimate is a predicted duration and how well it is known.
type timeEstimate struct {
	d     time.Duration
	known bool
	seq   uint64
	w     float64
}

// predictEncode predicts the time to encode n bytes of class c with spec.
func (m *Models) predictEncode(spec string, c uint8, n int) timeEstimate {
	s := m.codecs[spec]
	if s == nil {
		return timeEstimate{d: priorEncode(n)}
	}
	if l := s.enc[c%NumClasses].at(n, false); l.ok {
		return timeEstimate{d: time.Duration(l.y), known: l.dist <= 1, seq: l.seq, w: l.w}
	}
	// Another class of the same codec.
	for i := range s.enc {
		if l := s.enc[i].at(n, false); l.ok {
			return timeEstimate{d: time.Duration(l.y), seq: l.seq}
		}
	}
	return timeEstimate{d: priorEncode(n)}
}

// priorEncode is the encode time assumed for a codec nothing is known of:
// 50 µs plus 20 ns per byte (50 MB/s), a middling level of a middling
// codec.
func priorEncode(n int) time.Duration {
	return 50*time.Microsecond + time.Duration(n)*20*time.Nanosecond
}

// decodeTime predicts the time to decode into n bytes with codec when the
// payload is about ratio·n bytes, from decode stats.
func (s *decodeStats) at(n int, ratio float64) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	rc := ratioClass(ratio)
	if l := s.c[rc].at(n, false); l.ok {
		return time.Duration(l.y), true
	}
	// The nearest ratio class with data.
	for d := 1; d < numRatioClasses; d++ {
		for _, i := range []int{rc - d, rc + d} {
			if i >= 0 && i < numRatioClasses {
				if l := s.c[i].at(n, false); l.ok {
					return time.Duration(l.y), true
				}
			}
		}
	}
	return 0, false
}

// localDecode predicts this node's own decode time.
func (m *Models) localDecode(codec string, n int, ratio float64) (time.Duration, bool) {
	return m.decode[codec].at(n, ratio)
}

// priorDecode is the decode time assumed when neither the receiver nor
// this node knows the codec: 20 µs plus 4 ns per byte.
func priorDecode(n int) time.Duration {
	return 20*time.Microsecond + time.Duration(n)*4*time.Nanosecond
}
