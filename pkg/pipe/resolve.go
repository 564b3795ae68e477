package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// and the DHT's providers. It fails with ErrNotResolved.
func (s *Service) Resolve(ctx context.Context, a *adv.PipeAdvertisement, role string, opts ...ResolveOption) (peer.ID, error) {
	if err := checkAdv(a); err != nil {
		return "", err
	}
	var rc resolveConfig
	for _, o := range opts {
		if err := o(&rc); err != nil {
			return "", err
		}
	}
	return s.resolve(ctx, a, role, rc.peers)
}

func (s *Service) resolve(ctx context.Context, a *adv.PipeAdvertisement, role string, explicit []peer.AddrInfo) (peer.ID, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.resolveTimeout)
	defer cancel()
	self := s.self
	key := Key(a.ID)
	if len(explicit) == 0 && role == RoleInput && s.bound(key, role) {
		return self, nil
	}
	proven := needsProof(a)
	if proven && len(a.Binders) == 0 && len(explicit) == 0 {
		return "", fmt.Errorf("%w: %v", ErrUnprovable, a.ID)
	}
	found := make(chan peer.ID, 1)
	var (
		wg      sync.WaitGroup
		asked   atomic.Int32
		errMu   sync.Mutex
		lastErr error
		seen    sync.Map // peers asked or being asked
	)
	var ask func(p peer.ID, follow bool)
	// referred asks the peers an answer referred to (referral.go) that
	// nobody has asked yet; their own referrals are not followed.
	referred := func(refs []peer.AddrInfo) {
		for _, ai := range refs {
			if ai.ID == self {
				continue
			}
			if _, dup := seen.LoadOrStore(ai.ID, true); dup {
				continue
			}
			wg.Add(1)
			go func() {
				if len(ai.Addrs) > 0 || s.host.Network().Connectedness(ai.ID) != network.Connected {
					if err := s.host.Connect(ctx, ai); err != nil {
						wg.Done()
						return
					}
				}
				ask(ai.ID, false)
			}()
		}
	}
	ask = func(p peer.ID, follow bool) {
		defer wg.Done()
		seen.Store(p, true)
		asked.Add(1)
		nonce := newNonce()
		ok, proof, refs, err := s.query(ctx, p, a.ID, role, nonce)
		if err != nil {
			errMu.Lock()
			lastErr = err
			errMu.Unlock()
			return
		}
		if !ok && follow && len(explicit) == 0 {
			referred(refs)
		}
		if ok && proven {
			if err := s.checkProof(a, role, p, nonce, proof); err != nil {
				s.unproven.Add(1)
				errMu.Lock()
				lastErr = fmt.Errorf("answer ignored: %w", err)
				errMu.Unlock()
				return
			}
		}
		if ok {
			select {
			case found <- p:
			default:
			}
		}
	}
	var where string
	if len(explicit) > 0 {
		where = "the given peers"
		for _, ai := range explicit {
			if ai.ID == self {
				continue
			}
			wg.Add(1)
			go func() {
				if len(ai.Addrs) > 0 {
					if err := s.host.Connect(ctx, ai); err != nil {
						errMu.Lock()
						lastErr = fmt.Errorf("connecting to %s: %w", ai.ID, err)
						errMu.Unlock()
						wg.Done()
						return
					}
				}
				ask(ai.ID, false)
			}()
		}
	} else {
		where = "connected peers"
		peers := s.host.Network().Peers()
		if len(peers) > s.opts.queryPeers {
			peers = peers[:s.opts.queryPeers]
		}
		for _, p := range peers {
			seen.Store(p, true)
		}
		for _, p := range peers {
			wg.Add(1)
			go ask(p, true)
		}
		if r := s.opts.routing; r != nil {
			where += " and the DHT"
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ai := range r.FindProvidersAsync(ctx, pipeCID(a.ID), 16) {
					if ai.ID == self || s.host.Network().Connectedness(ai.ID) == network.Connected {
						continue // connected peers are asked already
					}
					if _, dup := seen.LoadOrStore(ai.ID, true); dup {
						continue // referred to already
					}
					wg.Add(1)
					go func() {
						if err := s.host.Connect(ctx, ai); err != nil {
							wg.Done()
							return
						}
						ask(ai.ID, true)
					}()
				}
			}()
		}
	}
	allAsked := make(chan struct{})
	go func() { wg.Wait(); close(allAsked) }()
	fail := func(cause error) (peer.ID, error) {
		errMu.Lock()
		defer errMu.Unlock()
		msg := fmt.Sprintf("%v as %s (asked %d of %s)", a.ID, role, asked.Load(), where)
		if cause != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrNotResolved, msg, cause)
		}
		if lastErr != nil {
			return "", fmt.Errorf("%w: %s; last error: %w", ErrNotResolved, msg, lastErr)
		}
		return "", fmt.Errorf("%w: %s", ErrNotResolved, msg)
	}
	select {
	case p := <-found:
		return p, nil
	case <-allAsked:
		select {
		case p := <-found:
			return p, nil
		default:
			return fail(nil)
		}
	case <-ctx.Done():
		return fail(ctx.Err())
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
	if err := st.CloseWrite(); err != nil {
		st.Reset()
		return false, nil, nil, err
	}
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

// handleQuery answers one binding query.
func (s *Service) handleQuery(st network.Stream) {
	defer st.Close()
	st.SetDeadline(time.Now().Add(queryTimeout))
	q, err := wire.Decode(io.LimitReader(st, maxQuerySize), wire.WithMaxMessageSize(maxQuerySize))
	if err != nil {
		st.Reset()
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
		ans.Add(s.referralElements(bindingKey{Key(pipe), role}, st.Conn().RemotePeer())...)
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		fctx, cancel := context.WithTimeout(s.ctx, s.opts.resolveTimeout)
		defer cancel()
		for ai := range r.FindProvidersAsync(fctx, pipeCID(a.ID), 64) {
			if ai.ID != s.self && s.host.Network().Connectedness(ai.ID) != network.Connected {
				s.host.Connect(fctx, ai)
			}
		}
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
