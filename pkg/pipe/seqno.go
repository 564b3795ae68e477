package pipe

import (
	"container/list"
	"context"
	"encoding/binary"
	"sync"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/replaywin"
)

// Propagate sequence numbers.
//
// Gossipsub drops a message it has seen, but only for as long as it
// remembers it (its seen-messages TTL, two minutes by default); a peer
// that publishes a captured message again later would have it delivered
// again, still signed by its author. So every propagate topic has a
// validator that keeps, per author, the highest sequence number seen and
// a window of the replaywin.Size below it, and drops (ValidationIgnore:
// not delivered, not forwarded, no penalty for the peer that forwarded
// it) a number seen before or below the window. Authors number their
// messages in order (go-libp2p-pubsub counts up from its start time), so
// an honest message is refused only if gossip delays it past 2048 later
// ones from the same author.
//
// A topic's table is kept when the service leaves the topic, so that
// re-binding a pipe does not make its authors' old messages new again
// (a process restart does: the tables are in memory). The table holds
// maxAuthors authors per topic; past that the least
// recently heard is forgotten, and a replay of its messages older than
// the seen-messages TTL would be accepted once more. Forcing that takes
// maxAuthors authors publishing on the pipe, each signing with its own
// key: visible, and bounded by gossipsub's own defences.

// maxAuthors bounds the authors remembered per propagate topic: the
// publishers of a pipe, with room to spare (about 300 bytes each).
const maxAuthors = 4096

// seqnos is one topic's per-author windows, least recently heard first
// in lru, so that forgetting one costs the same however many are kept.
type seqnos struct {
	mu      sync.Mutex
	authors map[peer.ID]*list.Element // of *author
	lru     list.List
}

type author struct {
	id  peer.ID
	win *replaywin.Window
}

// validate is the topic validator.
func (s *Service) validateSeqno(t *seqnos) pubsub.ValidatorEx {
	return func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		from, seq := m.GetFrom(), m.GetSeqno()
		if from == "" || len(seq) != 8 {
			return pubsub.ValidationReject // StrictSign requires both
		}
		if !t.accept(from, binary.BigEndian.Uint64(seq)) {
			s.replays.Add(1)
			return pubsub.ValidationIgnore
		}
		return pubsub.ValidationAccept
	}
}

// accept records author's number n, reporting false for a replay.
func (t *seqnos) accept(from peer.ID, n uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.authors[from]
	if e == nil {
		if t.authors == nil {
			t.authors = map[peer.ID]*list.Element{}
		}
		if len(t.authors) >= maxAuthors {
			oldest := t.lru.Front()
			delete(t.authors, t.lru.Remove(oldest).(*author).id)
		}
		t.authors[from] = t.lru.PushBack(&author{id: from, win: replaywin.New(n)})
		return true
	}
	if !e.Value.(*author).win.Accept(n) {
		return false
	}
	t.lru.MoveToBack(e)
	return true
}
