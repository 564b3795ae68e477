package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// which the asking peer then asks itself. A new binder is found this way
// as soon as it has told its neighbours, without waiting for its
// provider record to reach the DHT. A referral is a hint, never an
// answer: the referred peer is asked, and must prove the binding where
// the pipe needs proof.
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

// pushBinding tells the connected peers (as many as a resolution asks,
// WithQueryPeers) that this peer now binds, or no longer binds, the pipe
// in role; in the background, best effort.
func (s *Service) pushBinding(pipe id.ID, role string, bound bool) {
	peers := s.host.Network().Peers()
	if len(peers) > s.opts.queryPeers {
		peers = peers[:s.opts.queryPeers]
	}
	if len(peers) == 0 {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	m := message.New(message.Text(message.JXTANamespace, "PipeId", pipe.String()), message.Text(message.JXTANamespace, "Role", role),
		message.Text(message.JXTANamespace, "Bound", strconv.FormatBool(bound)))
	b, err := wire.Marshal(m)
	if err != nil {
		s.wg.Done()
		return
	}
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, queryTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.pushTo(ctx, p, b)
			}()
		}
		wg.Wait()
	}()
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
	st.SetDeadline(time.Now().Add(queryTimeout))
	m, err := wire.Decode(io.LimitReader(st, maxQuerySize), wire.WithMaxMessageSize(maxQuerySize))
	if err != nil {
		st.Reset()
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
	if !bound {
		s.index.remove(from, k)
		return
	}
	if !s.index.add(from, k) {
		s.ignoredBindings.Add(1)
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

// referralElements are the jxta:Referral elements of an answer for k to
// asker: the neighbours that pushed k, with the addresses this peer
// knows for them.
func (s *Service) referralElements(k bindingKey, asker peer.ID) []message.Element {
	var out []message.Element
	for _, p := range s.index.lookup(k, asker) {
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
