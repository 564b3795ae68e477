package adaptive

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Models is what a node has learned: per codec and level, the encoded
// size and encode time of each kind of content as functions of size; its
// own decode times (the profile it shares with senders); and per peer the
// last measured path and decode profile. Schemes on one node share one
// Models. It is safe for concurrent use, and Save and Load keep it across
// restarts.
type Models struct {
	mu     sync.Mutex
	codecs map[string]*codecStats // by spec, "zstd:3"
	decode map[string]*decodeStats
	peers  map[string]PeerRecord
	// tried remembers the first-sight trials made (not persisted: a
	// restarted node may look once more).
	tried map[trialKey]bool
}

type trialKey struct {
	spec   string
	kind   kind
	bucket int
}

// codecStats is what is known of one codec at one level: the encoded
// size (header included) by kind, the same for all kinds of a class
// (what calibration and other media types teach), and the encode time in
// nanoseconds by class.
type codecStats struct {
	size  map[kind]*curve
	class [numClasses]curve
	enc   [numClasses]curve
}

// decodeStats is one codec's decode time in nanoseconds by ratio class.
type decodeStats [numRatioClasses]curve

// PeerRecord is what a node remembers of a peer between sessions.
type PeerRecord struct {
	Path    Path
	Profile *Profile  // the peer's decode profile, nil if none
	At      time.Time // when Path was measured; zero if never
}

// maxPeers bounds the peers a Models remembers; the one measured longest
// ago is forgotten first.
const maxPeers = 4096

// NewModels returns empty models.
func NewModels() *Models {
	return &Models{codecs: map[string]*codecStats{}, decode: map[string]*decodeStats{},
		peers: map[string]PeerRecord{}, tried: map[trialKey]bool{}}
}

func (m *Models) stats(spec string) *codecStats {
	s := m.codecs[spec]
	if s == nil {
		s = &codecStats{size: make(map[kind]*curve)}
		m.codecs[spec] = s
	}
	return s
}

// recordEncode records that encoding n bytes of kind k with spec took d
// and gave out bytes, header included.
func (m *Models) recordEncode(spec string, k kind, n, out int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats(spec)
	kc := s.size[k]
	if kc == nil {
		kc = new(curve)
		s.size[k] = kc
	}
	kc.add(n, float64(out), false)
	s.class[k.class].add(n, float64(out), false)
	s.enc[k.class].add(n, float64(d), true)
}

// recordDecode records that decoding in bytes with the named codec into
// n bytes took d.
func (m *Models) recordDecode(codec string, n, in int, d time.Duration) {
	if n <= 0 || len(codec) > maxString {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.decode[codec]
	if s == nil {
		if len(m.decode) >= maxCodecs {
			return
		}
		s = new(decodeStats)
		m.decode[codec] = s
	}
	s[ratioClass(float64(in)/float64(n))].add(n, float64(d), true)
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

// knows reports whether anything is known of encoding with spec and of
// decoding with the codec it names.
func (m *Models) knows(spec, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.codecs[spec]
	if s == nil || m.decode[name] == nil {
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
		oldest := ""
		for k, o := range m.peers {
			if oldest == "" || o.At.Before(m.peers[oldest].At) {
				oldest = k
			}
		}
		delete(m.peers, oldest)
	}
	m.peers[key] = r
}

// predictSize predicts the encoded size of n bytes of kind k with spec,
// and whether it was measured for this kind within a bucket of n: from
// the kind's curve, else the class's, else a prior by class.
func (m *Models) predictSize(spec string, k kind, n int) (int, bool) {
	s := m.codecs[spec]
	if s != nil {
		if kc := s.size[k]; kc != nil {
			if l := kc.at(n, true); l.ok {
				return int(l.y + 0.5), l.dist <= 1
			}
		}
		if l := s.class[k.class].at(n, true); l.ok {
			return int(l.y + 0.5), false
		}
	}
	return int(float64(n) * priorRatio[k.class]), false
}

// priorRatio is the ratio assumed for a class nothing is known of: the
// classes' bounds on klauspost's estimate, read as ratios.
var priorRatio = [numClasses]float64{1.0, 0.8, 0.5, 0.25}

// predictEncode predicts the time to encode n bytes of class c with spec,
// and whether it was measured within a bucket of n.
func (m *Models) predictEncode(spec string, c uint8, n int) (time.Duration, bool) {
	if s := m.codecs[spec]; s != nil {
		if l := s.enc[c].at(n, false); l.ok {
			return time.Duration(l.y), l.dist <= 1
		}
		for i := range s.enc { // another class of the same codec
			if l := s.enc[i].at(n, false); l.ok {
				return time.Duration(l.y), false
			}
		}
	}
	return priorEncode(n), false
}

// priorEncode is the encode time assumed for a codec nothing is known of:
// 50 µs plus 20 ns per byte (50 MB/s), a middling level of a middling
// codec; calibration replaces it when a scheme is made.
func priorEncode(n int) time.Duration {
	return 50*time.Microsecond + time.Duration(n)*20*time.Nanosecond
}

// priorDecode is the decode time assumed when neither the receiver nor
// this node knows the codec: 20 µs plus 4 ns per byte (250 MB/s), a
// middling decoder.
func priorDecode(n int) time.Duration {
	return 20*time.Microsecond + time.Duration(n)*4*time.Nanosecond
}

// at predicts the decode time into n bytes when the payload is about
// ratio·n bytes: from the ratio class, else the nearest with data.
func (s *decodeStats) at(n int, ratio float64) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	rc := ratioClass(ratio)
	for d := range numRatioClasses {
		for _, i := range []int{rc - d, rc + d} {
			if i >= 0 && i < numRatioClasses {
				if l := s[i].at(n, false); l.ok {
					return time.Duration(l.y), true
				}
			}
		}
	}
	return 0, false
}

// firstTry reports whether spec has not been tried on kind k at size n
// yet, and marks it tried.
func (m *Models) firstTry(spec string, k kind, n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := trialKey{spec, k, bucketOf(n)}
	if m.tried[key] {
		return false
	}
	m.tried[key] = true
	return true
}

// TimeDecodes is the option of encoding.NewDecoder (and DecodeElement)
// that times every decode into m, with clock (nil: the system clock): what
// a receiver learns the decode Profile it serves its senders from.
func (m *Models) TimeDecodes(clock Clock) encoding.Option {
	if clock == nil {
		clock = systemClock{}
	}
	return encoding.WithDecodeWrap(func(c encoding.Codec) encoding.Codec {
		return &timedCodec{Codec: c, models: m, clock: clock}
	})
}

// timedCodec times its codec's decodes into the models.
type timedCodec struct {
	encoding.Codec
	models *Models
	clock  Clock
}

// Kind is the timed codec's kind, so that nesting rules see through the
// timing.
func (t *timedCodec) Kind() encoding.Kind { return encoding.KindOf(t.Codec) }

func (t *timedCodec) Decode(dst, src []byte, p encoding.Params, b encoding.Binding, max int) ([]byte, error) {
	t0 := t.clock.Now()
	out, err := t.Codec.Decode(dst, src, p, b, max)
	if err == nil {
		t.models.recordDecode(t.Codec.Name(), len(out)-len(dst), len(src), t.clock.Now().Sub(t0))
	}
	return out, err
}

// calibrationSizes are the sizes of the built-in sample documents: one
// small, one middling, one large element, so that every curve has points
// to interpolate between.
var calibrationSizes = []int{1 << 10, 16 << 10, 128 << 10}

// calibrationSamples are synthetic XML documents (records with IDs,
// names, dates, amounts and free text from a fixed generator) of
// calibrationSizes.
var calibrationSamples = sync.OnceValue(func() [][]byte {
	words := []string{"order", "shipment", "invoice", "customer", "pallet", "urgent", "delivery", "warehouse",
		"payment", "contact", "priority", "express", "pending", "damaged", "replacement", "account"}
	names := []string{"Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jana"}
	var out [][]byte
	for _, size := range calibrationSizes {
		rng := rand.New(rand.NewPCG(uint64(size), 0x63616c))
		var b bytes.Buffer
		b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<records>\n")
		for id := 1000; b.Len() < size-200; id++ {
			b.WriteString("  <record id=\"" + strconv.Itoa(id) + "\">\n    <name>" + names[rng.IntN(len(names))] + " " +
				names[rng.IntN(len(names))] + "son</name>\n    <date>2004-0" + strconv.Itoa(1+rng.IntN(9)) + "-" +
				strconv.Itoa(10+rng.IntN(18)) + "</date>\n    <amount>" + strconv.Itoa(rng.IntN(100000)) + "</amount>\n    <note>")
			for w := 3 + rng.IntN(8); w > 0; w-- {
				b.WriteString(words[rng.IntN(len(words))] + " ")
			}
			b.WriteString("</note>\n  </record>\n")
		}
		b.WriteString("</records>\n")
		out = append(out, b.Bytes())
	}
	return out
})

// calibrate measures each codec on the built-in samples: size and encode
// time go into the class-level curves of the samples' class, the decode
// time into this node's profile. Each is the faster of two runs after a
// warm-up (pools, tables), so that one descheduled run does not stand; a
// codec that takes more than calibrationBudget on a sample is
// extrapolated beyond it, and one that fails on the samples is skipped.
func (m *Models) calibrate(codecs []encoding.Codec, clock Clock) {
	b := encoding.Binding{Namespace: "adaptive", Name: "calibration"}
	for _, c := range codecs {
		if _, err := c.Encode(nil, calibrationSamples()[0], b); err != nil {
			continue
		}
		for _, doc := range calibrationSamples() {
			k := classify(message.Element{MIME: message.XMLUTF8, Data: doc})
			var enc []byte
			dt, err := fastest(clock, func() (err error) { enc, err = c.Encode(enc[:0], doc, b); return err })
			if err != nil {
				break
			}
			m.mu.Lock()
			s := m.stats(specOf(c))
			s.class[k.class].add(len(doc), float64(len(enc)+headerEstimate), false)
			s.enc[k.class].add(len(doc), float64(dt), true)
			m.mu.Unlock()
			m.calibrateDecode(c, enc, len(doc), b, clock)
			if dt > calibrationBudget {
				break
			}
		}
	}
}

// calibrationBudget stops a codec's calibration at the first sample whose
// encode takes longer: a new scheme is made in tens of milliseconds.
const calibrationBudget = 5 * time.Millisecond

// headerEstimate is what an encoded element's header adds to a codec's
// payload (magic, codec name, level, MIME type, size): calibration
// measures the payload alone.
const headerEstimate = 32

// CalibrateDecode measures decoding with every codec of reg that nothing
// is known of yet on the built-in samples, so that this node's profile
// covers them before it has received any. Codecs that cannot encode the
// samples with their defaults (a key is missing) are skipped.
func (m *Models) CalibrateDecode(reg *encoding.Registry, clock Clock) {
	if clock == nil {
		clock = systemClock{}
	}
	b := encoding.Binding{Namespace: "adaptive", Name: "calibration"}
	for _, name := range reg.Names() {
		m.mu.Lock()
		known := m.decode[name] != nil
		m.mu.Unlock()
		c, err := reg.Lookup(name)
		if known || err != nil {
			continue
		}
		for _, doc := range calibrationSamples() {
			enc, err := c.Encode(nil, doc, b)
			if err != nil {
				break
			}
			m.calibrateDecode(c, enc, len(doc), b, clock)
		}
	}
}

func (m *Models) calibrateDecode(c encoding.Codec, enc []byte, n int, b encoding.Binding, clock Clock) {
	dst := make([]byte, 0, n)
	dt, err := fastest(clock, func() error {
		out, err := c.Decode(dst, enc, c.Params(), b, n)
		if err == nil && len(out) != n {
			err = encoding.ErrCorrupt
		}
		return err
	})
	if err == nil {
		m.recordDecode(c.Name(), n, len(enc), dt)
	}
}

// fastest runs f three times, the first as a warm-up, and returns the
// faster of the other two.
func fastest(clock Clock, f func() error) (time.Duration, error) {
	var best time.Duration
	for i := range 3 {
		t0 := clock.Now()
		if err := f(); err != nil {
			return 0, err
		}
		if d := clock.Now().Sub(t0); i == 1 || i == 2 && d < best {
			best = d
		}
	}
	return best, nil
}

// Specs returns the codec specs the models know, sorted.
func (m *Models) Specs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.codecs))
}
