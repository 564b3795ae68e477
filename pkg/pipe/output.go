package pipe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// ResolveOption configures how an output pipe or Connect finds the
// pipe's binding.
type ResolveOption func(*resolveConfig) error

type resolveConfig struct {
	peers     []peer.AddrInfo
	jxtaPeers []string // ToJXTAPeers
}

// ToPeers resolves the pipe only among these peers (JXTA's
// createOutputPipe with a peer set), connecting to them first when
// addresses are given; no other peer is asked. With no peers it changes
// nothing (as JXTA's empty set): the connected peers and the DHT are.
// Each resolution dials them afresh, however often dials failed before
// (libp2p's backoff from failed dials is not waited for), so a peer
// back from an outage is reached by the next Send. When none of the
// peers can be reached, resolving fails with an error that matches
// ErrPeerGone as well as ErrNotResolved.
func ToPeers(peers ...peer.AddrInfo) ResolveOption {
	return func(c *resolveConfig) error {
		for _, p := range peers {
			if p.ID == "" {
				return fmt.Errorf("%w: peer without an ID", ErrBadOption)
			}
		}
		c.peers = append(c.peers, peers...)
		return nil
	}
}

// OutputPipe sends to the pipe's input(s), wherever they are bound. It is
// safe for concurrent use; messages from one output pipe keep their order.
type OutputPipe struct {
	svc *Service
	adv *adv.PipeAdvertisement
	key string
	rc  resolveConfig

	// unicast and secure: the resolved binding, nil until resolved
	// again. It is read without a lock by every Send; mu serialises
	// resolving and guards sentTo.
	bound  atomic.Pointer[binding]
	mu     sync.Mutex
	sentTo map[peer.ID]struct{}    // peers sent to since the last Flush
	noted  atomic.Pointer[binding] // the binding last added to sentTo
	// flushing counts, per peer, the Flushes under way that took it from
	// sentTo: a loss naming no destination in particular (sortLoss) is
	// still the pipe's until they end.
	flushing map[peer.ID]int
	// boundTo holds every peer the pipe has sent to (up to maxBoundTo;
	// boundToAll once there were more): a loss on another peer's stream
	// that names the pipe's key is another output pipe's of the same
	// pipe (one bound on several peers), never this one's (loss.go).
	// Each peer added is counted in the service (noteBoundTo) until the
	// pipe is released from it at Close.
	boundTo    map[peer.ID]struct{}
	boundToAll bool
	released   bool

	// refusals reported by peers, for the next Flush; under mu
	refused  []*endpoint.RefusedError
	refusedN int
	// lost is a possible loss of the pipe's messages that another
	// pipe's Flush learnt of, for the next Flush (loss.go).
	lost atomic.Pointer[endpoint.LostError]

	// unicast and secure: what the pipe's Sends go through, so that
	// Close ends those waiting for a slow receiver.
	grp *endpoint.SendGroup

	// propagate
	topic *pubsub.Topic
	once  sync.Once

	closed atomic.Bool
}

var _ interface {
	Send(context.Context, *message.Message) error
} = (*OutputPipe)(nil)

// NewOutputPipe creates an output pipe for a. For unicast and secure
// pipes it resolves the input's peer first and fails with ErrNotResolved
// if none is found before ctx or the resolve timeout ends. A propagate
// output pipe joins the pipe's topic and returns at once; WaitMembers
// waits for members to be known.
func (s *Service) NewOutputPipe(ctx context.Context, a *adv.PipeAdvertisement, opts ...ResolveOption) (*OutputPipe, error) {
	if err := checkAdv(a); err != nil {
		return nil, err
	}
	if err := s.closedErr("output pipe " + a.ID.String()); err != nil {
		return nil, err
	}
	o := &OutputPipe{svc: s, adv: a, key: Key(a.ID)}
	for _, opt := range opts {
		if err := opt(&o.rc); err != nil {
			return nil, err
		}
	}
	if a.Type == adv.Propagate {
		topic, err := s.joinTopic(a)
		if err != nil {
			return nil, err
		}
		o.topic = topic
		if err := s.track(o); err != nil {
			return nil, err
		}
		s.connectProviders(ctx, a, o.rc.peers)
		return o, nil
	}
	o.grp = s.ep.NewSendGroup()
	if _, err := o.resolved(ctx); err != nil {
		return nil, err
	}
	if err := s.track(o); err != nil {
		return nil, err
	}
	return o, nil
}

// track keeps o among the service's open output pipes, which Close
// closes; if the service closed meanwhile, it closes o.
func (s *Service) track(o *OutputPipe) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		o.Close()
		return fmt.Errorf("%w: pipe service", ErrClosed)
	}
	s.openOutputs[o] = struct{}{}
	s.mu.Unlock()
	return nil
}

// Adv returns the pipe's advertisement.
func (o *OutputPipe) Adv() *adv.PipeAdvertisement { return o.adv }

// binding is where a unicast or secure output pipe sends: a libp2p
// peer, or (peer empty) a JXTA peer's PipeService listener.
type binding struct {
	peer peer.ID
	dst  endpoint.Address
}

// RemotePeer returns the peer a unicast or secure output pipe currently
// sends to, "" while it must resolve again. Its identity is proven by the
// connection's handshake.
func (o *OutputPipe) RemotePeer() peer.ID {
	if b := o.bound.Load(); b != nil {
		return b.peer
	}
	return ""
}

func (o *OutputPipe) resolved(ctx context.Context) (*binding, error) {
	if b := o.bound.Load(); b != nil {
		return b, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.bound.Load(); b != nil { // resolved while we waited
		return b, nil
	}
	if o.closed.Load() { // a Send that raced Close: no resolving again
		return nil, fmt.Errorf("%w: output pipe %s", ErrClosed, o.adv.ID)
	}
	if len(o.rc.jxtaPeers) > 0 {
		if o.svc.jxta == nil {
			return nil, fmt.Errorf("%w: JXTA peers given, but the endpoint is not a JXTA peer (endpoint.WithJXTA)", ErrBadOption)
		}
		if o.adv.Type != adv.Unicast {
			return nil, fmt.Errorf("%w: only unicast pipes are shared with JXTA peers (their transport does not encrypt)", ErrWrongType)
		}
		dst, err := o.svc.jxta.resolve(ctx, o.adv, o.rc.jxtaPeers)
		if err != nil {
			return nil, err
		}
		b := &binding{dst: dst}
		o.bound.Store(b)
		return b, nil
	}
	p, err := o.svc.resolve(ctx, o.adv, RoleInput, o.rc.peers)
	if err != nil {
		return nil, err
	}
	b := &binding{peer: p, dst: endpoint.PeerAddress(p, DataService, o.key)}
	o.svc.protect(p)
	o.bound.Store(b)
	if o.closed.Load() { // Close ran meanwhile: one of it and us unprotects
		o.forget(b)
		return nil, fmt.Errorf("%w: output pipe %s", ErrClosed, o.adv.ID)
	}
	return b, nil
}

// forget drops b, so that the next Send resolves again, unless another
// Send has already replaced it.
func (o *OutputPipe) forget(b *binding) {
	if o.bound.CompareAndSwap(b, nil) {
		o.svc.unprotect(b.peer)
	}
}

// outputTag is the connection manager's protection of the peers output
// pipes send to.
const outputTag = "pipe-output"

// protect keeps the connection manager from trimming the connections to
// p, where an output pipe sends, until as many unprotect calls: a trimmed
// connection would cost the messages on their way (Flush would report
// them) and a resolution. Protecting nothing for a JXTA peer (p empty)
// or this node.
func (s *Service) protect(p peer.ID) {
	if p == "" || p == s.self {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.protected == nil {
		s.protected = map[peer.ID]int{}
	}
	if s.protected[p]++; s.protected[p] == 1 {
		s.host.ConnManager().Protect(p, outputTag)
	}
}

// senderTag marks, in the connection manager, the peers that sent on this
// node's unicast input pipes, and senderTagValue is what it is worth:
// more than the DHT's routing-table tag (5) and gossipsub's delivery tags
// (at most 15 a topic), so that a trim closes a connection a pipe's
// messages come over after those that only route. The sender protects
// its side (protect); this keeps the receiving side from closing it
// under it.
const (
	senderTag      = "pipe-sender"
	senderTagValue = 20
)

// tagSender tags p once for as long as it stays connected (the connection
// manager forgets a peer's tags when its last connection closes, and
// disconnected forgets that p was tagged).
func (s *Service) tagSender(p peer.ID) {
	if p == "" || p == s.self {
		return
	}
	if _, ok := s.senders.Load(p); ok {
		return
	}
	s.senders.Store(p, struct{}{})
	s.host.ConnManager().TagPeer(p, senderTag, senderTagValue)
}

func (s *Service) unprotect(p peer.ID) {
	if p == "" || p == s.self {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.protected[p]--; s.protected[p] <= 0 {
		delete(s.protected, p)
		s.host.ConnManager().Unprotect(p, outputTag)
	}
}

// UndeliveredError reports messages an output pipe sent that were not
// delivered: they reached a peer where the pipe was no longer bound (or
// whose input pipe refused them, as a secure pipe does over an
// unencrypted connection), which said so. It unwraps to
// endpoint.ErrRefused and to the peers' endpoint.RefusedErrors.
type UndeliveredError struct {
	Pipe  id.ID
	Count int // messages not delivered
	// Refusals are the receiving peers' reports.
	Refusals []*endpoint.RefusedError
}

func (e *UndeliveredError) Error() string {
	s := fmt.Sprintf("pipe %s: %d message(s) not delivered", e.Pipe, e.Count)
	if len(e.Refusals) > 0 {
		r := e.Refusals[len(e.Refusals)-1]
		s += fmt.Sprintf(" (refused by %s", r.Peer)
		if r.Reason != "" {
			s += ": " + r.Reason
		}
		s += ")"
	}
	return s
}

// Unwrap returns endpoint.ErrRefused and the refusals.
func (e *UndeliveredError) Unwrap() []error {
	errs := []error{endpoint.ErrRefused}
	for _, r := range e.Refusals {
		errs = append(errs, r)
	}
	return errs
}

// maxRefusalReports bounds the refusal reports an output pipe keeps for
// its next Flush; beyond, only their count grows.
const maxRefusalReports = 4096

// Send sends m on the pipe. A unicast or secure message is on its way when
// Send returns; Flush waits until it is delivered. A Send whose ctx is
// already done, and one of a message that cannot be encoded
// (wire.ErrUnencodable: nil, an invalid MIME type) or that is over the
// receiving peer's limit (an *endpoint.LimitError, endpoint.ErrTooLarge),
// fail with nothing sent, and the pipe keeps its peer. If sending fails
// otherwise the pipe forgets its peer and the next Send resolves the
// binding again; when it failed because that peer went away (it closed or
// restarted, its connection was lost or it could not be dialled again), the
// error matches ErrPeerGone, and m was not delivered.
// If the peer reports that earlier messages were refused there (the pipe
// is no longer bound on it), Send forgets that peer, resolves the binding
// again and sends m to the new binder; the earlier messages are reported
// by the next Flush (UndeliveredError), never dropped in silence. A
// propagate message goes to every member known now, best effort: with
// none known (Members is empty) it reaches nobody and Send still returns
// nil, as gossipsub's and JXTA's propagation do; WaitMembers waits for
// them. A propagate message over DefaultMaxPropagate bytes encoded fails
// with ErrTooLarge, nothing sent.
func (o *OutputPipe) Send(ctx context.Context, m *message.Message) error {
	if o.closed.Load() {
		return fmt.Errorf("%w: output pipe %s", ErrClosed, o.adv.ID)
	}
	if err := ctx.Err(); err != nil { // nothing tried: the peer is kept
		return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
	}
	if o.topic != nil {
		return o.publish(ctx, m)
	}
	for attempt := 0; ; attempt++ {
		err := o.sendOnce(ctx, m)
		if err == nil {
			return nil
		}
		if errors.Is(err, endpoint.ErrGroupClosed) { // Close cut it short
			return fmt.Errorf("%w: output pipe %s (%w)", ErrClosed, o.adv.ID, err)
		}
		if errors.Is(err, endpoint.ErrClosed) || errors.Is(err, endpoint.ErrPeerGone) {
			return belowErr(err)
		}
		var re *endpoint.RefusedError
		if !errors.As(err, &re) {
			return err
		}
		// m was not sent: the peer refused earlier messages, so the
		// binding is stale.
		o.noteRefused(re)
		if attempt == 1 {
			return fmt.Errorf("pipe %s: message not sent: %w", o.adv.ID, o.takeUndelivered())
		}
	}
}

// noteRefused records refused messages for the next Flush and forgets the
// binding that led to them.
func (o *OutputPipe) noteRefused(re *endpoint.RefusedError) {
	o.mu.Lock()
	o.refused = append(o.refused, re)
	o.refusedN += re.Count
	if len(o.refused) > maxRefusalReports { // keep the count, not every report
		o.refused = o.refused[len(o.refused)-maxRefusalReports:]
	}
	o.mu.Unlock()
	if b := o.bound.Load(); b != nil && b.peer == re.Peer {
		o.forget(b)
	}
}

// takeUndelivered returns and forgets the refusals recorded for the pipe,
// nil if none: its own, and those other Flushes learnt of from the peers
// it sent to.
func (o *OutputPipe) takeUndelivered() error {
	o.mu.Lock()
	peers, all := slices.Collect(maps.Keys(o.boundTo)), o.boundToAll
	o.mu.Unlock()
	n := o.svc.takeUndelivered(o.key, peers, all)
	o.mu.Lock()
	defer o.mu.Unlock()
	n += o.refusedN
	if n == 0 {
		return nil
	}
	e := &UndeliveredError{Pipe: o.adv.ID, Count: n, Refusals: o.refused}
	o.refused, o.refusedN = nil, 0
	return e
}

func (o *OutputPipe) sendOnce(ctx context.Context, m *message.Message) error {
	b, err := o.resolved(ctx)
	if err != nil {
		return err
	}
	if b.peer == "" { // a JXTA peer: no back channel, nothing to note
		if err := o.grp.Send(ctx, b.dst, m); err != nil {
			if !notSent(err) {
				o.forget(b)
			}
			return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
		}
		return nil
	}
	if b.peer == o.svc.self {
		if err := o.svc.deliverLocal(ctx, o.key, m); err != nil {
			o.forget(b)
			return err
		}
		return nil
	}
	if o.adv.Type == adv.UnicastSecure {
		if err := o.svc.checkSecure(b.peer); err != nil {
			return err
		}
	}
	if o.noted.Load() != b { // the map is touched only when the binding changes
		o.mu.Lock()
		if o.sentTo == nil {
			o.sentTo = map[peer.ID]struct{}{}
		}
		o.sentTo[b.peer] = struct{}{}
		o.noteBoundTo(b.peer)
		o.noted.Store(b)
		o.mu.Unlock()
	}
	if err := o.grp.Send(ctx, b.dst, m); err != nil {
		if notSent(err) {
			return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
		}
		o.forget(b)
		var re *endpoint.RefusedError
		if errors.As(err, &re) {
			return re
		}
		return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
	}
	return nil
}

func (o *OutputPipe) publish(ctx context.Context, m *message.Message) error {
	n, err := wire.Size(m)
	if err != nil {
		return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
	}
	if n > int64(o.svc.opts.maxPropagate) {
		return fmt.Errorf("%w: %d bytes on propagate pipe %s (limit %d)", ErrTooLarge, n, o.adv.ID, o.svc.opts.maxPropagate)
	}
	b, err := wire.Marshal(m)
	if err != nil {
		return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
	}
	if err := o.topic.Publish(ctx, b); err != nil {
		return fmt.Errorf("pipe %s: %w", o.adv.ID, err)
	}
	return nil
}

// Flush waits until the peers a unicast or secure output pipe sent to
// have received every message sent so far and handed it to the input
// pipe (queued it, or run the handler), or ctx ends; it returns nil only
// if every message whose Send succeeded since the last Flush was
// delivered. Messages on the endpoint are otherwise unacknowledged, so a
// program that sends and exits calls Flush first. Messages the receiving
// peers refused (the pipe was no longer bound there) are reported as an
// UndeliveredError with their count, and the pipe resolves the binding
// again for the next Send. If a failed Send may have cost earlier
// messages, Flush says so (endpoint.ErrMaybeLost). Propagate pipes have no
// such acknowledgement: Flush returns at once.
func (o *OutputPipe) Flush(ctx context.Context) error {
	if o.topic != nil {
		return nil
	}
	o.mu.Lock()
	peers := make([]peer.ID, 0, len(o.sentTo))
	for p := range o.sentTo {
		peers = append(peers, p)
	}
	o.sentTo = nil
	o.noted.Store(nil)
	if len(peers) > 0 && o.flushing == nil {
		o.flushing = map[peer.ID]int{}
	}
	for _, p := range peers {
		o.flushing[p]++
	}
	o.mu.Unlock()
	var errs []error
	for _, p := range peers {
		if err := o.svc.flushPeer(ctx, p, o.sortRefusals); err != nil {
			errs = append(errs, err)
		}
	}
	o.mu.Lock()
	for _, p := range peers {
		if o.flushing[p]--; o.flushing[p] == 0 {
			delete(o.flushing, p)
		}
	}
	o.mu.Unlock()
	var err error
	if lerr := o.takeLost(joinerr.Join(errs...)); lerr != nil {
		errs = append(errs, lerr)
	}
	if err = joinerr.Join(errs...); err != nil {
		err = fmt.Errorf("pipe %s: %w", o.adv.ID, err)
		if cerr := closedBelow(err); cerr != nil {
			err = cerr
		} else if o.closed.Load() && errors.Is(err, endpoint.ErrMaybeLost) {
			// Close cut a large Send short, which reset the stream
			// under what this Flush was to vouch for.
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		}
	}
	return joinerr.Join(o.takeUndelivered(), err)
}

// belowErr is err, a Send's failure in the endpoint service, matching
// this package's ErrClosed too when that service closed under it, and
// ErrPeerGone when the peer it sent to went away, so that callers match
// one package's sentinels for a pipe.
func belowErr(err error) error {
	if cerr := closedBelow(err); cerr != nil {
		return cerr
	}
	if errors.Is(err, endpoint.ErrPeerGone) && !errors.Is(err, ErrPeerGone) {
		return &peerGoneError{err}
	}
	return err
}

// notSent reports whether a Send's error from the endpoint means that
// none of the message was sent: the wire format cannot carry it, or it is
// over the receiving peer's limit. Both are found before it is queued or
// written, so the stream, and the binding, are as they were.
func notSent(err error) bool {
	if errors.Is(err, endpoint.ErrMaybeLost) { // an earlier failure, whatever its cause
		return false
	}
	var le *endpoint.LimitError
	return errors.Is(err, wire.ErrUnencodable) || errors.As(err, &le)
}

// peerGoneError is a Send's failure because the peer it sent to went away
// (endpoint.ErrPeerGone): it matches ErrPeerGone too.
type peerGoneError struct{ err error }

func (e *peerGoneError) Error() string   { return e.err.Error() }
func (e *peerGoneError) Unwrap() []error { return []error{ErrPeerGone, e.err} }

// closedBelow returns err matching ErrClosed too when it says that the
// endpoint service closed under a Send or Flush (Peer.Close closes it
// after the pipes, and cuts short a Send still waiting on a slow
// receiver), so that callers match one sentinel, this package's, for a
// pipe that ended by Close; nil when it does not.
func closedBelow(err error) error {
	if !errors.Is(err, endpoint.ErrClosed) || errors.Is(err, ErrClosed) {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrClosed, err)
}

// sortRefusals takes the refusals and possible losses out of an endpoint
// Flush's error: its own refusals are recorded for the pipe, those for
// other pipes (the endpoint flushes everything sent to the peer) are kept
// by the service for their output pipes, and losses go to the pipes they
// name (sortLoss). It returns what is left, its own loss included.
func (o *OutputPipe) sortRefusals(err error) error {
	var rest []error
	for _, e := range joinerr.Split(err) {
		var re *endpoint.RefusedError
		if loss, mine := o.svc.sortLoss(e, o); loss {
			if mine {
				rest = append(rest, e)
			}
			continue
		}
		switch {
		case errors.As(e, &re) && re.Service == DataService && re.Param == o.key:
			o.noteRefused(re)
		case !o.svc.sortRefusal(e):
			rest = append(rest, e)
		}
	}
	return joinerr.Join(rest...)
}

// peerKey names a pipe's messages to one peer.
type peerKey struct {
	peer peer.ID
	key  string
}

// noteUndelivered keeps a count of messages p refused for the output
// pipes of key that sent to p: the same pipe bound on other peers has
// output pipes here too, and theirs were not refused. Refusals no open
// output pipe sent anything for (its pipes to p closed since, or never
// sent to p: a peer's forgery for a pipe open here) have nobody to
// report them to and are counted, so what is kept is bounded by the
// peers the open output pipes sent to, and a real refusal is never
// dropped for room.
func (s *Service) noteUndelivered(p peer.ID, key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := peerKey{p, key}
	if s.sentPeers[k] == 0 && s.sentAll[key] == 0 {
		s.strayRefusals.Add(1)
		return
	}
	if s.undelivered == nil {
		s.undelivered = map[peerKey]int{}
	}
	s.undelivered[k] += n
}

// noteBoundTo adds p to the peers o has sent to, and o to the service's
// count of the output pipes of its key that sent to p (noteUndelivered).
// Under o.mu.
func (o *OutputPipe) noteBoundTo(p peer.ID) {
	if o.boundToAll || o.released {
		return
	}
	if _, ok := o.boundTo[p]; ok {
		return
	}
	if o.boundTo == nil {
		o.boundTo = map[peer.ID]struct{}{}
	}
	o.boundTo[p] = struct{}{}
	s := o.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sentPeers == nil {
		s.sentPeers, s.sentAll = map[peerKey]int{}, map[string]int{}
	}
	s.sentPeers[peerKey{p, o.key}]++
	if len(o.boundTo) <= s.maxBoundTo {
		return
	}
	s.sentAll[o.key]++ // first, so that the refusals kept stay
	for q := range o.boundTo {
		s.unsend(peerKey{q, o.key})
	}
	o.boundTo, o.boundToAll = nil, true
}

// releaseSent takes a closed output pipe of key that sent to peers (or
// to every peer, all) out of the count noteUndelivered keeps; refusals
// kept for a peer no open pipe of key sent to go with it.
func (s *Service) releaseSent(key string, peers []peer.ID, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range peers {
		s.unsend(peerKey{p, key})
	}
	if !all {
		return
	}
	if s.sentAll[key]--; s.sentAll[key] > 0 {
		return
	}
	delete(s.sentAll, key)
	maps.DeleteFunc(s.undelivered, func(k peerKey, _ int) bool { return k.key == key && s.sentPeers[k] == 0 })
}

// unsend counts one output pipe fewer that sent to k's peer. Under s.mu.
func (s *Service) unsend(k peerKey) {
	if s.sentPeers[k]--; s.sentPeers[k] > 0 {
		return
	}
	delete(s.sentPeers, k)
	if s.sentAll[k.key] == 0 {
		delete(s.undelivered, k)
	}
}

// takeUndelivered takes the refusals kept for key from peers, or from
// every peer if all.
func (s *Service) takeUndelivered(key string, peers []peer.ID, all bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if all {
		maps.DeleteFunc(s.undelivered, func(k peerKey, c int) bool {
			if k.key == key {
				n += c
				return true
			}
			return false
		})
		return n
	}
	for _, p := range peers {
		k := peerKey{p, key}
		n += s.undelivered[k]
		delete(s.undelivered, k)
	}
	return n
}

// Members returns the connected peers known to be bound to a propagate
// pipe (nil for other pipes).
func (o *OutputPipe) Members() []peer.ID {
	if o.topic == nil {
		return nil
	}
	return o.topic.ListPeers()
}

// WaitMembers waits until at least n members of a propagate pipe are
// known and reachable, or ctx ends. Gossipsub learns members from its
// neighbours' subscription announcements, so a message sent right after a
// peer binds can miss it; waiting avoids that.
//
// Only members among this node's connected peers count (those Members
// lists): a member reached through other peers gets the message, relayed
// by the mesh, but is never counted, so n is at most the members this
// node is connected to. In a chain a–b–c, a's WaitMembers(ctx, 2) waits
// until ctx ends; WaitMembers(ctx, 1) returns once b is known, and c
// then gets what a sends through b.
//
// A member counts once this node's pubsub has its own stream to it, not
// only its announcement: a member announced before pubsub has set up its
// way to it is listed, but messages published to it then are dropped, and
// one sent only to members (this pipe's node does not subscribe) is never
// gossiped again. Under load on two cores that window lasted long enough
// to lose a message in a test. On a node that is a member of the pipe
// too, it also waits until gossipsub's mesh for the pipe holds
// min(n, 5) peers: such a node publishes only to its mesh.
func (o *OutputPipe) WaitMembers(ctx context.Context, n int) error {
	if o.topic == nil {
		return fmt.Errorf("%w: only propagate pipes have members", ErrWrongType)
	}
	for {
		if o.closed.Load() {
			return fmt.Errorf("%w: output pipe %s", ErrClosed, o.adv.ID)
		}
		reach := o.reachable()
		if reach >= n && o.meshed(n) {
			return nil
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("pipe %s: %d of %d members reachable (%d known): %w", o.adv.ID, reach, n, len(o.topic.ListPeers()), err)
		}
	}
}

// meshed reports whether, when this node is a member of the pipe too,
// its own gossipsub mesh for the topic holds min(n, GossipSubDlo) peers:
// a member publishes only to its mesh, which its heartbeat fills a second
// after it joined (and again after churn), so until then what it sends
// reaches no one, and is not repaired later (mesh peers get no gossip).
// Up to Dlo members all join the mesh; beyond, the mesh relays to the
// rest. A node that is not a member publishes to fanout peers it picks
// from the members known, and a router of the application's
// (WithPubSub) is not watched: both are taken as meshed.
func (o *OutputPipe) meshed(n int) bool {
	s := o.svc
	name := o.topic.String()
	s.mu.Lock()
	t := s.topics[name]
	member := s.ownPubSub && t != nil && len(t.inputs) > 0
	s.mu.Unlock()
	return !member || s.gossip.meshSize(name) >= min(n, pubsub.GossipSubDlo)
}

// reachable counts the members this node's pubsub has opened a stream
// to.
func (o *OutputPipe) reachable() int {
	k := 0
	for _, p := range o.topic.ListPeers() {
		if o.svc.pubsubStreamTo(p) {
			k++
		}
	}
	return k
}

// pubsubStreamTo reports whether this node has an outbound pubsub stream
// to p: pubsub sets up its queue for a peer before it opens the stream,
// so from then on what it publishes to p is not dropped.
func (s *Service) pubsubStreamTo(p peer.ID) bool {
	for _, c := range s.host.Network().ConnsToPeer(p) {
		for _, st := range c.GetStreams() {
			proto := string(st.Protocol())
			if st.Stat().Direction == network.DirOutbound && (strings.HasPrefix(proto, "/meshsub/") || strings.HasPrefix(proto, "/floodsub/")) {
				return true
			}
		}
	}
	return false
}

// Close releases the pipe; Send then fails with ErrClosed. As with
// net.Conn, a unicast or secure pipe's Send waiting for a slow receiver
// (for room in the peer's queue, or in a write the receiver stalls)
// returns then, failing with ErrClosed, its message not sent, and
// nothing that other Sends had sent is lost; but a large message (over
// 16 KiB) cut short in its write resets the stream, as when a Send's ctx
// ends, and Flush reports what may be lost (endpoint.ErrMaybeLost). A
// propagate pipe's Send never waits for a receiver (gossipsub drops what
// a slow member cannot take, counted in Stats), so there is nothing to
// cut short. Close does not wait for the Sends it ends.
func (o *OutputPipe) Close() error {
	o.once.Do(func() {
		o.closed.Store(true)
		if b := o.bound.Swap(nil); b != nil {
			o.svc.unprotect(b.peer)
		}
		if o.grp != nil {
			o.grp.Close()
		}
		if o.topic != nil {
			o.svc.leaveTopic(o.adv, nil)
		} else {
			o.mu.Lock()
			o.released = true
			o.svc.releaseSent(o.key, slices.Collect(maps.Keys(o.boundTo)), o.boundToAll)
			o.mu.Unlock()
		}
		o.svc.mu.Lock()
		delete(o.svc.openOutputs, o)
		o.svc.mu.Unlock()
	})
	return nil
}

// checkSecure refuses a peer reached over any connection that is not
// authenticated and encrypted.
func (s *Service) checkSecure(p peer.ID) error {
	conns := s.host.Network().ConnsToPeer(p)
	for _, c := range conns {
		if endpoint.ConnSecurity(c) == "" {
			return fmt.Errorf("%w: %s via %s", ErrInsecure, p, c.RemoteMultiaddr())
		}
	}
	return nil
}

// deliverLocal hands a message to an input pipe bound on this peer.
func (s *Service) deliverLocal(ctx context.Context, key string, m *message.Message) error {
	s.mu.Lock()
	p := s.inputs[key]
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: no longer bound on this peer", ErrNotResolved)
	}
	return p.safeDeliver(ctx, &Received{Message: m.Clone(), From: s.self, FromJXTA: s.node.JXTAPeerID(), Pipe: p.adv.ID, Security: "local"})
}
