package pipe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// BindingProtocol pushes bindings to neighbours, in the spirit of JXTA's
// Shared Resource Distributed Index (SRDI), where edge peers push the
// index of what they publish to their rendezvous: a peer that binds a
// pipe (an input pipe, a bidirectional pipe listener or an Announce
// role) tells the peers it is connected to, and tells them again when it
// unbinds. On a fresh stream it writes one JXTA message with the elements
// jxta:PipeId, jxta:Role (as ResolverProtocol's query) and jxta:Bound
// ("true" or "false"), and closes it; there is no answer. The sender is
// the stream's authenticated peer, never a claim in the message.
//
// A peer keeps what its connected neighbours pushed, until they unbind or
// disconnect, and when asked by ResolverProtocol for a pipe it has not
// bound itself, it answers with referrals to the neighbours that have
// (jxta:Referral elements, each a multiaddr ending in /p2p/<peer ID>),
// which the asking peer then asks itself. When it has no referral to
// give, it remembers the asker for pendingFor, and if a neighbour pushes
// the pipe's binding meanwhile, it forwards the push to the asker with
// the binder as a referral (the same message, with jxta:Referral
// elements): a resolution still running, waiting on the DHT, asks the
// new binder at once. A new binder is found this way as soon as it has
// told its neighbours, without waiting for its provider record to reach
// the DHT. A referral is a hint, never an answer: the referred peer is
// asked, and must prove the binding where the pipe needs proof. A
// forwarded push is never indexed nor forwarded again.
const BindingProtocol protocol.ID = "/p2pmsg/pipe-binding/1.0.0"

// Bounds of the referral index and of referral answers.
const (
	// maxIndexPerPeer bounds the bindings kept for one neighbour: a
	// neighbour pushing more has the rest ignored (and counted,
	// Stats.IgnoredBindings), so a misbehaving peer holds at most this
	// many entries of a node's memory. A node binds a few pipes; a server
	// of many binds hundreds.
	maxIndexPerPeer = 1024
	// maxReferrals bounds the peers one answer refers to, and
	// maxReferralAddrs the addresses given for each: the answer stays
	// well within maxQuerySize, and an asking peer follows few of them.
	maxReferrals     = 4
	maxReferralAddrs = 4
	// pendingFor is how long a peer remembers an asker it could not
	// answer: the pipe service's default resolve timeout, as long as the
	// asker's resolution may still be running. maxPendingPipes bounds
	// the pipes remembered and maxPendingAskers the askers of each, so
	// that peers asking for many pipes hold a bounded part of a node's
	// memory (and its forwarding work) however fast they ask.
	pendingFor       = 10 * time.Second
	maxPendingPipes  = 1024
	maxPendingAskers = 64
)

// bindingIndex is what neighbours pushed: per pipe key and role, the
// connected peers that bind it, and per peer what it binds (to forget it
// when the peer disconnects).
type bindingIndex struct {
	mu      sync.Mutex
	binders map[bindingKey]map[peer.ID]struct{}
	byPeer  map[peer.ID]map[bindingKey]struct{}
}

// add records that p binds k; it reports false when p has
// maxIndexPerPeer entries already.
func (x *bindingIndex) add(p peer.ID, k bindingKey) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.binders == nil {
		x.binders, x.byPeer = map[bindingKey]map[peer.ID]struct{}{}, map[peer.ID]map[bindingKey]struct{}{}
	}
	mine := x.byPeer[p]
	if _, ok := mine[k]; ok {
		return true
	}
	if len(mine) >= maxIndexPerPeer {
		return false
	}
	if mine == nil {
		mine = map[bindingKey]struct{}{}
		x.byPeer[p] = mine
	}
	mine[k] = struct{}{}
	if x.binders[k] == nil {
		x.binders[k] = map[peer.ID]struct{}{}
	}
	x.binders[k][p] = struct{}{}
	return true
}

// remove forgets that p binds k.
func (x *bindingIndex) remove(p peer.ID, k bindingKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(p, k)
}

func (x *bindingIndex) removeLocked(p peer.ID, k bindingKey) {
	if mine := x.byPeer[p]; mine != nil {
		delete(mine, k)
		if len(mine) == 0 {
			delete(x.byPeer, p)
		}
	}
	if b := x.binders[k]; b != nil {
		delete(b, p)
		if len(b) == 0 {
			delete(x.binders, k)
		}
	}
}

// forget drops everything p pushed.
func (x *bindingIndex) forget(p peer.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.byPeer[p] {
		x.removeLocked(p, k)
	}
}

// lookup returns up to maxReferrals peers that bind k, except not.
func (x *bindingIndex) lookup(k bindingKey, not peer.ID) []peer.ID {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []peer.ID
	for p := range x.binders[k] {
		if p != not && len(out) < maxReferrals {
			out = append(out, p)
		}
	}
	return out
}

// size is how many entries the index holds for p.
func (x *bindingIndex) size(p peer.ID) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byPeer[p])
}

// pendingAsks are the askers a peer could not answer, by pipe key and
// role, with when they asked.
type pendingAsks struct {
	mu   sync.Mutex
	asks map[bindingKey]map[peer.ID]time.Time
	// clock, if set, is the time asks are stamped and expired with
	// instead of time.Now (a test's, export_test.go).
	clock func() time.Time
}

// now is the time, read with x.mu held.
func (x *pendingAsks) now() time.Time {
	if x.clock != nil {
		return x.clock()
	}
	return time.Now()
}

// note remembers that p asked for k now, unless the bounds are reached
// (after expired entries are dropped).
func (x *pendingAsks) note(k bindingKey, p peer.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	if x.asks == nil {
		x.asks = map[bindingKey]map[peer.ID]time.Time{}
	}
	a := x.asks[k]
	if a == nil && len(x.asks) >= maxPendingPipes {
		for k2, a2 := range x.asks {
			expire(a2, now)
			if len(a2) == 0 {
				delete(x.asks, k2)
			}
		}
		if len(x.asks) >= maxPendingPipes {
			return
		}
	}
	if a == nil {
		a = map[peer.ID]time.Time{}
		x.asks[k] = a
	}
	if _, ok := a[p]; !ok && len(a) >= maxPendingAskers {
		if expire(a, now); len(a) >= maxPendingAskers {
			return
		}
	}
	a[p] = now
}

// expire drops the askers of one pipe that asked before now-pendingFor.
func expire(a map[peer.ID]time.Time, now time.Time) {
	for p, at := range a {
		if now.Sub(at) > pendingFor {
			delete(a, p)
		}
	}
}

// take returns the askers of k still waiting, and forgets them.
func (x *pendingAsks) take(k bindingKey) []peer.ID {
	x.mu.Lock()
	defer x.mu.Unlock()
	a := x.asks[k]
	delete(x.asks, k)
	expire(a, x.now())
	var out []peer.ID
	for p := range a {
		out = append(out, p)
	}
	return out
}

// size is how many askers are remembered in all.
func (x *pendingAsks) size() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, a := range x.asks {
		n += len(a)
	}
	return n
}

// hint is a pushed binding for the resolutions running here: from
// pushed it, refs are the binders it names (from itself, or for a
// forwarded push the binders it was told of).
type hint struct {
	from peer.ID
	refs []peer.AddrInfo
}

// hintsFor registers a running resolution of k for pushed bindings; the
// function it returns unregisters it.
func (s *Service) hintsFor(k bindingKey) (<-chan hint, func()) {
	ch := make(chan hint, 4)
	s.mu.Lock()
	if s.resolving == nil {
		s.resolving = map[bindingKey]map[chan hint]struct{}{}
	}
	if s.resolving[k] == nil {
		s.resolving[k] = map[chan hint]struct{}{}
	}
	s.resolving[k][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.resolving[k], ch)
		if len(s.resolving[k]) == 0 {
			delete(s.resolving, k)
		}
		s.mu.Unlock()
	}
}

// hint hands a pushed binding to the resolutions of k running here,
// without waiting for them.
func (s *Service) hint(k bindingKey, h hint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.resolving[k] {
		select {
		case ch <- h:
		default:
		}
	}
}

// pushBinding tells the connected peers (as many as a resolution asks,
// WithQueryPeers) that this peer now binds, or no longer binds, the pipe
// in role; in the background, best effort.
func (s *Service) pushBinding(pipe id.ID, role string, bound bool) {
	peers := s.host.Network().Peers()
	if len(peers) > s.opts.queryPeers {
		peers = peers[:s.opts.queryPeers]
	}
	m := message.New(message.Text(message.JXTANamespace, "PipeId", pipe.String()), message.Text(message.JXTANamespace, "Role", role),
		message.Text(message.JXTANamespace, "Bound", strconv.FormatBool(bound)))
	s.send(peers, m)
}

// send writes m to each of peers on BindingProtocol, in the background.
func (s *Service) send(peers []peer.ID, m *message.Message) {
	if len(peers) == 0 {
		return
	}
	b, err := wire.Marshal(m)
	if err != nil {
		return
	}
	s.background(queryTimeout, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.pushTo(ctx, p, b)
			}()
		}
		wg.Wait()
	})
}

// pushTo writes one binding message to p.
func (s *Service) pushTo(ctx context.Context, p peer.ID, b []byte) {
	st, err := s.host.NewStream(ctx, p, BindingProtocol)
	if err != nil {
		return // a peer without the protocol, or gone: it is asked instead
	}
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	if _, err := st.Write(b); err != nil {
		st.Reset()
		return
	}
	st.Close()
}

// handleBinding records one neighbour's pushed binding.
func (s *Service) handleBinding(st network.Stream) {
	defer st.Close()
	m, ok := readRequest(st)
	if !ok {
		return
	}
	pipe, role, bound, err := parseBinding(m)
	if err != nil {
		s.ignoredBindings.Add(1)
		st.Reset()
		return
	}
	from := st.Conn().RemotePeer()
	k := bindingKey{Key(pipe), role}
	if refs := parseReferrals(m); len(refs) > 0 {
		// Forwarded by a neighbour we asked: for the resolutions
		// running here (which follow it only from a peer they asked in
		// vain), never indexed nor forwarded again.
		if bound {
			s.hint(k, hint{from, refs})
		}
		return
	}
	if !bound {
		s.index.remove(from, k)
		return
	}
	if !s.index.add(from, k) {
		s.ignoredBindings.Add(1)
		return
	}
	if cs := s.host.Network().Connectedness(from); cs != network.Connected && cs != network.Limited {
		// It disconnected while this push was read; disconnected may
		// have forgotten its bindings before this one was added.
		s.index.remove(from, k)
		return
	}
	// Resolutions of the pipe running here ask the binder at once, and
	// those who asked for it in vain are told.
	s.hint(k, hint{from, []peer.AddrInfo{{ID: from}}})
	var askers []peer.ID
	for _, p := range s.pending.take(k) {
		if p != from {
			askers = append(askers, p)
		}
	}
	if len(askers) > 0 {
		fwd := m.Clone()
		fwd.Add(s.referralElements([]peer.ID{from})...)
		s.send(askers, fwd)
	}
}

// ErrBinding reports a malformed pushed binding.
var ErrBinding = errors.New("pipe: malformed pushed binding")

// parseBinding reads a pushed binding: the pipe, the role and whether it
// is bound or unbound.
func parseBinding(m *message.Message) (id.ID, string, bool, error) {
	pipe, role, err := parseQuery(m)
	if err != nil {
		return id.ID{}, "", false, fmt.Errorf("%w: %w", ErrBinding, err)
	}
	e, ok := m.Get(message.JXTANamespace, "Bound")
	if !ok {
		return id.ID{}, "", false, fmt.Errorf("%w: Bound missing", ErrBinding)
	}
	bound, err := strconv.ParseBool(string(e.Data))
	if err != nil || (string(e.Data) != "true" && string(e.Data) != "false") {
		return id.ID{}, "", false, fmt.Errorf("%w: Bound %q", ErrBinding, e.Data)
	}
	return pipe, role, bound, nil
}

// referralElements are jxta:Referral elements naming peers, with the
// addresses this peer knows for them.
func (s *Service) referralElements(peers []peer.ID) []message.Element {
	var out []message.Element
	for _, p := range peers {
		self, err := ma.NewComponent("p2p", p.String())
		if err != nil {
			continue
		}
		addrs := s.host.Peerstore().Addrs(p)
		if len(addrs) > maxReferralAddrs {
			addrs = addrs[:maxReferralAddrs]
		}
		if len(addrs) == 0 {
			out = append(out, message.Bytes(message.JXTANamespace, "Referral", self.Bytes()))
		}
		for _, a := range addrs {
			out = append(out, message.Bytes(message.JXTANamespace, "Referral", a.Encapsulate(self).Bytes()))
		}
	}
	return out
}

// parseReferrals reads an answer's referrals: at most maxReferrals peers
// with at most maxReferralAddrs addresses each; elements that are not a
// multiaddr ending in /p2p/<peer ID>, and those beyond the bounds, are
// skipped.
func parseReferrals(m *message.Message) []peer.AddrInfo {
	var out []peer.AddrInfo
	for _, e := range m.Elements() {
		if e.Namespace != message.JXTANamespace || e.Name != "Referral" {
			continue
		}
		a, err := ma.NewMultiaddrBytes(e.Data)
		if err != nil {
			continue
		}
		ai, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			continue
		}
		i := 0
		for i < len(out) && out[i].ID != ai.ID {
			i++
		}
		if i == len(out) {
			if len(out) == maxReferrals {
				continue
			}
			out = append(out, peer.AddrInfo{ID: ai.ID})
		}
		if len(out[i].Addrs) < maxReferralAddrs {
			out[i].Addrs = append(out[i].Addrs, ai.Addrs...)
		}
	}
	return out
}
