package p2pmsg

import (
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// ErrBadOption is what an invalid option makes New fail with, whether this
// package or a layer below refused it: the error then also matches that
// layer's own sentinel (node.ErrBadOption, endpoint.ErrBadOption,
// jxtatcp.ErrBadOption for WithJXTA's transport options, pipe.ErrBadOption
// or socket.ErrBadOption).
var ErrBadOption = errors.New("p2pmsg: invalid option")

// config holds each layer's options, in the order they were given. Every
// Option of this package is one or more options of a layer below: the
// settings, their defaults and their bounds are that layer's.
type config struct {
	node     []node.Option
	endpoint []endpoint.Option
	pipe     []pipe.Option
	socket   []socket.Option
}

// Option configures a Peer. Options apply in the order given; where two
// set the same thing, the layer they map to decides, which for the
// options here means the later wins (WithBootstrapPeers adds up).
type Option func(*config) error

// WithListenAddrs sets the multiaddrs the node listens on
// (node.WithListenAddrs; default node.DefaultListenAddrs, TCP and QUIC on
// every interface). Tests and examples pass "/ip4/127.0.0.1/tcp/0".
func WithListenAddrs(addrs ...string) Option {
	return WithNodeOptions(node.WithListenAddrs(addrs...))
}

// WithKeyFile keeps the peer's libp2p identity in path, created (mode 0600)
// on first use and loaded afterwards (node.WithKeyFile). Without it, or
// with WithEphemeralKey, the peer gets a new identity each time it starts.
func WithKeyFile(path string) Option {
	return WithNodeOptions(node.WithKeyFile(path))
}

// WithEphemeralKey gives the peer a new identity that is never stored
// (node.WithEphemeralKey); it cannot be combined with WithKeyFile.
func WithEphemeralKey() Option {
	return WithNodeOptions(node.WithEphemeralKey())
}

// WithBootstrapPeers connects to these peers while New runs, within its
// context (node.WithBootstrapPeers); New fails if one cannot be reached.
// Repeated, the lists add up.
func WithBootstrapPeers(peers ...peer.AddrInfo) Option {
	return WithNodeOptions(node.WithBootstrapPeers(peers...))
}

// WithDHT gives the node a Kademlia DHT in the given mode (node.WithDHT),
// bootstrapped from the WithBootstrapPeers peers; pipes and sockets then
// publish and find their bindings there. Default: no DHT.
func WithDHT(mode node.DHTMode) Option {
	return WithNodeOptions(node.WithDHT(mode))
}

// WithMDNS makes the node announce itself and connect to the peers it
// finds on the LAN, a bounded number at a time and per second
// (node.WithMDNS). Default: off.
func WithMDNS() Option {
	return WithNodeOptions(node.WithMDNS())
}

// WithJXTA makes the peer a JXTA peer on JXTA's own TCP transport too
// (endpoint.WithJXTA), so that its pipes and sockets reach and are reached
// by JXSE 2.7 peers: it signs as ident (jxtatcp.LoadIdentity keeps one in a
// file), listens at listen (tcp://host:port, "" to only dial) and passes
// opts to the transport. ident must not be nil.
func WithJXTA(ident *jxtatcp.Identity, listen string, opts ...jxtatcp.Option) Option {
	return func(c *config) error {
		if ident == nil {
			return fmt.Errorf("%w: WithJXTA needs an identity", ErrBadOption)
		}
		return WithEndpointOptions(endpoint.WithJXTA(ident, listen, opts...))(c)
	}
}

// WithNodeOptions passes options to node.New, in order with those the
// shortcuts above make: for what has no shortcut here, such as
// node.WithSecurity, node.WithRelayService, node.WithGroup,
// node.WithSocketStreamsPerPeer (a server for clients keeping larger
// pools of sockets) and node.WithLibp2pOptions.
func WithNodeOptions(opts ...node.Option) Option {
	return func(c *config) error {
		if err := noNil("WithNodeOptions", opts); err != nil {
			return err
		}
		c.node = append(c.node, opts...)
		return nil
	}
}

// WithEndpointOptions passes options to endpoint.New (message size,
// memory budgets, per-peer limits, ...).
func WithEndpointOptions(opts ...endpoint.Option) Option {
	return func(c *config) error {
		if err := noNil("WithEndpointOptions", opts); err != nil {
			return err
		}
		c.endpoint = append(c.endpoint, opts...)
		return nil
	}
}

// WithPipeOptions passes options to pipe.New (queues, resolution, routing,
// pubsub, ...).
func WithPipeOptions(opts ...pipe.Option) Option {
	return func(c *config) error {
		if err := noNil("WithPipeOptions", opts); err != nil {
			return err
		}
		c.pipe = append(c.pipe, opts...)
		return nil
	}
}

// WithSocketOptions passes options to socket.New (backlog, JXTA socket
// settings).
func WithSocketOptions(opts ...socket.Option) Option {
	return func(c *config) error {
		if err := noNil("WithSocketOptions", opts); err != nil {
			return err
		}
		c.socket = append(c.socket, opts...)
		return nil
	}
}

// noNil refuses a nil option before anything starts: the layer applying
// it would panic, and only after the layers below it had started.
func noNil[O ~func(*C) error, C any](what string, opts []O) error {
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: %s: option %d is nil", ErrBadOption, what, i)
		}
	}
	return nil
}
