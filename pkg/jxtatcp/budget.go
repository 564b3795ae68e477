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
// more to finish). A claim lasts until the frame's handler returns, and a
// handler may wait on the application (a full pipe queue), so without a
// host's share one host's frames parked in handlers, one per connection,
// held the whole budget and no other peer's frame was read. A claim is
// held at the peer's pace, so, when a frame waits, the budget sheds
// claims that hold it cheaply: a frame older than the frame timeout that,
// at its rate so far, would not finish within another frame timeout is
// cut, slowest first, until the waiting frame fits — among its own host's
// claims when it waits for its host's share. Holding the budget then
// costs a peer as much bandwidth as filling it twice per frame timeout
// (1 GiB per 40 s by default), where MinFrameRate alone let 16
// connections at 64 KiB/s hold 1 GiB for 17 minutes; a frame that ends
// within two frame timeouts, or any frame while no one waits, is never
// cut. A frame in its handler has been read whole, so it is never cut.
type budget struct {
	mu        sync.Mutex
	limit     int64
	hostLimit int64
	used      int64
	hosts     map[string]int64 // bytes claimed, by host (hostOf)
	timeout   time.Duration    // the frame timeout
	freed     chan struct{}
	held      map[*claim]struct{}
}

// claim is one frame's hold on the budget.
type claim struct {
	c     *conn
	host  string // its connection's
	n     int64
	start time.Time    // when the claim was granted (under budget.mu)
	got   atomic.Int64 // body bytes read so far
	shed  bool         // cut to make room (under budget.mu)
}

// shedCheck is how often a frame waiting for the budget looks again for
// claims to shed: the rule judges rates averaged over a frame timeout,
// so a second's delay in applying it changes nothing.
const shedCheck = time.Second

func (b *budget) acquire(ctx context.Context, cl *claim) error {
	var tick *time.Timer
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		b.mu.Lock()
		hostUsed := b.hosts[cl.host]
		hostFits := hostUsed == 0 || hostUsed+cl.n <= b.hostLimit
		if hostFits && (b.used == 0 || b.used+cl.n <= b.limit) {
			b.used += cl.n
			b.hosts[cl.host] = hostUsed + cl.n
			cl.start = time.Now()
			b.held[cl] = struct{}{}
			b.mu.Unlock()
			return nil
		}
		// A wait for the host's share is freed only by its own claims.
		host := ""
		if !hostFits {
			host = cl.host
		}
		victims := b.shedFor(cl.n, host, time.Now())
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
			return ErrClosed
		}
	}
}

// shedFor marks, slowest first, the claims to cut so that n fits once
// they are released, and returns them; none when cutting every eligible
// claim would not make room. With host, it makes room in that host's
// share among its claims; with "", in the budget among all. Under b.mu.
func (b *budget) shedFor(n int64, host string, now time.Time) []*claim {
	type cand struct {
		cl   *claim
		rate float64 // bytes/s so far
	}
	limit, used := b.limit, b.used
	if host != "" {
		limit, used = b.hostLimit, b.hosts[host]
	}
	var cands []cand
	pending := int64(0) // already shed, not yet released
	for cl := range b.held {
		if host != "" && cl.host != host {
			continue
		}
		if cl.shed {
			pending += cl.n
			continue
		}
		age := now.Sub(cl.start)
		if age < b.timeout {
			continue
		}
		got := cl.got.Load()
		rate := float64(got) / age.Seconds()
		if rate > 0 && float64(cl.n-got)/rate <= b.timeout.Seconds() {
			continue // ends within another frame timeout
		}
		cands = append(cands, cand{cl, rate})
	}
	need := used - pending + n - limit
	if need <= 0 {
		return nil // room is on its way
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
