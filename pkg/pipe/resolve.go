package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multihash"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// ResolverProtocol carries binding queries, in the spirit of JXTA's Pipe
// Binding Protocol: on a fresh stream the asking peer writes one JXTA
// message with the elements jxta:PipeId (the pipe ID) and jxta:Role (what
// it looks for: RoleInput, RoleBidi, RolePropagate or a role a layer
// above announced) and jxta:Nonce (16 random bytes), and closes its side;
// the peer answers with one message whose jxta:Found element is "true" or
// "false", whose jxta:PeerId is its JXTA peer ID and, when found, whose
// jxta:BindingProof proves the binding (proof.go); when not found, it may
// refer to neighbours that told it they bind the pipe (jxta:Referral,
// see BindingProtocol), which the asking peer then asks. Both messages
// are at most maxQuerySize bytes.
const ResolverProtocol protocol.ID = "/p2pmsg/pipe-resolver/1.0.0"

const (
	maxQuerySize = 4 << 10
	// queryTimeout bounds how long a peer waits for a query to arrive.
	queryTimeout = 10 * time.Second
	// Provider records are published again this often; kad-dht keeps
	// them for 48 hours.
	reprovideInterval = 12 * time.Hour
	pollInterval      = 20 * time.Millisecond
)

// Resolve finds a peer where the pipe is bound in role (RoleInput,
// RoleBidi or a role announced with Announce), as output pipes do. Only
// the ToPeers peers are asked when given; otherwise the connected peers
// and the DHT's providers. It fails with ErrNotResolved. Concurrent calls
// for the same pipe, role and peers share one resolution (a burst of
// socket Dials asks once); a caller whose ctx ends leaves it to the
// others.
func (s *Service) Resolve(ctx context.Context, a *adv.PipeAdvertisement, role string, opts ...ResolveOption) (peer.ID, error) {
	if err := checkAdv(a); err != nil {
		return "", err
	}
	if err := s.closedErr("resolving " + a.ID.String()); err != nil {
		return "", err
	}
	var rc resolveConfig
	for _, o := range opts {
		if err := o(&rc); err != nil {
			return "", err
		}
	}
	return s.resolveShared(ctx, a, role, rc.peers)
}

func (s *Service) resolve(ctx context.Context, a *adv.PipeAdvertisement, role string, explicit []peer.AddrInfo) (peer.ID, error) {
	// Whose deadline ended, for the error: the caller's, or this one.
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.resolveTimeout, resolveTimeout(s.opts.resolveTimeout))
	defer cancel()
	key := Key(a.ID)
	givenSelf := slices.ContainsFunc(explicit, func(ai peer.AddrInfo) bool { return ai.ID == s.self })
	if (len(explicit) == 0 || givenSelf) && role == RoleInput && s.bound(key, role) {
		return s.self, nil
	}
	proven := needsProof(a)
	if proven && len(a.Binders) == 0 && len(explicit) == 0 {
		return "", fmt.Errorf("%w: %v", ErrUnprovable, a.ID)
	}
	r := &resolution{s: s, ctx: ctx, a: a, role: role, proven: proven, givenSelf: givenSelf, found: make(chan peer.ID, 1), idle: make(chan struct{})}
	r.start() // the asking below, done once it is all under way
	if len(explicit) > 0 {
		others := slices.DeleteFunc(slices.Clone(explicit), func(ai peer.AddrInfo) bool { return ai.ID == s.self })
		r.where, r.given = fmt.Sprintf("%d given peer", len(others)), len(others)
		if len(others) != 1 {
			r.where += "s"
		}
		for _, ai := range others {
			r.seen.Store(string(ai.ID), true)
			r.connectAndAsk(ai, false, true)
		}
	} else {
		// Neighbours asked in vain forward what binders push them
		// meanwhile (referral.go).
		hints, unhint := s.hintsFor(bindingKey{key, role})
		defer unhint()
		go r.listen(hints)
		r.askConnected()
		if s.opts.routing != nil {
			r.where += " and the DHT"
			r.start()
			go r.askProviders()
		}
	}
	r.done()
	select {
	case p := <-r.found:
		return p, nil
	case <-r.idle:
		select {
		case p := <-r.found:
			return p, nil
		default:
			return "", r.fail(nil)
		}
	case <-ctx.Done():
		return "", r.fail(context.Cause(ctx))
	}
}

// resolution is one binding resolution under way: the peers asked,
// and what they answered.
type resolution struct {
	s      *Service
	ctx    context.Context
	a      *adv.PipeAdvertisement
	role   string
	proven bool
	where  string // who is asked, for errors
	// givenSelf: ToPeers named this peer, which is not asked.
	givenSelf bool

	// given counts the peers ToPeers named other than this one;
	// unreachable those a connection to failed.
	given       int
	unreachable atomic.Int32

	found chan peer.ID // the first binder that holds
	seen  sync.Map     // seenKey of the peers asked or being asked
	asked atomic.Int32

	// referrals is, per peer that answered it has no binding, how many
	// more of its referrals (in its answer, then in the pushes it
	// forwards) the resolution follows; a peer not in it is followed in
	// nothing it forwards. So one peer, lying or not, has it dial at most
	// maxReferrals others.
	refMu     sync.Mutex
	referrals map[peer.ID]int

	// inflight counts the asking under way; idle closes when it first
	// falls to zero. Asking a referral that arrives after that is
	// harmless: it ends with ctx.
	inflight atomic.Int64
	idle     chan struct{}
	idleOnce sync.Once

	errMu   sync.Mutex
	lastErr error
}

func (r *resolution) start() { r.inflight.Add(1) }

func (r *resolution) done() {
	if r.inflight.Add(-1) == 0 {
		r.idleOnce.Do(func() { close(r.idle) })
	}
}

func (r *resolution) setErr(err error) {
	r.errMu.Lock()
	r.lastErr = err
	r.errMu.Unlock()
}

// fail is the resolution's ErrNotResolved, with cause or the last error.
func (r *resolution) fail(cause error) error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	asked := fmt.Sprintf("(asked %d of %s)", r.asked.Load(), r.where)
	switch {
	case r.role != RoleInput && r.s.bound(Key(r.a.ID), r.role):
		asked += "; it is bound on this peer, which cannot connect to itself"
	case r.givenSelf:
		asked += "; this peer, which was given, does not bind it"
	}
	msg := fmt.Sprintf("%v as %s %s", r.a.ID, r.role, asked)
	var timeout resolveTimeout
	if cause != nil && !errors.As(cause, &timeout) {
		return &stoppedError{fmt.Sprintf("%v as %s", r.a.ID, r.role), cause, " " + asked}
	}
	if cause != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotResolved, msg, cause)
	}
	if g := r.given; g > 0 && int(r.unreachable.Load()) == g && !r.givenSelf {
		return &unreachableError{fmt.Sprintf("%v as %s", r.a.ID, r.role), g, r.lastErr}
	}
	if r.lastErr != nil {
		return fmt.Errorf("%w: %s; last error: %w", ErrNotResolved, msg, r.lastErr)
	}
	return fmt.Errorf("%w: %s", ErrNotResolved, msg)
}

// resolveTimeout is the cause a resolution's own timeout (WithResolveTimeout)
// ends it with; it matches context.DeadlineExceeded.
type resolveTimeout time.Duration

func (d resolveTimeout) Error() string {
	return fmt.Sprintf("%v (the resolve timeout, %v)", context.DeadlineExceeded, time.Duration(d))
}
func (resolveTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// stoppedError is a resolution its caller stopped, its ctx ended: the
// text leads with that rather than "no peer found", which the caller
// did not wait to learn, and it matches ErrNotResolved and the ctx's
// cause.
type stoppedError struct {
	what   string // the pipe and role
	cause  error
	detail string // whom it asked
}

func (e *stoppedError) Error() string {
	return "pipe: resolving " + e.what + ": " + e.cause.Error() + e.detail
}
func (e *stoppedError) Unwrap() []error { return []error{ErrNotResolved, e.cause} }

// unreachableError is a resolution among given peers none of which could
// be reached: the text leads with that rather than "no peer found", which
// was not learnt (none was asked), and it matches ErrPeerGone (a peer
// that cannot be dialled is gone for its senders: they try again later)
// as well as ErrNotResolved and the last connection's error.
type unreachableError struct {
	what  string // the pipe and role
	given int
	last  error
}

func (e *unreachableError) Error() string {
	who := "the given peer could not"
	if e.given > 1 {
		who = fmt.Sprintf("none of the %d given peers could", e.given)
	}
	return "pipe: resolving " + e.what + ": " + who + " be reached: " + e.last.Error()
}
func (e *unreachableError) Unwrap() []error { return []error{ErrPeerGone, ErrNotResolved, e.last} }

// askConnected asks the connected peers, up to WithQueryPeers: first
// those that pushed they bind the pipe, then its advertisement's named
// binders, then the others, so that however many peers are connected
// (and whoever they are), a connected binder that is known is asked.
func (r *resolution) askConnected() {
	r.where = "connected peers"
	nw := r.s.host.Network()
	var peers []peer.ID
	ask := func(p peer.ID) {
		if len(peers) >= r.s.opts.queryPeers || p == r.s.self {
			return
		}
		if cs := nw.Connectedness(p); cs != network.Connected && cs != network.Limited {
			return
		}
		if _, dup := r.seen.LoadOrStore(string(p), true); !dup {
			peers = append(peers, p)
		}
	}
	for _, p := range r.s.index.lookup(bindingKey{Key(r.a.ID), r.role}, "") {
		ask(p)
	}
	for _, b := range r.a.Binders {
		if p, err := peer.Decode(b); err == nil {
			ask(p)
		}
	}
	for _, p := range nw.Peers() {
		ask(p)
	}
	for _, p := range peers {
		r.start()
		go r.ask(p, true)
	}
}

// askProviders asks the DHT's providers of the pipe that are not
// connected (those are asked already) nor asked otherwise.
func (r *resolution) askProviders() {
	defer r.done()
	for ai := range r.s.opts.routing.FindProvidersAsync(r.ctx, pipeCID(r.a.ID), 16) {
		if ai.ID == r.s.self || r.s.host.Network().Connectedness(ai.ID) == network.Connected {
			continue
		}
		if _, dup := r.seen.LoadOrStore(string(ai.ID), true); !dup {
			r.connectAndAsk(ai, true, false)
		}
	}
}

// listen asks the binders pushes name, while the resolution runs: a
// binder that pushed its own binding, and those a peer asked in vain
// forwards.
func (r *resolution) listen(hints <-chan hint) {
	for {
		select {
		case h := <-hints:
			if len(h.refs) == 1 && h.refs[0].ID == h.from && len(h.refs[0].Addrs) == 0 {
				// A connected binder's own push: asking it dials nobody.
				if _, dup := r.seen.LoadOrStore(string(h.from), true); !dup {
					r.connectAndAsk(h.refs[0], false, false)
				}
				continue
			}
			r.referred(h.from, h.refs)
		case <-r.idle:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// seenKey names what a resolution asked: a peer by its ID or, for a
// referral that gives addresses, the peer at those addresses, so that a
// peer one referral names at addresses that fail (a liar's) is still
// asked at those another gives.
func seenKey(ai peer.AddrInfo) string {
	k := string(ai.ID)
	for _, a := range ai.Addrs {
		k += " " + a.String()
	}
	return k
}

// answeredInVain records that p answered it has no binding: from now on
// the resolution follows up to maxReferrals of its referrals.
func (r *resolution) answeredInVain(p peer.ID) {
	r.refMu.Lock()
	defer r.refMu.Unlock()
	if r.referrals == nil {
		r.referrals = map[peer.ID]int{}
	}
	if _, ok := r.referrals[p]; !ok {
		r.referrals[p] = maxReferrals
	}
}

// referred asks the peers from referred to in its answer or in a push it
// forwarded (referral.go), as far as from's share allows and unless they
// were asked already; their own referrals are not followed.
func (r *resolution) referred(from peer.ID, refs []peer.AddrInfo) {
	r.refMu.Lock()
	n := min(len(refs), r.referrals[from]) // a peer not in referrals has none
	if n > 0 {
		r.referrals[from] -= n
	}
	r.refMu.Unlock()
	if ignored := len(refs) - n; ignored > 0 {
		r.s.ignoredReferrals.Add(uint64(ignored))
	}
	for _, ai := range refs[:n] {
		if ai.ID == r.s.self {
			continue
		}
		if _, dup := r.seen.LoadOrStore(seenKey(ai), true); !dup {
			r.connectAndAsk(ai, false, false)
		}
	}
}

// connectAndAsk connects to ai when it is not connected or addresses are
// given, then asks it, in the background; report says whether a failed
// connection is the resolution's last error.
func (r *resolution) connectAndAsk(ai peer.AddrInfo, follow, report bool) {
	r.start()
	go func() {
		if len(ai.Addrs) > 0 || r.s.host.Network().Connectedness(ai.ID) != network.Connected {
			if report { // a peer given: dialled now, however often it failed before
				r.s.node.ForgetDialFailures(ai.ID)
			}
			if err := r.s.host.Connect(r.ctx, ai); err != nil {
				if report {
					r.setErr(fmt.Errorf("connecting to %s: %w", ai.ID, err))
					r.unreachable.Add(1)
				}
				r.done()
				return
			}
		}
		r.ask(ai.ID, follow)
	}()
}

// ask asks p and, when follow is true and p refers to other peers, asks
// those too.
func (r *resolution) ask(p peer.ID, follow bool) {
	defer r.done()
	r.asked.Add(1)
	nonce := newNonce()
	ok, proof, refs, err := r.s.query(r.ctx, p, r.a.ID, r.role, nonce)
	if err != nil {
		r.setErr(err)
		return
	}
	if !ok {
		r.answeredInVain(p)
		if follow {
			r.referred(p, refs)
		}
		return
	}
	if r.proven {
		if err := r.s.checkProof(r.a, r.role, p, nonce, proof); err != nil {
			r.s.unproven.Add(1)
			r.setErr(fmt.Errorf("answer ignored: %w", err))
			return
		}
	}
	select {
	case r.found <- p:
	default:
	}
}

// query asks p whether it has pipe bound in role, and returns its proof
// or, when it has not, the peers it refers to (referral.go).
func (s *Service) query(ctx context.Context, p peer.ID, pipe id.ID, role string, nonce []byte) (bool, []byte, []peer.AddrInfo, error) {
	st, err := s.host.NewStream(network.WithAllowLimitedConn(ctx, "pipe-resolve"), p, ResolverProtocol)
	if err != nil {
		return false, nil, nil, err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	q := message.New(message.Text(message.JXTANamespace, "PipeId", pipe.String()), message.Text(message.JXTANamespace, "Role", role),
		message.Bytes(message.JXTANamespace, "Nonce", nonce))
	if err := wire.Encode(st, q); err != nil {
		st.Reset()
		return false, nil, nil, err
	}
	if testHookQueryWritten != nil {
		testHookQueryWritten()
	}
	// The peer answers once it has read the query, and may close before
	// our end of stream leaves: on QUIC its Close stops our sending, and
	// CloseWrite then fails although the answer is on its way. So the
	// answer decides; a peer that did reset the stream fails the read.
	_ = st.CloseWrite()
	ans, err := wire.Decode(io.LimitReader(st, maxQuerySize), wire.WithMaxMessageSize(maxQuerySize))
	if err != nil {
		st.Reset()
		return false, nil, nil, fmt.Errorf("pipe: binding answer from %s: %w", p, err)
	}
	e, ok := ans.Get(message.JXTANamespace, "Found")
	if ok && string(e.Data) == "true" {
		proof, _ := ans.Get(message.JXTANamespace, "BindingProof")
		return true, proof.Data, nil, nil
	}
	return false, nil, parseReferrals(ans), nil
}

// testHookQueryWritten, if set (by tests), runs in query between
// writing the query and ending the stream.
var testHookQueryWritten func()

// readRequest reads the one message of a binding protocol's request
// stream, within queryTimeout and maxQuerySize; the stream is reset if
// that fails.
func readRequest(st network.Stream) (*message.Message, bool) {
	st.SetDeadline(time.Now().Add(queryTimeout))
	m, err := wire.Decode(io.LimitReader(st, maxQuerySize), wire.WithMaxMessageSize(maxQuerySize))
	if err != nil {
		st.Reset()
		return nil, false
	}
	return m, true
}

// handleQuery answers one binding query.
func (s *Service) handleQuery(st network.Stream) {
	defer st.Close()
	q, ok := readRequest(st)
	if !ok {
		return
	}
	pipe, role, err := parseQuery(q)
	if err != nil {
		st.Reset()
		return
	}
	found := s.bound(Key(pipe), role)
	ans := message.New(message.Text(message.JXTANamespace, "Found", strconv.FormatBool(found)),
		message.Text(message.JXTANamespace, "PeerId", s.node.JXTAPeerID().String()))
	if n, ok := q.Get(message.JXTANamespace, "Nonce"); found && ok && len(n.Data) == nonceSize {
		if proof, err := s.signProof(pipe, role, n.Data); err == nil {
			ans.Add(message.Bytes(message.JXTANamespace, "BindingProof", proof))
		}
	}
	if !found {
		k, asker := bindingKey{Key(pipe), role}, st.Conn().RemotePeer()
		if refs := s.index.lookup(k, asker); len(refs) > 0 {
			ans.Add(s.referralElements(refs)...)
		} else {
			s.pending.note(k, asker)
		}
	}
	if err := wire.Encode(st, ans); err != nil {
		st.Reset()
	}
}

// ErrQuery reports a malformed binding query.
var ErrQuery = errors.New("pipe: malformed binding query")

// parseQuery reads a binding query's pipe ID and role.
func parseQuery(q *message.Message) (id.ID, string, error) {
	pe, ok1 := q.Get(message.JXTANamespace, "PipeId")
	re, ok2 := q.Get(message.JXTANamespace, "Role")
	if !ok1 || !ok2 {
		return id.ID{}, "", fmt.Errorf("%w: PipeId or Role missing", ErrQuery)
	}
	if len(re.Data) == 0 || len(re.Data) > 64 {
		return id.ID{}, "", fmt.Errorf("%w: role of %d bytes", ErrQuery, len(re.Data))
	}
	pipe, err := id.Parse(string(pe.Data))
	if err != nil {
		return id.ID{}, "", fmt.Errorf("%w: %w", ErrQuery, err)
	}
	if pipe.Kind() != id.KindPipe {
		return id.ID{}, "", fmt.Errorf("%w: %v is not a pipe ID", ErrQuery, pipe)
	}
	return pipe, string(re.Data), nil
}

// ProviderKey is the DHT key under which the peers binding pipe p publish
// provider records, and which resolution looks up.
func ProviderKey(p id.ID) cid.Cid { return pipeCID(p) }

// pipeCID names a pipe's provider records in the DHT.

func pipeCID(p id.ID) cid.Cid {
	h, _ := multihash.Sum([]byte("p2pmsg-pipe:"+p.String()), multihash.SHA2_256, -1)
	return cid.NewCidV1(cid.Raw, h)
}

// provide publishes the pipe's provider record, again every
// reprovideInterval, until stop is called. Records cannot be withdrawn:
// they expire, and resolution asks each provider, so a stale one costs a
// query only.
func (s *Service) provide(p id.ID) (stop func()) {
	r := s.opts.routing
	if r == nil {
		return func() {}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return func() {}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c := pipeCID(p)
		retry := 2 * time.Second
		for {
			wait := reprovideInterval
			pctx, pcancel := context.WithTimeout(ctx, time.Minute)
			err := r.Provide(pctx, c, true)
			pcancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				// Typically an empty routing table just after start.
				wait, retry = retry, min(2*retry, 10*time.Minute)
			}
			if sleep(ctx, wait) != nil {
				return
			}
		}
	}()
	return cancel
}

// connectProviders connects to the given peers, and in the background to
// the DHT's providers of a propagate pipe, so that gossipsub learns them
// as members.
func (s *Service) connectProviders(ctx context.Context, a *adv.PipeAdvertisement, explicit []peer.AddrInfo) {
	for _, ai := range explicit {
		if ai.ID != s.self && len(ai.Addrs) > 0 {
			s.host.Connect(ctx, ai) // best effort: members may come and go
		}
	}
	r := s.opts.routing
	if r == nil {
		return
	}
	s.background(s.opts.resolveTimeout, func(ctx context.Context) {
		for ai := range r.FindProvidersAsync(ctx, pipeCID(a.ID), 64) {
			if ai.ID != s.self && s.host.Network().Connectedness(ai.ID) != network.Connected {
				s.host.Connect(ctx, ai)
			}
		}
	})
}

// background runs f in a goroutine the service waits for on Close, with
// a ctx that ends after timeout or when the service closes; nothing runs
// once the service is closed.
func (s *Service) background(timeout time.Duration, f func(ctx context.Context)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		defer cancel()
		f(ctx)
	}()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
