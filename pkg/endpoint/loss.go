package endpoint

import (
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Destination is the service and parameter a message was sent to.
type Destination struct{ Service, Param string }

// LostError reports messages that may not have been delivered: a stream
// that carried them was reset before the peer confirmed them (Flush). It
// names their destinations, so that each sender sharing the peer's stream
// (the pipes above, for one) can tell whether the loss is its own. Flush
// returns it once, to whichever caller flushes the peer first.
type LostError struct {
	Peer peer.ID
	// Dests are the destinations of the messages that may be lost, the
	// first maxLostDests; Others says messages to destinations not
	// listed may be lost too (more of them, or not known).
	Dests  []Destination
	Others bool
}

func (e *LostError) Error() string {
	switch {
	case e.Others:
		return fmt.Sprintf("%v: to %s", ErrMaybeLost, e.Peer)
	case len(e.Dests) == 1:
		return fmt.Sprintf("%v: to %s/%s/%s", ErrMaybeLost, e.Peer, e.Dests[0].Service, e.Dests[0].Param)
	default:
		return fmt.Sprintf("%v: to %s (%d destinations)", ErrMaybeLost, e.Peer, len(e.Dests))
	}
}

// Unwrap returns ErrMaybeLost.
func (e *LostError) Unwrap() error { return ErrMaybeLost }

// Has reports whether messages to service/param may be among those lost.
func (e *LostError) Has(service, param string) bool {
	return e.Others || slices.Contains(e.Dests, Destination{service, param})
}

// maxLostDests bounds the destinations a sender tracks per stream: more
// than the pipes and connections an application sends on to one peer at
// once, in the usual case; beyond, a loss is everyone's (Others).
const maxLostDests = 16

// dests is a set of destinations, bounded by maxLostDests.
type dests struct {
	list   []Destination
	others bool
}

// add adds service/param. A stream usually carries one destination, or
// a few in turn: the last one added is checked first.
func (d *dests) add(service, param string) {
	n := len(d.list)
	if d.others || (n > 0 && d.list[n-1].Service == service && d.list[n-1].Param == param) {
		return
	}
	k := Destination{service, param}
	if slices.Contains(d.list, k) {
		return
	}
	if n == maxLostDests {
		d.others = true
		return
	}
	d.list = append(d.list, k)
}

// merge adds o's destinations.
func (d *dests) merge(o dests) {
	for _, k := range o.list {
		d.add(k.Service, k.Param)
	}
	d.others = d.others || o.others
}

// lostError is the LostError of messages to d, lost (or failed) on the
// way to p; with no destination known, the loss is everyone's.
func (d dests) lostError(p peer.ID) *LostError {
	return &LostError{Peer: p, Dests: slices.Clone(d.list), Others: d.others || len(d.list) == 0}
}
