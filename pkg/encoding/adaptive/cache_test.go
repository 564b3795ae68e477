package adaptive

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// stands must say what repricing would: that the remembered choice is
// still the best. Random estimates and paths, with and without slow start
// and loss, sizes scaled within a bucket.
func TestStandsAgreesWithRepricing(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	randPath := func() Path {
		p := Path{RTT: time.Duration(1+rng.IntN(200_000)) * time.Microsecond, Bandwidth: 1e3 * float64(1+rng.IntN(1e6))}
		if rng.IntN(3) == 0 {
			p.InitWindow = 10 * DefaultMSS
		}
		if rng.IntN(4) == 0 {
			p.Loss = rng.Float64() * 0.05
		}
		return p
	}
	var stood, moved int
	for range 20000 {
		n0 := 1 + rng.IntN(1<<20)
		n := n0 + rng.IntN(n0/4+1) - n0/8
		rest := rng.IntN(300)
		ests := make([]Estimate, 1+rng.IntN(7))
		ests[0] = Estimate{Spec: Identity, Size: n0}
		for i := 1; i < len(ests); i++ {
			ests[i] = Estimate{Size: 1 + rng.IntN(n0+64),
				Encode: time.Duration(rng.IntN(int(50 * time.Millisecond))), Decode: time.Duration(rng.IntN(int(10 * time.Millisecond)))}
		}
		old := randPath()
		reprice(ests, rest, old)
		b := best(ests)
		path := randPath()
		if rng.IntN(2) == 0 { // a drift, as a busy loopback's
			path = old
			path.RTT = time.Duration(float64(old.RTT) * (0.3 + 2*rng.Float64()))
			path.Bandwidth *= 0.5 + rng.Float64()
		}
		re := scaled(ests, n0, n)
		reprice(re, rest, path)
		want := best(re) == b
		if got := stands(ests, b, n0, n, rest, path); got != want {
			t.Fatalf("stands = %v, repricing says %v: n0 %d n %d rest %d, %+v → %+v, estimates %+v", got, want, n0, n, rest, old, path, ests)
		}
		if want {
			stood++
		} else {
			moved++
		}
	}
	if stood < 1000 || moved < 1000 {
		t.Fatalf("stood %d, moved %d: the cases should cover both", stood, moved)
	}
}

// On a fast path, elements sent as they are take the fast path (no lock,
// no map) without changing what the scheme does: each counts as a use of
// the remembered decision, the decision is made afresh after as many uses
// as reuse allows, its share of the exploration budget is paid in, and
// traces show what the lock's path would: a scheme kept off the fast path
// (slow) decides and traces the same.
func TestFastPathCountsLikeReuse(t *testing.T) {
	c, err := s2.New()
	if err != nil {
		t.Fatal(err)
	}
	var traced, viaLock []Decision
	newScheme := func(opts ...Option) *Scheme {
		s, err := New([]encoding.Codec{c}, append([]Option{WithoutCalibration(), WithModels(NewModels()),
			WithClock(&stillClock{}), WithPath(StaticPath(Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10}))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fast := newScheme(WithTrace(func(d Decision) { traced = append(traced, d) }))
	slow := newScheme(WithTrace(func(d Decision) { viaLock = append(viaLock, d) }))
	doc := encoding.Producer{}.XML("", "doc", bytes.Repeat([]byte("<a>payload</a>"), 100))
	var entries []*cacheEntry // the entry each element used
	for i := range 2*reuseCount + 2 {
		slow.mu.Lock()
		slow.dropFast()
		slow.mu.Unlock()
		for _, s := range []*Scheme{fast, slow} {
			out, err := s.Encode(message.New(doc))
			if err != nil {
				t.Fatal(err)
			}
			if encoding.IsEncoded(out.At(0)) {
				t.Fatalf("element %d encoded on a 10 GB/s path", i)
			}
		}
		if f := fast.fast.Load(); f != nil {
			entries = append(entries, f.entry)
		} else {
			entries = append(entries, nil)
		}
	}
	if len(traced) != len(entries) || len(viaLock) != len(entries) {
		t.Fatalf("%d and %d decisions traced, want %d", len(traced), len(viaLock), len(entries))
	}
	for i := range traced {
		if a, b := traced[i], viaLock[i]; a.Choice() != b.Choice() || a.Size != b.Size || a.SentSize != b.SentSize || a.Index != b.Index ||
			a.Path != b.Path || a.Kind != b.Kind || !slices.Equal(a.Estimates, b.Estimates) || a.Explored != b.Explored || len(a.Shadowed) != len(b.Shadowed) {
			t.Fatalf("element %d: traced %+v through the fast path, %+v through the lock", i, a, b)
		}
	}
	// Element 0 decides, 1 reuses through the lock and sets the fast
	// path, 2..reuseCount take it; reuseCount+1 decides afresh.
	e := entries[1]
	if e == nil {
		t.Fatal("no fast path after a reused decision to send as is")
	}
	for i := 2; i <= reuseCount; i++ {
		if entries[i] != e {
			t.Fatalf("element %d: fast path changed within the decision's uses", i)
		}
	}
	if got := e.uses; got < reuseCount {
		t.Fatalf("%d uses counted, want at least %d", got, reuseCount)
	}
	// Used up: the next element decided afresh, and the one after took
	// the fast path of the new decision.
	if entries[reuseCount+1] != nil || entries[reuseCount+2] == nil || entries[reuseCount+2] == e {
		t.Fatalf("after %d uses: fast paths %p then %p, want none then a new one", reuseCount, entries[reuseCount+1], entries[reuseCount+2])
	}
	fast.Wait()
	slow.Wait()
	fast.mu.Lock()
	fast.dropFast()
	tokens := fast.tokens
	fast.mu.Unlock()
	slow.mu.Lock()
	want := slow.tokens
	slow.mu.Unlock()
	if tokens != want {
		t.Fatalf("exploration budget %v through the fast path, %v through the lock", tokens, want)
	}
}

// Any change to a remembered decision under the lock drops the fast path.
func TestFastPathDroppedOnChange(t *testing.T) {
	c, err := s2.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New([]encoding.Codec{c}, WithoutCalibration(), WithModels(NewModels()), WithClock(&stillClock{}),
		WithPath(StaticPath(Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10})))
	if err != nil {
		t.Fatal(err)
	}
	doc := encoding.Producer{}.XML("", "doc", bytes.Repeat([]byte("<a>payload</a>"), 100))
	for range 2 {
		if _, err := s.Encode(message.New(doc)); err != nil {
			t.Fatal(err)
		}
	}
	if s.fast.Load() == nil {
		t.Fatal("no fast path")
	}
	s.surprised(doc.MIME, len(doc.Data), 0, false)
	if s.fast.Load() != nil {
		t.Fatal("fast path kept after a surprise")
	}
	if s.asIs("text/xml", 1400, 0) != nil {
		t.Fatal("asIs with no fast path")
	}
}

// The fast path is taken only by elements of the very MIME type it was
// set for, kept in place; a type too long to keep there goes through the
// lock and is sent as is all the same.
func TestFastPathMIME(t *testing.T) {
	c, err := s2.New()
	if err != nil {
		t.Fatal(err)
	}
	p := Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10}
	data := bytes.Repeat([]byte("<a>payload</a>"), 100)
	for _, tc := range []struct {
		mime string
		fast bool
	}{
		{"text/xml", true},
		{"application/xml;charset=utf-8", true},
		{"application/vnd.example.long+xml;charset=utf-8", false},
	} {
		t.Run(tc.mime, func(t *testing.T) {
			s, err := New([]encoding.Codec{c}, WithoutCalibration(), WithModels(NewModels()), WithClock(&stillClock{}), WithPath(StaticPath(p)))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				out, err := s.Encode(message.New(encoding.Producer{}.NewElement("", "doc", tc.mime, data)))
				if err != nil {
					t.Fatal(err)
				}
				if e := out.At(0); encoding.IsEncoded(e) || e.MIME != tc.mime {
					t.Fatalf("element %d sent as %q, want as is", i, e.MIME)
				}
			}
			if got := s.fast.Load() != nil; got != tc.fast {
				t.Fatalf("fast path set: %v, want %v", got, tc.fast)
			}
			if !tc.fast {
				return
			}
			// Same length, other type; then the type itself.
			other := []byte(tc.mime)
			other[0]++
			if s.asIs(string(other), len(data), 0) != nil {
				t.Fatalf("fast path taken by %q", other)
			}
			if s.asIs(tc.mime, len(data), 0) == nil {
				t.Fatalf("fast path not taken by %q", tc.mime)
			}
		})
	}
}

type stillClock struct{}

func (*stillClock) Now() time.Time { return time.Unix(1e6, 0) }

// The fast path checks the path every checkEvery uses: when the path
// slows down so that encoding wins, the elements after the next check are
// encoded.
func TestFastPathSeesPathChange(t *testing.T) {
	c, err := s2.New()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	p := Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10}
	s, err := New([]encoding.Codec{c}, WithoutCalibration(), WithModels(NewModels()), WithClock(&stillClock{}),
		WithExploration(NoExploration), WithPath(PathFunc(func() Path { mu.Lock(); defer mu.Unlock(); return p })))
	if err != nil {
		t.Fatal(err)
	}
	doc := encoding.Producer{}.XML("", "doc", bytes.Repeat([]byte("<a>payload</a>"), 1000))
	send := func() bool {
		out, err := s.Encode(message.New(doc))
		if err != nil {
			t.Fatal(err)
		}
		return encoding.IsEncoded(out.At(0))
	}
	for range 3 {
		if send() {
			t.Fatal("encoded on a 10 GB/s path")
		}
	}
	if s.fast.Load() == nil {
		t.Fatal("no fast path")
	}
	mu.Lock()
	p = Path{RTT: 30 * time.Millisecond, Bandwidth: 1e4}
	mu.Unlock()
	sent := 0
	for !send() {
		if sent++; sent > checkEvery {
			t.Fatalf("still sent as is %d elements after the path slowed down", sent)
		}
	}
}

// A codec is sent only when it is predicted to save more than
// identityMargin of sending as is.
func TestIdentityMargin(t *testing.T) {
	id := Estimate{Spec: Identity, Total: 1000 * time.Microsecond}
	for _, c := range []struct {
		name   string
		totals []time.Duration // of the codecs after identity
		want   int
	}{
		{"codec saves 1%", []time.Duration{990 * time.Microsecond}, 0},
		{"codec saves exactly 2%", []time.Duration{980 * time.Microsecond}, 0},
		{"codec saves 3%", []time.Duration{970 * time.Microsecond}, 1},
		{"codec slower", []time.Duration{1100 * time.Microsecond}, 0},
		{"best of two past the margin", []time.Duration{970 * time.Microsecond, 500 * time.Microsecond}, 2},
		{"best of two within it", []time.Duration{1100 * time.Microsecond, 985 * time.Microsecond}, 0},
		{"equal codecs: the first", []time.Duration{500 * time.Microsecond, 500 * time.Microsecond}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ests := []Estimate{id}
			for _, tot := range c.totals {
				ests = append(ests, Estimate{Spec: "x", Total: tot})
			}
			if got := best(ests); got != c.want {
				t.Fatalf("best = %d, want %d", got, c.want)
			}
		})
	}
}

// What asIs reads and writes per element is one cache line: the allocator
// puts a 64-byte object on one.
func TestFastPathFitsACacheLine(t *testing.T) {
	if n := unsafe.Sizeof(fastPath{}); n != 64 {
		t.Fatalf("fastPath is %d bytes, want 64 (one cache line)", n)
	}
}

// The fast path reserves its entry's remaining uses; dropped, it gives
// back those it did not take, and a dropped fast path is not taken.
func TestDroppedFastPathReturnsItsUses(t *testing.T) {
	c, err := s2.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New([]encoding.Codec{c}, WithoutCalibration(), WithModels(NewModels()), WithClock(&stillClock{}),
		WithExploration(NoExploration), WithPath(StaticPath(Path{RTT: 30 * time.Microsecond, Bandwidth: 1e10})))
	if err != nil {
		t.Fatal(err)
	}
	doc := encoding.Producer{}.XML("", "doc", bytes.Repeat([]byte("<a>payload</a>"), 100))
	for range 2 { // decide, then reuse: the reuse sets the fast path
		if _, err := s.Encode(message.New(doc)); err != nil {
			t.Fatal(err)
		}
	}
	f := s.fast.Load()
	if f == nil {
		t.Fatal("no fast path")
	}
	s.mu.Lock()
	reserved := f.entry.uses // the reuse's own and the fast path's quota
	s.mu.Unlock()
	mime := encoding.Unmark(doc).MIME
	for i := range 3 {
		if s.asIs(mime, len(doc.Data), 0) == nil {
			t.Fatalf("use %d: fast path not taken", i)
		}
	}
	s.mu.Lock()
	s.dropFast()
	got, want := f.entry.uses, reserved-f.quota+3
	s.mu.Unlock()
	if got != want {
		t.Fatalf("entry counts %d uses after 3 on the fast path, want %d", got, want)
	}
	if f.left.Load() >= 0 {
		t.Fatalf("dropped fast path has %d uses left", f.left.Load())
	}
	s.fast.Store(f) // as if a racing element still held it
	if s.asIs(mime, len(doc.Data), 0) != nil {
		t.Fatal("a dropped fast path was taken")
	}
}
