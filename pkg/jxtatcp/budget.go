package jxtatcp

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// budget bounds the bytes of frames being read and handled, in all and
// by remote host. A frame claims its whole length before its body is
// read, so that frames never wait for one another half-read (claims
// taken as bytes arrive could fill the budget with frames that each need
// more to finish). A claim lasts until the frame's handler returns, or,
// if the handler held it (Incoming.Hold), until it is released, and a
// handler may wait on the application (a full pipe queue), so without a
// host's share one host's frames parked in handlers, one per connection,
// held the whole budget and no other peer's frame was read.
//
// Shares alone still let four hosts at a quarter each hold it all, and
// hosts are cheap (127.0.0.1 to .4, four IPv6 /64s), so room is kept for
// hosts holding little: while another host holds part of the budget, a
// host's claim is granted only if the host then holds no more than the
// budget then leaves free. Each host that fills what it may leaves at
// least as much to the others, so free room only halves with each
// further host: by default, three hosts at their quarter and a fourth
// at what it may then take leave 128 MiB, room for a largest frame, and
// keeping out a frame of a few KiB takes some twenty hosts each holding
// its claims. A host that is the only one holding anything claims up to
// its share, so a lone peer is not held back by the rule.
//
// A claim is held at the peer's pace, so, when a frame waits, the budget
// sheds claims that hold it cheaply: a frame older than the frame
// timeout that, at its rate so far, would not finish within another
// frame timeout is cut, slowest first, until the waiting frame fits —
// among its own host's claims when it waits for its host's share, among
// its own host's and those of hosts holding more than it would when it
// waits for the room kept. Holding the budget then costs a peer as much
// bandwidth as filling it twice per frame timeout (1 GiB per 40 s by
// default), where MinFrameRate alone let 16 connections at 64 KiB/s hold
// 1 GiB for 17 minutes; a frame that ends within two frame timeouts, or
// any frame while no one waits, is never cut. A frame in its handler or
// held has been read whole, so it is never cut.
type budget struct {
	mu        sync.Mutex
	limit     int64
	hostLimit int64
	used      int64
	hosts     map[string]int64 // bytes claimed, by host (hostOf)
	timeout   time.Duration    // the frame timeout
	freed     chan struct{}
	held      map[*claim]struct{}
	waiting   int // frames waiting in acquire (for tests)

	// waits counts frames that waited before being read; roomWaits,
	// those of them that waited for the room kept for hosts holding
	// little (Stats.BudgetWaits, Stats.RoomKept).
	waits, roomWaits atomic.Uint64
}

// claim is one frame's hold on the budget.
type claim struct {
	c     *conn
	host  string // its connection's
	n     int64
	start time.Time    // when the claim was granted (under budget.mu)
	got   atomic.Int64 // body bytes read so far
	shed  bool         // cut to make room (under budget.mu)
	// kept is set once the frame's handler returned having held the
	// claim (Incoming.Hold): it is released by whoever held it, not by
	// the reader.
	kept atomic.Bool
}

// shedCheck is how often a frame waiting for the budget looks again for
// claims to shed: the rule judges rates averaged over a frame timeout,
// so a second's delay in applying it changes nothing.
const shedCheck = time.Second

// wait is what a frame's claim waits for.
type wait int

const (
	granted   wait = iota
	forShare       // its host's share is full
	forBudget      // the budget is full
	forRoom        // its host would hold more than the budget then leaves free
)

// check says whether cl may be granted now, or what it waits for. A
// host holding nothing always fits its share, and anything fits an empty
// budget: the options keep both at least a frame's maximum. Under b.mu.
func (b *budget) check(cl *claim) wait {
	h := b.hosts[cl.host]
	switch {
	case h > 0 && h+cl.n > b.hostLimit:
		return forShare
	case b.used > 0 && b.used+cl.n > b.limit:
		return forBudget
	case b.used > h && h+cl.n > b.limit-b.used-cl.n:
		return forRoom
	}
	return granted
}

func (b *budget) acquire(ctx context.Context, cl *claim) error {
	var tick *time.Timer
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	waited, forRoomCounted := false, false
	for {
		b.mu.Lock()
		w := b.check(cl)
		if w == granted {
			b.used += cl.n
			b.hosts[cl.host] += cl.n
			cl.start = time.Now()
			b.held[cl] = struct{}{}
			if waited {
				b.waiting--
			}
			b.mu.Unlock()
			return nil
		}
		if !waited {
			waited = true
			b.waiting++
			b.waits.Add(1)
		}
		if w == forRoom && !forRoomCounted {
			forRoomCounted = true
			b.roomWaits.Add(1)
		}
		victims := b.shedFor(cl, w, time.Now())
		freed := b.freed
		b.mu.Unlock()
		for _, v := range victims {
			v.c.close(ErrFrame)
		}
		if tick == nil {
			tick = time.NewTimer(shedCheck)
		} else {
			tick.Reset(shedCheck)
		}
		select {
		case <-freed:
		case <-tick.C:
		case <-ctx.Done():
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
			return ErrClosed
		}
	}
}

// shedFor marks, slowest first, the claims to cut so that cl, waiting
// for w, fits once they are released, and returns them; none when
// cutting every eligible claim would not make room. A wait for its
// host's share is freed only by that host's claims; a wait for the room
// kept, by its host's and those of hosts holding more than it then
// would; a wait for the budget, by any. Under b.mu.
func (b *budget) shedFor(cl *claim, w wait, now time.Time) []*claim {
	host, h := cl.host, b.hosts[cl.host]
	switch w {
	case forShare:
		return b.shed(h+cl.n-b.hostLimit, func(o *claim) bool { return o.host == host }, nil, now)
	case forRoom:
		// Granted once used + n <= limit - (h + n).
		return b.shed(b.used+cl.n+h+cl.n-b.limit, nil, func(o *claim) bool {
			return o.host == host || b.hosts[o.host] > h+cl.n
		}, now)
	default:
		return b.shed(b.used+cl.n-b.limit, nil, nil, now)
	}
}

// shed marks, slowest first, eligible claims (nil: any) to cut until
// need bytes are freed, counting the claims of scope (nil: all) already
// cut and not yet released, and returns them; none when cutting every
// eligible claim would not free need. Under b.mu.
func (b *budget) shed(need int64, scope, eligible func(*claim) bool, now time.Time) []*claim {
	type cand struct {
		cl   *claim
		rate float64 // bytes/s so far
	}
	var cands []cand
	for cl := range b.held {
		if scope != nil && !scope(cl) {
			continue
		}
		if cl.shed {
			need -= cl.n // room on its way
			continue
		}
		if eligible != nil && !eligible(cl) {
			continue
		}
		age := now.Sub(cl.start)
		if age < b.timeout {
			continue
		}
		got := cl.got.Load()
		if got == cl.n {
			continue // read: handled or held, nothing to cut
		}
		rate := float64(got) / age.Seconds()
		if rate > 0 && float64(cl.n-got)/rate <= b.timeout.Seconds() {
			continue // ends within another frame timeout
		}
		cands = append(cands, cand{cl, rate})
	}
	if need <= 0 {
		return nil
	}
	slices.SortFunc(cands, func(x, y cand) int { return cmp.Compare(x.rate, y.rate) })
	var out []*claim
	for _, c := range cands {
		if need <= 0 {
			break
		}
		out = append(out, c.cl)
		need -= c.cl.n
	}
	if need > 0 {
		return nil
	}
	for _, cl := range out {
		cl.shed = true
	}
	return out
}

func (b *budget) wasShed(cl *claim) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return cl.shed
}

func (b *budget) release(cl *claim) {
	b.mu.Lock()
	b.used -= cl.n
	if b.hosts[cl.host] -= cl.n; b.hosts[cl.host] == 0 {
		delete(b.hosts, cl.host)
	}
	delete(b.held, cl)
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
