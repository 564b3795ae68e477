package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/english"
)

// repeats bounds the lines recv and bridge write about messages they
// refuse or cannot forward, which one peer can cause by the thousand (a
// sender retrying with a wrong key wrote 9,436 lines in four minutes):
// per peer, the first line of every repeatWindow is written and the
// others only counted, the count written with the peer's next line and
// by flush when the command ends. Peers are bounded (maxRepeatPeers):
// beyond, what is counted is written and the count starts afresh. A
// sender whose identity is only its claim is followed by its host
// (lineKey), as it can claim a new one with every message. And at most
// maxWindowLines lines are written in any repeatWindow, whatever the
// peers: libp2p identities cost nothing to make, and one line each is
// still a flood. Beyond, lines are counted and the count is written once
// the window has passed (with the next line, or by flush).
type repeats struct {
	w     io.Writer
	now   func() time.Time
	mu    sync.Mutex
	peers map[string]*repeat

	window  time.Time // when the current window of maxWindowLines began
	written int       // lines written in it
	over    int       // lines not written for want of room, since the last count
}

type repeat struct {
	since time.Time // the peer's last line written
	held  int       // lines counted since
	last  string    // the last of them
	of    string    // whom the count is of: "this peer"
}

// repeatWindow is how often one peer's lines are written: rare enough
// that a flood costs a few lines a minute, often enough that an operator
// watching sees a new cause within seconds.
const repeatWindow = 10 * time.Second

// maxRepeatPeers bounds the peers followed, as the node bounds the peers
// connected at once.
const maxRepeatPeers = 1024

// maxWindowLines bounds the lines written in a repeatWindow, all peers
// together: ten a second, about what an operator can still read.
const maxWindowLines = 100

func newRepeats(w io.Writer) *repeats {
	return &repeats{w: w, now: time.Now, peers: map[string]*repeat{}}
}

// line writes line (one line, without its newline) about peer, or counts
// it if a line about peer was written less than repeatWindow ago.
func (r *repeats) line(peer, line string) { r.lineOf(peer, "this peer", line) }

// lineOf is line for a key that is not one peer: of says whom its count
// is of ("unverified JXTA peers at its host").
func (r *repeats) lineOf(peer, of, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	p := r.peers[peer]
	switch {
	case p == nil:
		if len(r.peers) >= maxRepeatPeers {
			r.flushLocked()
			clear(r.peers)
		}
		r.peers[peer] = &repeat{since: now, of: of}
	case now.Sub(p.since) < repeatWindow:
		p.held++
		p.last = line
		return
	default:
		if p.held > 0 {
			line += fmt.Sprintf(" (and %d more from %s in the %v before)", p.held, p.of, now.Sub(p.since).Round(time.Second))
		}
		p.since, p.held, p.last = now, 0, ""
	}
	r.writeLocked(now, line)
}

// writeLocked writes line if the window has room, else counts it. A
// window that has passed first has its count written.
func (r *repeats) writeLocked(now time.Time, line string) {
	if now.Sub(r.window) >= repeatWindow {
		r.overLocked()
		r.window, r.written = now, 0
	}
	if r.written >= maxWindowLines {
		r.over++
		return
	}
	r.written++
	fmt.Fprintln(r.w, line)
}

// overLocked writes how many lines were not written for want of room.
func (r *repeats) overLocked() {
	if r.over > 0 {
		fmt.Fprintf(r.w, "p2pmsg: %s like these not written (at most %d every %v)\n",
			english.Count(r.over, "more line", "more lines"), maxWindowLines, repeatWindow)
		r.over = 0
	}
}

// flush writes what is counted and not yet written: per peer, the count
// and the last line.
func (r *repeats) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
}

func (r *repeats) flushLocked() {
	for _, p := range r.peers {
		if p.held > 0 {
			line := p.last
			if p.held > 1 {
				line += fmt.Sprintf(" (and %d more from %s before it)", p.held-1, p.of)
			}
			r.writeLocked(r.now(), line)
			p.held, p.last = 0, ""
		}
	}
	r.overLocked()
}
