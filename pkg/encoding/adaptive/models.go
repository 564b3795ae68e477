package adaptive

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Models is what a node has learned: per codec and level, the encoded
// size and encode time of each kind of content as functions of size, and
// its own decode times (the profile it shares with senders). Schemes on
// one node share one Models. It is safe for concurrent use, and Save and
// Load keep it across restarts. Paths are not kept: they change, and a
// probe costs less than a session's setup.
type Models struct {
	mu     sync.Mutex
	codecs map[string]*codecStats // by spec, "zstd:3"
	own    Profile                // this node's decode times, under mu (Profile copies them)
	// tried remembers the first-sight trials made (not persisted: a
	// restarted node may look once more), at most maxTried.
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
	Size  map[kind]*curve   `json:"size"`
	Class [numClasses]curve `json:"class"`
	Enc   [numClasses]curve `json:"encode"`
}

// NewModels returns empty models.
func NewModels() *Models {
	return &Models{codecs: map[string]*codecStats{}, own: Profile{dec: map[string]*curve{}}, tried: map[trialKey]bool{}}
}

// recordEncode records that encoding n bytes of kind k with spec took d
// and gave out bytes, header included. Unless ofKind, only k's class
// learns it: calibration's samples are not the user's content. Beyond
// maxCodecs specs, new ones are not kept (a models file holds at most
// that many).
func (m *Models) recordEncode(spec string, k kind, ofKind bool, n, out int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.codecs[spec]
	if s == nil {
		s = &codecStats{Size: make(map[kind]*curve)}
		if len(m.codecs) < maxCodecs {
			m.codecs[spec] = s
		}
	}
	kc := s.Size[k]
	if ofKind && kc == nil && len(s.Size) < maxKinds { // beyond, the class's curve serves
		kc = new(curve)
		s.Size[k] = kc
	}
	if ofKind && kc != nil {
		kc.add(n, float64(out), false)
	}
	s.Class[k.class].add(n, float64(out), false)
	s.Enc[k.class].add(n, float64(d), true)
}

// recordDecode records that decoding with the named codec into n bytes
// took d.
func (m *Models) recordDecode(codec string, n int, d time.Duration) {
	if n <= 0 || len(codec) > maxString {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.own.dec[codec]
	if s == nil {
		if len(m.own.dec) >= maxCodecs {
			return
		}
		s = new(curve)
		m.own.dec[codec] = s
	}
	s.add(n, float64(d), true)
}

// Profile returns this node's decode profile, for its peers.
func (m *Models) Profile() *Profile {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &Profile{dec: make(map[string]*curve, len(m.own.dec))}
	for name, s := range m.own.dec {
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
	return s != nil && m.own.dec[name] != nil && slices.ContainsFunc(s.Enc[:], func(c curve) bool { return !c.empty() })
}

// predictSize predicts the encoded size of n bytes of kind k with spec,
// and whether it was measured for this kind within a bucket of n: from
// the kind's curve, else the class's, else a prior by class.
func (m *Models) predictSize(spec string, k kind, n int) (int, bool) {
	if s := m.codecs[spec]; s != nil {
		if kc := s.Size[k]; kc != nil {
			if y, dist, ok := kc.at(n, true); ok {
				return int(y + 0.5), dist <= 1
			}
		}
		if y, _, ok := s.Class[k.class].at(n, true); ok {
			return int(y + 0.5), false
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
		if y, dist, ok := s.Enc[c].at(n, false); ok {
			return time.Duration(y), dist <= 1
		}
		for i := range s.Enc { // another class of the same codec
			if y, _, ok := s.Enc[i].at(n, false); ok {
				return time.Duration(y), false
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

// decodeTime predicts the receiver's time decoding into n bytes with the
// named codec, from its profile prof; where that does not say, as fast as
// this node, or else priorDecode. m.mu held.
func (m *Models) decodeTime(prof *Profile, codec string, n int) time.Duration {
	if d, ok := prof.decodeTime(codec, n); ok {
		return d
	}
	if d, ok := m.own.decodeTime(codec, n); ok {
		return d
	}
	return priorDecode(n)
}

// priorDecode is the decode time assumed when neither the receiver nor
// this node knows the codec: 20 µs plus 4 ns per byte (250 MB/s), a
// middling decoder.
func priorDecode(n int) time.Duration {
	return 20*time.Microsecond + time.Duration(n)*4*time.Nanosecond
}

// maxTried bounds the first-sight trials remembered: as many as the size
// curves a models file keeps of one codec (maxKinds), for each of the
// size buckets a kind's elements commonly span (4). Kinds are the media
// types the application's content declares: a node forwarding its peers'
// content would otherwise remember every type they named.
const maxTried = 4 * maxKinds

// firstTry reports whether spec has not been tried on kind k at size n
// yet, and marks it tried.
func (m *Models) firstTry(spec string, k kind, n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := trialKey{spec, k, bucketOf(n)}
	if m.tried[key] {
		return false
	}
	if len(m.tried) >= maxTried {
		clear(m.tried) // forgetting costs a trial more per codec, kind and size
	}
	m.tried[key] = true
	return true
}

// TimeDecodes is the option of encoding.NewDecoder (and DecodeElement)
// that times every decode of an element the decoder accepts into m: what
// a receiver learns the decode Profile it serves its senders from. A
// refused element teaches it nothing: a hostile peer chose its decode's
// cost (a payload that decodes to other than its header records).
func (m *Models) TimeDecodes() encoding.Option {
	return encoding.WithDecodeWrap(func(c encoding.Codec) encoding.Codec {
		return &timedCodec{Codec: c, models: m}
	})
}

// timedCodec times its codec's decode of one layer, and records it into
// the models once the encoding layer accepts the element.
type timedCodec struct {
	encoding.Codec
	models *Models
	n      int           // bytes the decode gave, 0 until one succeeds
	took   time.Duration // how long it took
}

var _ encoding.DecodeAccepter = (*timedCodec)(nil)

func (t *timedCodec) Decode(dst, src []byte, p encoding.Params, b encoding.Binding, max int) ([]byte, error) {
	t0 := time.Now()
	out, err := t.Codec.Decode(dst, src, p, b, max)
	if err == nil {
		t.n, t.took = len(out)-len(dst), time.Since(t0)
	}
	return out, err
}

// Accepted records the decode: the element it was a layer of was accepted.
func (t *timedCodec) Accepted() {
	t.models.recordDecode(t.Codec.Name(), t.n, t.took)
}

// calibrationSizes are the sizes of the built-in sample documents: one
// small, one middling, one large element, so that every curve has points
// to interpolate between.
var calibrationSizes = []int{1 << 10, 16 << 10, 128 << 10}

// calibrationSamples are synthetic XML documents of calibrationSizes:
// records with IDs, names, amounts and words from a fixed generator.
var calibrationSamples = sync.OnceValue(func() [][]byte {
	words := strings.Fields("order shipment invoice customer pallet urgent delivery warehouse Anna Boris Chen Dana Emil Fatima")
	rng := rand.New(rand.NewPCG(1, 0x63616c))
	var out [][]byte
	for _, size := range calibrationSizes {
		b := []byte("<?xml version=\"1.0\"?>\n<records>\n")
		for id := 1000; len(b) < size-100; id++ {
			b = fmt.Appendf(b, "  <record id=\"%d\"><name>%s %s</name><amount>%d</amount><note>%s %s %s</note></record>\n", id,
				words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(1e5),
				words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))])
		}
		out = append(out, append(b, "</records>\n"...))
	}
	return out
})

// calibrate measures each codec on the built-in samples: size and encode
// time go into the class-level curves of the samples' class, the decode
// time into this node's profile. Each is the faster of two runs after a
// warm-up (pools, tables), so that one descheduled run does not stand; a
// codec that takes more than calibrationBudget on a sample is
// extrapolated beyond it, and one that fails on the samples (a key is
// missing) is skipped.
func (m *Models) calibrate(codecs []encoding.Codec) {
	b := encoding.Binding{Namespace: "adaptive", Name: "calibration"}
	for _, c := range codecs {
		for _, doc := range calibrationSamples() {
			var enc []byte
			dt, err := fastest(func() (err error) { enc, err = c.Encode(enc[:0], doc, b); return err })
			if err != nil {
				break
			}
			dst := make([]byte, 0, len(doc))
			dec, err := fastest(func() error {
				out, err := c.Decode(dst, enc, c.Params(), b, len(doc))
				if err == nil && len(out) != len(doc) {
					err = encoding.ErrCorrupt
				}
				return err
			})
			if err != nil {
				break
			}
			m.recordDecode(c.Name(), len(doc), dec)
			k := classify(message.Element{MIME: message.XMLUTF8, Data: doc})
			m.recordEncode(specOf(c), k, false, len(doc), len(enc)+headerEstimate, dt)
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

// CalibrateDecode measures every codec of reg that nothing is known of
// yet on the built-in samples, so that this node's profile covers them
// before it has received any (and its encodes are known when it sends).
func (m *Models) CalibrateDecode(reg *encoding.Registry) {
	var todo []encoding.Codec
	m.mu.Lock()
	for _, name := range reg.Names() {
		if c, err := reg.Lookup(name); err == nil && m.own.dec[name] == nil {
			todo = append(todo, c)
		}
	}
	m.mu.Unlock()
	m.calibrate(todo)
}

// fastest runs f three times, the first as a warm-up, and returns the
// faster of the other two.
func fastest(f func() error) (time.Duration, error) {
	var best time.Duration
	for i := range 3 {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		if d := time.Since(t0); i == 1 || i == 2 && d < best {
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
