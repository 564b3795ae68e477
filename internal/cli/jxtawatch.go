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

// signedHint is what signed JXTA messages reaching a peer that does not
// sign most likely mean, and what to do.
const signedHint = "(then leave out --jxta-unsigned)"

// watchUnsigned reports on w what a signing mismatch with JXTA peers
// leaves otherwise unsaid. A signing peer reports the unsigned messages
// its transport drops, all it sees of a JXSE peer started with CBJX
// disabled, whose pipes then never resolve. A peer that does not sign
// (--jxta-unsigned) reports the signed messages it receives: their
// senders most likely drop its unsigned answers, so that they never
// resolve its pipes, and it would see nothing wrong. The count is written
// when it has grown, at most once every repeatWindow, and once more by
// the returned stop if it grew since. Without a JXTA transport there is
// nothing to watch.
func watchUnsigned(p *peerStack, w io.Writer) (stop func()) {
	jx := p.ep.JXTA()
	if jx == nil {
		return func() {}
	}
	count := func() uint64 { return jx.Stats().Unsigned }
	line := func(n uint64) string {
		return fmt.Sprintf("p2pmsg: %s from JXTA peers dropped, as signatures are required %s",
			english.Count(int(n), "unsigned message", "unsigned messages"), unsignedHint)
	}
	if !jx.Signs() {
		count = func() uint64 { return jx.Stats().SignedIgnored }
		line = func(n uint64) string {
			return fmt.Sprintf("p2pmsg: %s received from JXTA peers, which most likely drop this peer's unsigned answers, as JXSE does unless CBJX is disabled %s",
				english.Count(int(n), "signed message", "signed messages"), signedHint)
		}
	}
	var reported uint64
	report := func() {
		if n := count(); n > reported {
			reported = n
			fmt.Fprintln(w, line(n))
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
				if now.Sub(last) >= repeatWindow && count() > reported {
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
