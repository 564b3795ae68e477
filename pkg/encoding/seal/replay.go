package seal

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/replaywin"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Replay protection (see the package doc).
const (
	// ReplayWindow is how many counters below the highest seen a stream
	// still accepts, once each (replaywin.Size): elements of one stream
	// overtaking each other by more than that (they travel in order on a
	// pipe; a propagate mesh reorders a few) are refused.
	ReplayWindow = replaywin.Size
	// ReplayMaxAge is how old a sealed element may be: long enough for
	// clocks a few minutes apart and messages held in queues, short enough
	// that the opener need remember no stream longer.
	ReplayMaxAge = 10 * time.Minute
	// ReplayMaxSkew is how far ahead of the opener's clock an element may
	// be sealed: the clock skew Kerberos tolerates by default, far more
	// than peers whose clocks NTP keeps differ by. It also bounds how long
	// a forgotten stream can keep new streams of its key out (see
	// keyStreams.floor): an element dated further ahead could hold them
	// out until that date.
	ReplayMaxSkew = 5 * time.Minute
	// ReplayStreams is how many streams an opener tracks per key: the
	// senders (sealing Codecs) a receiver hears from at once with one
	// key, with room to spare; each costs about 300 bytes.
	ReplayStreams = 4096
	// seqSize is the stream ID, counter and time before the nonce.
	seqSize = 24
)

// window is one stream's counters.
type window struct {
	seen *replaywin.Window
	last time.Time // when the opener last accepted from the stream, for eviction
	sent uint64    // newest seal time (Unix seconds) accepted from the stream
}

// keyStreams is an opener's memory of one key's streams. Each key has its
// own, so that streams of one key (anyone may seal to a peer's identity)
// neither take the room of another key's streams nor move its floor.
type keyStreams struct {
	streams map[[8]byte]*window
	// floor is the newest seal time of any stream of the key forgotten
	// for room: an unknown stream's element sealed no later than that
	// may be a replay of a forgotten one.
	floor uint64
}

// replayTable is an opener's memory of streams, per key. Only elements
// that authenticated reach it, so its keys are the codec's own: its
// pre-shared keys and its identity.
type replayTable struct {
	mu      sync.Mutex
	keys    map[string]*keyStreams
	refused atomic.Uint64
}

// check accepts seq (stream, counter, time) of an element sealed with
// keyID once, at now.
func (t *replayTable) check(keyID string, seq []byte, now time.Time) error {
	var stream [8]byte
	copy(stream[:], seq[:8])
	ctr := binary.BigEndian.Uint64(seq[8:16])
	sealed := binary.BigEndian.Uint64(seq[16:24])
	if sealed > uint64(now.Add(ReplayMaxSkew).Unix()) {
		t.refused.Add(1)
		return fmt.Errorf("%w: sealed at %d, more than %v ahead of this clock", encoding.ErrReplay, sealed, ReplayMaxSkew)
	}
	if int64(sealed) < now.Add(-ReplayMaxAge).Unix() {
		t.refused.Add(1)
		return fmt.Errorf("%w: sealed at %d, more than %v ago", encoding.ErrReplay, sealed, ReplayMaxAge)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.keys[keyID]
	if k == nil {
		if t.keys == nil {
			t.keys = map[string]*keyStreams{}
		}
		k = &keyStreams{streams: map[[8]byte]*window{}}
		t.keys[keyID] = k
	}
	w := k.streams[stream]
	if w == nil {
		if sealed <= k.floor {
			t.refused.Add(1)
			return fmt.Errorf("%w: unknown stream, sealed before streams of key %q were forgotten", encoding.ErrReplay, keyID)
		}
		if len(k.streams) >= ReplayStreams {
			k.evict()
		}
		k.streams[stream] = &window{seen: replaywin.New(ctr), last: now, sent: sealed}
		return nil
	}
	if !w.seen.Accept(ctr) {
		t.refused.Add(1)
		return fmt.Errorf("%w: counter %d (highest %d)", encoding.ErrReplay, ctr, w.seen.Top())
	}
	w.last, w.sent = now, max(w.sent, sealed)
	return nil
}

// evict forgets the key's least recently used stream, raising its floor.
func (k *keyStreams) evict() {
	var oldest [8]byte
	var ow *window
	for s, w := range k.streams {
		if ow == nil || w.last.Before(ow.last) {
			oldest, ow = s, w
		}
	}
	k.floor = max(k.floor, ow.sent)
	delete(k.streams, oldest)
}
