package pipe

import (
	"strconv"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestSeqnosForgetLeastRecentlyHeard: past maxAuthors authors, the one
// heard least recently is forgotten (its replay accepted once more, the
// documented cost), and one heard since is kept (its replay refused).
func TestSeqnosForgetLeastRecentlyHeard(t *testing.T) {
	var s seqnos
	author := func(i int) peer.ID { return peer.ID("author-" + strconv.Itoa(i)) }
	for i := range maxAuthors {
		if !s.accept(author(i), 10) {
			t.Fatalf("author %d's first message refused", i)
		}
	}
	if !s.accept(author(0), 11) { // author 0 heard again: now the most recent
		t.Fatal("a new number refused")
	}
	if !s.accept(author(maxAuthors), 10) { // one more: forgets author 1
		t.Fatal("a new author refused")
	}
	if len(s.authors) != maxAuthors || s.lru.Len() != maxAuthors {
		t.Fatalf("%d authors, %d in order; want %d", len(s.authors), s.lru.Len(), maxAuthors)
	}
	for _, c := range []struct {
		author int
		n      uint64
		want   bool
	}{
		{0, 11, false},          // replay of a kept author
		{2, 10, false},          // replay of a kept author
		{maxAuthors, 10, false}, // replay of the newest
		{1, 10, true},           // forgotten: accepted again
	} {
		if got := s.accept(author(c.author), c.n); got != c.want {
			t.Errorf("author %d, number %d: accepted %v, want %v", c.author, c.n, got, c.want)
		}
	}
}
