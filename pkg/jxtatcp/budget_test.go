package jxtatcp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// parkingTarget is a transport whose handler parks messages to
// StudySvc/park until free is called, and counts the others in got.
type parkingTarget struct {
	*target
	parked atomic.Int64
	free   func()
}

func newParkingTarget(t *testing.T, opts ...Option) *parkingTarget {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	pt := &parkingTarget{free: func() { once.Do(func() { close(release) }) }}
	tr, err := New(testIdent, func(in *Incoming) {
		if in.Param == "park" {
			pt.parked.Add(1)
			<-release
		}
		pt.got.Add(1)
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	t.Cleanup(pt.free) // before Close, which waits for the handlers
	if err := tr.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	pt.target = &target{Transport: tr}
	return pt
}

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

// Six hosts park frames in a handler (a queue the application does not
// read) over five connections each, every host trying for its share, a
// quarter of the budget. Four of them held the whole budget, and another
// host's frame was never read; now room is kept for hosts holding little:
// that host's frame, half as large as theirs, is read and handled, the
// frames kept out wait (Stats.RoomKept), and once the handler returns all
// of them are handled: nothing is dropped.
func TestHostsAtTheirShareLeaveRoom(t *testing.T) {
	frame := signedFrame(t, otherIdent, "StudySvc/park", message.Bytes("", "pad", make([]byte, 56<<10)))
	small := signedFrame(t, otherIdent, "StudySvc/ep", message.Bytes("", "pad", make([]byte, 24<<10)))
	f := bodyLen(frame)
	if 2*bodyLen(small) > f {
		t.Fatalf("the honest frame (%d bytes) is over half a parked one (%d)", bodyLen(small), f)
	}
	// Four parked frames fill a host's share, four shares the budget.
	tg := newParkingTarget(t, WithMaxMessageSize(64<<10), WithMemoryBudget(16*f), WithHostMemoryBudget(4*f))
	const hosts, conns = 6, 5
	for h := range hosts {
		for range conns {
			p := dialRawFrom(t, tg.target, fmt.Sprintf("127.0.0.%d", 2+h))
			p.welcome(t, otherIdent)
			if _, err := p.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
	}
	tg.waitFor(t, "every parked frame in the handler or waiting for the budget", func() bool {
		return tg.parked.Load()+int64(tg.waiting()) == hosts*conns
	})
	tg.budget.mu.Lock()
	free, claimed := tg.budget.limit-tg.budget.used, fmt.Sprint(tg.budget.hosts)
	tg.budget.mu.Unlock()
	t.Logf("%d bytes free, claimed by host %s", free, claimed)
	if free < f {
		t.Errorf("%d bytes of the budget left free, less than the frame each host claimed (%d)", free, f)
	}
	honest := dialRawFrom(t, tg.target, "127.0.0.9")
	honest.welcome(t, otherIdent)
	if _, err := honest.Write(small); err != nil {
		t.Fatal(err)
	}
	tg.waitFor(t, "the honest host's frame handled", func() bool { return tg.got.Load() == 1 })
	if s := tg.Stats(); s.RoomKept == 0 || s.BudgetWaits < s.RoomKept {
		t.Errorf("no frame counted waiting for the room kept: %+v", s)
	}
	tg.free()
	tg.waitFor(t, "every frame handled", func() bool { return tg.got.Load() == hosts*conns+1 })
	if s := tg.Stats(); s.Refused != 0 || s.Shed != 0 {
		t.Fatalf("%+v", s)
	}
}

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
