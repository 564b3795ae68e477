package jxtatcp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// waitFor waits until cond holds, failing after 30 s with what.
func (tg *target) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			tg.budget.mu.Lock()
			used, hosts := tg.budget.used, fmt.Sprint(tg.budget.hosts)
			tg.budget.mu.Unlock()
			t.Fatalf("30 s later, not yet %s: %d bytes claimed, by host %s; %+v", what, used, hosts, tg.Stats())
		}
	}
}

// waiting returns how many frames wait for the budget.
func (tg *target) waiting() int {
	tg.budget.mu.Lock()
	defer tg.budget.mu.Unlock()
	return tg.budget.waiting
}

// bodyLen is a frame's body length.
func bodyLen(frame []byte) int64 { return int64(len(frame) - frameHeaderSize) }

// A handler that keeps messages for later (Incoming.Hold) keeps their
// frames charged to their host's share: a host whose held messages fill
// it is not read further, while another host's frame is; once the first
// host's messages are released, the rest of its frames are read.
func TestHeldMessagesHoldTheirHostsShare(t *testing.T) {
	frame := signedFrame(t, otherIdent, "StudySvc/keep", message.Bytes("", "pad", make([]byte, 30<<10)))
	f := bodyLen(frame)
	var (
		mu       sync.Mutex
		releases []func()
		kept     atomic.Int64
		others   = make(chan *Incoming, 1)
	)
	tr, err := New(testIdent, func(in *Incoming) {
		if in.Param != "keep" {
			others <- in
			return
		}
		r := in.Hold()
		mu.Lock()
		releases = append(releases, r)
		mu.Unlock()
		kept.Add(1)
	}, WithMaxMessageSize(64<<10), WithMemoryBudget(16*f), WithHostMemoryBudget(4*f))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tg := &target{Transport: tr}
	const sent = 10
	p := dialRawFrom(t, tg, "127.0.0.2")
	p.welcome(t, otherIdent)
	for range sent {
		if _, err := p.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	tg.waitFor(t, "a frame waiting for its host's share", func() bool { return tg.waiting() == 1 })
	if n := kept.Load(); n != 4 {
		t.Fatalf("%d messages held, want the 4 that fill the host's share", n)
	}
	other := dialRawFrom(t, tg, "127.0.0.3")
	other.welcome(t, otherIdent)
	if _, err := other.Write(signedFrame(t, otherIdent, "StudySvc/ep")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-others:
	case <-time.After(30 * time.Second):
		t.Fatalf("another host's frame not handled in 30 s: %+v", tg.Stats())
	}
	for released := 0; released < sent; {
		tg.waitFor(t, "another message held", func() bool { return kept.Load() > int64(released) })
		mu.Lock()
		rs := releases
		releases = nil
		mu.Unlock()
		for _, r := range rs {
			r()
			r() // a second call does nothing
			released++
		}
	}
	tg.budget.mu.Lock()
	used := tg.budget.used
	tg.budget.mu.Unlock()
	if used != 0 {
		t.Fatalf("%d bytes still claimed once every message was released", used)
	}
}
