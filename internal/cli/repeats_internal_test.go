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
	out.Reset()
	r = newRepeats(&out)
	for i := range maxRepeatPeers {
		r.line(fmt.Sprint(i), "first")
	}
	r.line("0", "counted")
	r.line("0", "counted again")
	r.line("one too many", "last")
	if got := out.String(); strings.Count(got, "first") != maxRepeatPeers || !strings.HasSuffix(got, "counted again (and 1 more from this peer before it)\nlast\n") {
		t.Fatalf("beyond the peers' bound, wrote the tail %q", got[max(len(got)-200, 0):])
	}
}
