package pipe

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// JXTA's connections (JxtaBiDiPipe, JxtaSocket) are pairs of unicast pipes:
// each side binds an ephemeral input pipe, tells the other its
// advertisement in a handshake, and sends to the other's. The pieces here
// are what both need: ephemeral pipes bound for JXTA peers only, sending
// to a pipe on a known JXTA peer, and listening to a pipe for JXTA peers'
// handshakes. Package socket builds JxtaSocket from them; jxtabidi.go
// builds JxtaBiDiPipe.

// JXTASession is one side of a JXTA connection's pipe pair: an ephemeral
// input pipe bound here for JXTA peers (answered by the pipe binding
// protocol, not announced to libp2p peers) and, once the handshake has
// named it, the other side's pipe on its peer. Messages to the input pipe
// go to the session's handler; once the remote peer is set, messages from
// any other JXTA peer are dropped and counted (Foreign).
type JXTASession struct {
	svc     *Service
	adv     *adv.PipeAdvertisement
	handler func(*Received)
	release func()

	mu         sync.Mutex
	remote     id.ID
	remotePipe id.ID
	dst        endpoint.Address
	foreign    atomic.Uint64
	closeOnce  sync.Once
}

// NewJXTASession binds a new ephemeral unicast pipe named name for JXTA
// peers and hands its messages to h, which runs on the connection's
// reader (return promptly). It needs an endpoint that is a JXTA peer.
func (s *Service) NewJXTASession(name string, h func(*Received)) (*JXTASession, error) {
	if s.jxta == nil {
		return nil, fmt.Errorf("%w: the endpoint is not a JXTA peer (endpoint.WithJXTA)", ErrBadOption)
	}
	a, err := adv.New(adv.Unicast, name, "")
	if err != nil {
		return nil, err
	}
	x := &JXTASession{svc: s, adv: a, handler: h}
	release, err := s.listenJXTA(a, x.deliver)
	if err != nil {
		return nil, err
	}
	x.release = release
	return x, nil
}

// Adv returns the session's input pipe advertisement, to send in the
// handshake.
func (x *JXTASession) Adv() *adv.PipeAdvertisement { return x.adv }

// SetRemote names the other side: its JXTA peer and its input pipe. From
// then on Send sends there and only that peer's messages are handled.
func (x *JXTASession) SetRemote(peer, pipe id.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remote, x.remotePipe = peer, pipe
	x.dst = jxtaPipeAddress(peer, pipe)
}

// Remote returns the other side's peer and pipe (zero until SetRemote).
func (x *JXTASession) Remote() (peer, pipe id.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.remote, x.remotePipe
}

// Foreign counts messages dropped because they came from a peer other
// than the remote one.
func (x *JXTASession) Foreign() uint64 { return x.foreign.Load() }

// Send sends m to the other side's pipe.
func (x *JXTASession) Send(ctx context.Context, m *message.Message) error {
	x.mu.Lock()
	dst := x.dst
	x.mu.Unlock()
	if dst.Addr == "" {
		return fmt.Errorf("%w: JXTA session has no remote pipe yet", ErrNotResolved)
	}
	if err := x.svc.ep.Send(ctx, dst, m); err != nil {
		return fmt.Errorf("pipe %s: %w", x.remotePipeID(), err)
	}
	return nil
}

func (x *JXTASession) remotePipeID() id.ID {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.remotePipe
}

// AfterServiceClose arranges for f to run in its own goroutine once the
// pipe service closes (at once if it has): the session can then send and
// receive no more, and what it carries should end. stop stops that, as
// context.AfterFunc's does.
func (x *JXTASession) AfterServiceClose(f func()) (stop func() bool) {
	return context.AfterFunc(x.svc.ctx, f)
}

// Close unbinds the session's input pipe. A handler may still run once
// after it returns.
func (x *JXTASession) Close() error {
	x.closeOnce.Do(x.release)
	return nil
}

func (x *JXTASession) deliver(r *Received) {
	x.mu.Lock()
	remote := x.remote
	x.mu.Unlock()
	if !remote.IsZero() && r.FromJXTA != remote {
		x.foreign.Add(1)
		return
	}
	x.handler(r)
}

// jxtaPipeAddress is where a JXTA peer receives a unicast pipe's messages.
func jxtaPipeAddress(peer, pipe id.ID) endpoint.Address {
	return endpoint.Address{Protocol: endpoint.ProtocolJXTA, Addr: strings.TrimPrefix(peer.String(), "urn:jxta:"),
		Service: JXTAPipeService, Param: pipe.String()}
}

// ListenJXTA binds a as a unicast pipe for JXTA peers only (answered by
// the pipe binding protocol, not announced to libp2p peers) and hands its
// messages to h, which runs on the connection's reader: JXTA's server
// pipes and server sockets receive their handshakes so. Call the returned
// function to unbind.
func (s *Service) ListenJXTA(a *adv.PipeAdvertisement, h func(*Received)) (unbind func(), err error) {
	if s.jxta == nil {
		return nil, fmt.Errorf("%w: the endpoint is not a JXTA peer (endpoint.WithJXTA)", ErrBadOption)
	}
	if err := checkAdv(a); err != nil {
		return nil, err
	}
	if a.Type != adv.Unicast {
		return nil, fmt.Errorf("%w: only unicast pipes are shared with JXTA peers (their transport does not encrypt)", ErrWrongType)
	}
	return s.listenJXTA(a, h)
}

func (s *Service) listenJXTA(a *adv.PipeAdvertisement, h func(*Received)) (func(), error) {
	key := a.ID.String()
	if err := s.ep.Register(JXTAPipeService, key, endpoint.ListenerFunc(func(ctx context.Context, d *endpoint.Delivery) {
		if d.Unverified && s.jxtaSigned() {
			d.Release()
			return
		}
		h(&Received{Message: d.Message, FromJXTA: d.SourceJXTA, Unverified: d.Unverified, Pipe: a.ID, RemoteHost: d.RemoteHost, delivery: d, listening: ctx})
	})); err != nil {
		return nil, fmt.Errorf("%w: JXTA pipe %s: %w", ErrBound, a.ID, err)
	}
	s.mu.Lock()
	s.jxtaPipes[key] = true
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.jxtaPipes, key)
			s.mu.Unlock()
			s.ep.Unregister(JXTAPipeService, key)
		})
	}, nil
}

// jxtaSigned reports whether this peer signs its JXTA messages; a signing
// peer holds JXTA connections to signed messages, whatever the transport
// lets through.
func (s *Service) jxtaSigned() bool { return s.ep.JXTA().Signs() }

// ResolveJXTA finds which of the JXTA peers at addrs (tcp://host:port or
// jxta://cbid-…) binds the unicast pipe a, with JXTA's pipe binding
// protocol, and returns its peer ID.
func (s *Service) ResolveJXTA(ctx context.Context, a *adv.PipeAdvertisement, addrs ...string) (id.ID, error) {
	if s.jxta == nil {
		return id.ID{}, fmt.Errorf("%w: the endpoint is not a JXTA peer (endpoint.WithJXTA)", ErrBadOption)
	}
	if err := checkAdv(a); err != nil {
		return id.ID{}, err
	}
	if a.Type != adv.Unicast {
		return id.ID{}, fmt.Errorf("%w: only unicast pipes are shared with JXTA peers (their transport does not encrypt)", ErrWrongType)
	}
	dst, err := s.jxta.resolve(ctx, a, addrs)
	if err != nil {
		return id.ID{}, err
	}
	return id.Parse("urn:jxta:" + dst.Addr)
}

// SendJXTA sends m on the unicast pipe pipeID bound on the JXTA peer
// peer, without resolving it: for pipes the peer itself named.
func (s *Service) SendJXTA(ctx context.Context, peer, pipeID id.ID, m *message.Message) error {
	if s.jxta == nil {
		return fmt.Errorf("%w: the endpoint is not a JXTA peer (endpoint.WithJXTA)", ErrBadOption)
	}
	return s.ep.Send(ctx, jxtaPipeAddress(peer, pipeID), m)
}

// JXTAPeerAdv returns this peer's JXTA peer advertisement (jxta:PA, with
// its TCP addresses as route hint), as JXTA handshakes carry it; nil when
// the endpoint is not a JXTA peer.
func (s *Service) JXTAPeerAdv() []byte {
	if s.jxta == nil {
		return nil
	}
	return []byte(s.jxta.peerAdv())
}

// ParseJXTAPeerAdv reads a JXTA peer advertisement's peer ID, as JXTA
// handshakes need it.
func ParseJXTAPeerAdv(b []byte) (id.ID, error) {
	pa, err := parseDoc(b, "PA")
	if err != nil {
		return id.ID{}, fmt.Errorf("%w: peer advertisement: %w", ErrQuery, err)
	}
	p, err := id.Parse(childText(pa, "PID"))
	if err != nil || p.Kind() != id.KindPeer {
		return id.ID{}, fmt.Errorf("%w: peer advertisement's PID %q", ErrQuery, childText(pa, "PID"))
	}
	return p, nil
}
