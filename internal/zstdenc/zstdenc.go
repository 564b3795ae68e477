// Package zstdenc gives the zstd-based codecs (pkg/encoding/zstd,
// pkg/encoding/xmlc) an encoder for github.com/klauspost/compress/zstd's
// EncodeAll that allocates for the input it has, not for the level's
// window, and encodes as many inputs at once as its callers give it.
//
// An encoder keeps a history buffer of twice its window (a window of 8
// MiB at every level but the fastest, 4 MiB there), allocated at the first
// encode that needs it however small the input: at the better and best
// levels every input, at the others any input larger than one block.
// Inputs that fit a smaller window get the same bytes from an encoder with
// that window, since no match can reach further back than the input (and
// the dictionary) holds: Encoder sends them to one, and only larger inputs
// to the level's own encoder. Each is built at its first use. Once the
// level's encoder has been needed, it takes every input and the small one
// is let go: a sender of larger messages pays for one encoder's tables, as
// before, not for two.
//
// A kzstd encoder encodes one input at a time, and klauspost's own
// concurrency (WithEncoderConcurrency(n)) builds all n encoders, tables
// and all, at the first encode. Encoder instead keeps a pool of
// single-input encoders of each kind and builds another only when every
// one it has is busy, up to GOMAXPROCS: what it holds follows the most
// encodes its callers ran at once, within the last minute (an encoder
// idle that long, other than the last used, is let go), so a codec used
// by one goroutine builds one encoder, as before, and one shared by many
// senders encodes on as many cores as they use. Every encoder of a kind is built with the same
// options, and EncodeAll starts each input afresh, so which one encodes an
// input does not change its bytes.
package zstdenc

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	kzstd "github.com/klauspost/compress/zstd"
)

// SmallWindow is the window of the encoder for smaller inputs: 1.1 MiB of
// history rather than 16. Messages are mostly far smaller, and a sender
// whose messages all fit builds only that encoder; one that sends a larger
// message builds the level's (whose tables, 34 MB at the best level, are
// not shared), and from then on uses only that one.
const SmallWindow = 1 << 20

// Encoder encodes whole inputs, like kzstd.Encoder.EncodeAll. It is safe
// for concurrent use, and concurrent calls encode in parallel.
type Encoder struct {
	small atomic.Pointer[pool] // nil once full has been used
	full  *pool
	limit int // inputs up to limit bytes go to small
}

// New returns an encoder with opts, which must not set the window, the
// encoder's memory use or its concurrency. prefix is the dictionary
// content the encoder is given (0 for none): a match may reach back into
// it, so it takes its share of the small window.
func New(prefix int, opts ...kzstd.EOption) (*Encoder, error) {
	full, err := newPool(opts)
	if err != nil {
		return nil, err
	}
	e := &Encoder{full: full, limit: SmallWindow - prefix}
	if e.limit <= 0 {
		return e, nil
	}
	// WithLowerEncoderMem sizes the history to the window plus one block
	// (rather than twice the window, and at least 1 MiB); an input that
	// fits the window never fills it, so what is encoded is the same.
	small, err := newPool(append(opts[:len(opts):len(opts)], kzstd.WithWindowSize(SmallWindow), kzstd.WithLowerEncoderMem(true)))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder for small inputs: %w", err)
	}
	e.small.Store(small)
	return e, nil
}

// NewFixed returns an encoder that encodes every input with opts as
// given (they must not set its concurrency), for a caller that chooses
// the window itself.
func NewFixed(opts ...kzstd.EOption) (*Encoder, error) {
	full, err := newPool(opts)
	if err != nil {
		return nil, err
	}
	return &Encoder{full: full}, nil
}

// EncodeAll appends the zstd frame of src to dst.
func (e *Encoder) EncodeAll(src, dst []byte) []byte {
	if len(src) <= e.limit {
		if s := e.small.Load(); s != nil {
			if out, ok := s.encodeAll(src, dst); ok {
				return out
			}
		}
	}
	if s := e.small.Swap(nil); s != nil {
		s.close()
	}
	out, _ := e.full.encodeAll(src, dst)
	return out
}

// pool holds encoders built with the same options, each encoding one
// input at a time. It builds one when every one it has is busy, up to
// GOMAXPROCS: an encode runs on a CPU from start to end, so no more than
// GOMAXPROCS of them make progress at once, and a further encoder would
// add its tables (34 MB at the best level) without adding throughput; a
// caller beyond that waits for one to be free, as klauspost's own
// concurrency makes it wait. Encoders it has built are kept while they
// are used: a codec whose senders encoded at once will likely do so
// again, and building an encoder again costs its tables again, more than
// most messages cost to encode; but one left idle for trimAfter, other
// than the most recently used, is let go.
type pool struct {
	opts []kzstd.EOption

	mu     sync.Mutex
	freed  sync.Cond // an encoder was put back, or the pool closed
	idle   []idleEncoder
	built  int         // encoders held: idle and busy
	bound  int         // encoders it may hold; 0 for GOMAXPROCS
	trim   *time.Timer // armed while more than one encoder is idle
	closed bool

	held func() // tests: called while an encoder is held
}

// idleEncoder is an encoder the pool holds free, and since when; the
// pool's idle ones are in the order they were put back, the most
// recently used last.
type idleEncoder struct {
	enc   *kzstd.Encoder
	since time.Time
}

// trimAfter is how long an encoder other than the most recently used
// stays idle before its pool lets it go. The encoders a burst of
// concurrent encodes built are worth keeping while such bursts recur,
// which for senders sharing a codec is within seconds; a minute in which
// one of them was never needed says the senders no longer encode at
// once, and holding its tables (34 MB at the best level) longer buys
// nothing. The most recently used encoder is kept however long it idles:
// what one sender needs stays ready.
const trimAfter = time.Minute

// newPool returns a pool holding one encoder, built to check opts: it
// allocates nothing more until it encodes.
func newPool(opts []kzstd.EOption) (*pool, error) {
	opts = append(opts[:len(opts):len(opts)], kzstd.WithEncoderConcurrency(1))
	enc, err := kzstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, err
	}
	p := &pool{opts: opts, idle: []idleEncoder{{enc, time.Now()}}, built: 1}
	p.freed.L = &p.mu
	return p, nil
}

// encodeAll encodes src with one of the pool's encoders, the most
// recently used one that is free (its tables are the likeliest to be in
// memory). It reports false, having done nothing, if the pool is closed.
func (p *pool) encodeAll(src, dst []byte) ([]byte, bool) {
	enc := p.get()
	if enc == nil {
		return dst, false
	}
	if p.held != nil {
		p.held()
	}
	dst = enc.EncodeAll(src, dst)
	p.put(enc)
	return dst, true
}

// get returns a free encoder, building one if none is free and the
// pool may hold another, or waiting for one; nil if the pool is closed.
func (p *pool) get() *kzstd.Encoder {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed {
		if n := len(p.idle); n > 0 {
			enc := p.idle[n-1].enc
			p.idle[n-1] = idleEncoder{}
			p.idle = p.idle[:n-1]
			return enc
		}
		bound := p.bound
		if bound == 0 {
			bound = runtime.GOMAXPROCS(0)
		}
		if p.built < bound {
			// The options built the pool's first encoder; should they
			// fail now, the pool makes do with what it has (all busy,
			// and at least the first, which an open pool never lets go).
			if enc, err := kzstd.NewWriter(nil, p.opts...); err == nil {
				p.built++
				return enc
			}
			p.bound = p.built
		}
		p.freed.Wait()
	}
	return nil
}

// put gives back an encoder get returned; a closed pool lets it go.
func (p *pool) put(enc *kzstd.Encoder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.built--
		return
	}
	p.idle = append(p.idle, idleEncoder{enc, time.Now()})
	p.freed.Signal()
	if len(p.idle) > 1 && p.trim == nil {
		p.trim = time.AfterFunc(time.Until(p.idle[0].since.Add(trimAfter)), p.trimIdle)
	}
}

// trimIdle lets go the encoders idle for trimAfter but the most recently
// used one, and arms itself again for the next to come due.
func (p *pool) trimIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trim = nil
	if p.closed {
		return
	}
	cut := time.Now().Add(-trimAfter)
	n := 0
	for n < len(p.idle)-1 && !p.idle[n].since.After(cut) {
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	clear(p.idle[len(p.idle) : len(p.idle)+n])
	p.built -= n
	if len(p.idle) > 1 {
		p.trim = time.AfterFunc(time.Until(p.idle[0].since.Add(trimAfter)), p.trimIdle)
	}
}

// close lets the free encoders go, and the busy ones as they are put
// back; get returns nil from now on.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.built -= len(p.idle)
	p.idle = nil
	if p.trim != nil {
		p.trim.Stop()
		p.trim = nil
	}
	p.freed.Broadcast()
	p.mu.Unlock()
}
