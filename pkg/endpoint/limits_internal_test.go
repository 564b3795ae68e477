package endpoint

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
)

// TestPreallocBudget: a frame over 4 MiB draws on its peer's and the
// service's preallocation budgets while it is read, a frame that does not
// fit them does not, and everything is given back when the stream ends.
func TestPreallocBudget(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	s, err := New(nodes[1], WithMaxPrealloc(24<<20, 30<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p1, p2 := nodes[0].ID(), peer.ID("another")
	pi1, pi2 := &peerIn{id: p1}, &peerIn{id: p2}
	if !s.reserve(pi1, 20<<20) || s.reserve(pi1, 5<<20) || !s.reserve(pi2, 10<<20) || s.reserve(pi2, 1<<20) {
		t.Fatal("budgets not enforced (per peer 24 MiB, all peers 30 MiB)")
	}
	s.release(pi1, 20<<20)
	s.release(pi2, 10<<20)
	if s.prealloc != 0 || pi1.prealloc != 0 || pi2.prealloc != 0 {
		t.Fatal("budgets not given back")
	}

	// A peer announces a 20 MiB message and sends nothing more: its frame
	// holds 20 MiB of the budget until the stream goes.
	st, err := nodes[0].Host().NewStream(context.Background(), nodes[1].ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	hdr := []byte{2, 'x', 0} // service "x", no param
	st.Write(binary.AppendUvarint(hdr, 20<<20))
	testutil.WaitFor(t, "the frame's reservation", func() bool { return s.preallocated() == 20<<20 })
	st.Reset()
	testutil.WaitFor(t, "the reservation to be given back", func() bool {
		s.inMu.Lock()
		defer s.inMu.Unlock()
		return s.prealloc == 0 && len(s.in) == 0
	})
}

func (s *Service) preallocated() int64 {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	return s.prealloc
}
