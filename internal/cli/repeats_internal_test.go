package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRepeats(t *testing.T) {
	var out bytes.Buffer
	r := newRepeats(&out)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	for i := range 5 { // one line, four counted
		r.line("A", fmt.Sprint("A ", i))
	}
	r.line("B", "B 0") // another peer: its own line
	now = now.Add(repeatWindow)
	r.line("A", "A 5") // the window passed: written, with the count
	r.line("A", "A 6") // counted again
	r.flush()
	r.flush() // nothing more
	want := "A 0\nB 0\nA 5 (and 4 more from this peer in the 10s before)\nA 6\n"
	if out.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", out.String(), want)
	}

	// Beyond maxRepeatPeers peers, what is counted is written and the
	// peers are followed afresh.
	// (The clock moves on a window every maxWindowLines peers, so that
	// every first line is written.)
	out.Reset()
	r = newRepeats(&out)
	r.now = func() time.Time { return now }
	for i := range maxRepeatPeers {
		if i%maxWindowLines == 0 {
			now = now.Add(repeatWindow)
		}
		r.line(fmt.Sprint(i), "first")
	}
	last := fmt.Sprint(maxRepeatPeers - 1)
	r.line(last, "counted")
	r.line(last, "counted again")
	r.line("one too many", "last")
	if got := out.String(); strings.Count(got, "first") != maxRepeatPeers || !strings.HasSuffix(got, "counted again (and 1 more from this peer before it)\nlast\n") {
		t.Fatalf("beyond the peers' bound, wrote the tail %q", got[max(len(got)-200, 0):])
	}
}

// TestRepeatsWindowBound: however many peers there are (libp2p identities
// cost nothing), at most maxWindowLines lines are written in a
// repeatWindow; the rest are counted, the count written once the window
// has passed and by flush. Before, each new peer had its line: 1,100
// made-up identities, 1,200 lines in 5 s.
func TestRepeatsWindowBound(t *testing.T) {
	var out bytes.Buffer
	r := newRepeats(&out)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	for i := range 3 * maxWindowLines {
		r.line(fmt.Sprint("peer ", i), "refused")
	}
	if got := strings.Count(out.String(), "\n"); got != maxWindowLines {
		t.Fatalf("%d peers in one window: %d lines written, want %d", 3*maxWindowLines, got, maxWindowLines)
	}
	now = now.Add(repeatWindow)
	out.Reset()
	r.line("a new peer", "refused")
	want := fmt.Sprintf("p2pmsg: %d more lines like these not written (at most %d every 10s)\nrefused\n", 2*maxWindowLines, maxWindowLines)
	if out.String() != want {
		t.Fatalf("the next window began with\n%s\nwant\n%s", out.String(), want)
	}
	for i := range 2 * maxWindowLines {
		r.line(fmt.Sprint("other ", i), "refused")
	}
	out.Reset()
	r.flush()
	want = fmt.Sprintf("p2pmsg: %d more lines like these not written (at most %d every 10s)\n", maxWindowLines+1, maxWindowLines)
	if out.String() != want {
		t.Fatalf("flush wrote\n%s\nwant\n%s", out.String(), want)
	}
}
