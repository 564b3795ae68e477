package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/english"
)

// unsignedHint is what unsigned JXTA messages dropped by a signing peer
// most likely mean, and what to do.
const unsignedHint = "(a JXSE peer with CBJX disabled? then use --jxta-unsigned)"

// watchUnsigned reports on w the unsigned messages p's JXTA transport
// drops, which is all a signing peer sees of a JXSE peer started with
// CBJX disabled: its pipes never resolve and nothing says why. The count
// is written when it has grown, at most once every repeatWindow, and once
// more by the returned stop if it grew since. A transport that accepts
// unsigned messages drops none; without one there is nothing to watch.
func watchUnsigned(p *peerStack, w io.Writer) (stop func()) {
	jx := p.ep.JXTA()
	if jx == nil {
		return func() {}
	}
	var reported uint64
	report := func() {
		if n := jx.Stats().Unsigned; n > reported {
			reported = n
			fmt.Fprintf(w, "p2pmsg: %s from JXTA peers dropped, as signatures are required %s\n",
				english.Count(int(n), "unsigned message", "unsigned messages"), unsignedHint)
		}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last time.Time
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if now.Sub(last) >= repeatWindow && jx.Stats().Unsigned > reported {
					report()
					last = now
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-ended
			report()
		})
	}
}
