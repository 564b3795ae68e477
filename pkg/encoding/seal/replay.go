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
	// ReplayStreams is how many streams an opener tracks: the senders
	// (sealing Codecs) a receiver hears from at once, with room to spare;
	// each costs about 300 bytes.
	ReplayStreams = 4096
	// seqSize is the stream ID, counter and time before the nonce.
	seqSize = 24
)

type streamKey struct {
	keyID  string
	stream [8]byte
}

// window is one stream's counters.
type window struct {
	seen *replaywin.Window
	last time.Time // when the opener last accepted from the stream, for eviction
	sent uint64    // newest seal time (Unix seconds) accepted from the stream
}

// replayTable is an opener's memory of streams.
type replayTable struct {
	mu      sync.Mutex
	streams map[streamKey]*window
	// floor is the newest seal time of any stream forgotten for room:
	// an unknown stream's element sealed no later than that may be a
	// replay of a forgotten one.
	floor   uint64
	refused atomic.Uint64
}

// check accepts seq (stream, counter, time) once, at now.
func (t *replayTable) check(keyID string, seq []byte, now time.Time) error {
	var k streamKey
	k.keyID = keyID
	copy(k.stream[:], seq[:8])
	ctr := binary.BigEndian.Uint64(seq[8:16])
	sealed := binary.BigEndian.Uint64(seq[16:24])
	if int64(sealed) < now.Add(-ReplayMaxAge).Unix() || sealed > 1<<62 {
		t.refused.Add(1)
		return fmt.Errorf("%w: sealed at %d, more than %v ago", encoding.ErrReplay, sealed, ReplayMaxAge)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.streams[k]
	if w == nil {
		if sealed <= t.floor {
			t.refused.Add(1)
			return fmt.Errorf("%w: unknown stream, sealed before streams were forgotten", encoding.ErrReplay)
		}
		if t.streams == nil {
			t.streams = map[streamKey]*window{}
		}
		if len(t.streams) >= ReplayStreams {
			t.evict()
		}
		t.streams[k] = &window{seen: replaywin.New(ctr), last: now, sent: sealed}
		return nil
	}
	if !w.seen.Accept(ctr) {
		t.refused.Add(1)
		return fmt.Errorf("%w: counter %d (highest %d)", encoding.ErrReplay, ctr, w.seen.Top())
	}
	w.last, w.sent = now, max(w.sent, sealed)
	return nil
}

// evict forgets the least recently used stream, raising the floor.
func (t *replayTable) evict() {
	var oldest streamKey
	var ow *window
	for k, w := range t.streams {
		if ow == nil || w.last.Before(ow.last) {
			oldest, ow = k, w
		}
	}
	t.floor = max(t.floor, ow.sent)
	delete(t.streams, oldest)
}
