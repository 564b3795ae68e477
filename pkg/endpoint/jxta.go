package endpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TransportJXTA names JXTA's TCP transport in Delivery.Transport.
const TransportJXTA = "jxta-tcp"

// ProtocolTCP addresses a JXTA peer by its TCP address, tcp://host:port,
// on JXTA's TCP transport (see WithJXTA).
const ProtocolTCP = "tcp"

// jxtaConfig is WithJXTA's.
type jxtaConfig struct {
	ident  *jxtatcp.Identity
	listen string
	opts   []jxtatcp.Option
}

// WithJXTA makes the node a JXTA peer on JXTA's own TCP transport as
// well, so that it exchanges endpoint messages with JXSE 2.7 peers: it
// signs as ident, listens at listen (tcp://host:port; "" to only dial)
// and passes opts to the transport. Send routes tcp:// addresses, and
// jxta:// addresses of no connected libp2p peer, to the transport;
// listeners receive JXTA peers' messages as they do libp2p peers', with
// Delivery.Transport set to TransportJXTA and the sender in SourceJXTA.
// Messages from JXTA peers are neither encrypted nor refused back (JXTA
// has no back channel); Flush does not apply to them.
func WithJXTA(ident *jxtatcp.Identity, listen string, opts ...jxtatcp.Option) Option {
	return func(o *options) error {
		if ident == nil {
			return fmt.Errorf("%w: WithJXTA needs an identity", ErrBadOption)
		}
		o.jxta = &jxtaConfig{ident: ident, listen: listen, opts: opts}
		return nil
	}
}

// JXTA returns the node's JXTA TCP transport, nil without WithJXTA: for
// its addresses, routes and counters.
func (s *Service) JXTA() *jxtatcp.Transport { return s.jxta }

// startJXTA starts the transport WithJXTA configured.
func (s *Service) startJXTA(c *jxtaConfig) error {
	t, err := jxtatcp.New(c.ident, s.deliverJXTA, c.opts...)
	if err != nil {
		return err
	}
	if c.listen != "" {
		if err := t.Listen(c.listen); err != nil {
			t.Close()
			return err
		}
	}
	s.jxta = t
	return nil
}

// sendJXTA sends m over the JXTA transport.
func (s *Service) sendJXTA(ctx context.Context, addr Address, m *message.Message) error {
	if s.jxta == nil {
		return fmt.Errorf("%w: %s: JXTA's TCP transport is off (endpoint.WithJXTA)", ErrUnknownPeer, addr)
	}
	err := s.jxta.Send(ctx, addr.Protocol+"://"+addr.Addr, addr.Service, addr.Param, m)
	if errors.Is(err, jxtatcp.ErrNoRoute) {
		return fmt.Errorf("%w: %w", ErrUnknownPeer, err)
	}
	return err
}

// deliverJXTA hands a JXTA peer's message to its listener. Its size is
// reckoned as a libp2p frame's (Delivery.Size), so that a queue bounded
// in bytes (a pipe's) counts it; the transport's memory budget, not this
// service's, holds it until the listener returns, or, if the listener
// calls Hold, until Unhold or Release, so that what one JXTA host's
// queued messages hold is bounded by its share of that budget.
func (s *Service) deliverJXTA(in *jxtatcp.Incoming) {
	host, _ := hostkey.FromString(in.Remote)
	d := &Delivery{Message: in.Message, SourceJXTA: in.Source, Service: in.Service, Param: in.Param,
		Transport: TransportJXTA, Unverified: !in.Signed, RemoteHost: host, svc: s, jxta: in,
		size: in.Size + frameOverhead + int64(in.Message.Len())*elementOverhead}
	l := s.listenerFor(in.Service, in.Param)
	if l == nil {
		s.stats.noListener.Add(1)
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.stats.panics.Add(1)
		}
	}()
	s.stats.received.Add(1)
	l.Deliver(s.ctx, d)
}
