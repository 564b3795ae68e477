package endpoint

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// watch makes the end of a Send's ctx interrupt a write stalled by a slow
// receiver: it moves the stream's write deadline into the past.
//
// Registering with a context (context.AfterFunc) and undoing it cost about
// as much as the rest of a small Send, so a registration is kept after its
// Send returns and reused while Sends come with contexts that end together
// (the same Done channel) on the same stream; it is replaced when either
// changes. A kept registration that fires between Sends only moves the
// deadline of an idle stream, and the next Send puts it back.
type watch struct {
	mu     sync.Mutex
	gen    uint64 // registrations made; only the latest one acts
	fired  bool   // a registration moved the deadline since the last Send
	closed bool   // the sender is closing: no write is to start
	done   <-chan struct{}
	st     network.Stream
	stop   func() bool
}

// prepare readies st for a write under ctx: it registers for ctx's end if
// needed, and sets the write deadline to ctx's deadline unless *deadline,
// the one last set, already is. It fails when ctx has ended, and with
// ErrClosed once close was called.
func (w *watch) prepare(ctx context.Context, st network.Stream, deadline *time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if done := ctx.Done(); done != w.done || st != w.st {
		w.disarm()
		w.done, w.st = done, st
		if done != nil {
			w.mu.Lock()
			gen := w.gen
			w.mu.Unlock()
			w.stop = context.AfterFunc(ctx, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.gen == gen {
					st.SetWriteDeadline(pastDeadline)
					w.fired = true
				}
			})
		}
	}
	dl, _ := ctx.Deadline()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.fired {
		w.fired = false
		*deadline = pastDeadline
		if err := ctx.Err(); err != nil {
			return err // it fired for this ctx: leave the deadline past
		}
	}
	// Touch the deadline only when it changes: each call wakes yamux's
	// writers. Done under mu, so a registration that fires from here on
	// is not overwritten.
	if !dl.Equal(*deadline) {
		st.SetWriteDeadline(dl)
		*deadline = dl
	}
	return nil
}

// disarm drops the registration; one that is firing right now has no
// effect.
func (w *watch) disarm() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.mu.Lock()
	w.gen++
	w.mu.Unlock()
	w.done, w.st = nil, nil
}

// fire moves st's write deadline into the past, as a registration does
// when its ctx ends: a SendGroup's Close interrupting a write (see
// sender.interrupt).
func (w *watch) fire(st network.Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.SetWriteDeadline(pastDeadline)
	w.fired = true
}

// close moves st's write deadline, if st is not nil, into the past for
// good: every later prepare fails. Done under mu, a prepare racing it
// either fails or has set its deadline before this moves it, so the
// write the service's Close is to cut short is never given a later
// deadline (the stream's, or none, which a stalled receiver would hold
// for ever, and Close with it, waiting for the writer's token).
func (w *watch) close(st network.Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if st != nil {
		st.SetWriteDeadline(pastDeadline)
	}
}
