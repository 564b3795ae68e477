package p2pmsg

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// Peer is a running p2pmsg peer: a node with its endpoint, pipe and socket
// services. Its methods are safe for concurrent use.
type Peer struct {
	node     *node.Node
	endpoint *endpoint.Service
	pipes    *pipe.Service
	sockets  *socket.Service

	closeOnce sync.Once
	closeErr  error
}

// New starts a peer: the node, then the endpoint service on it, the pipe
// service on that and the socket service on the pipes, each configured by
// the options that map to it. ctx bounds what starting waits for
// (connecting to WithBootstrapPeers, the DHT's bootstrap); the peer
// outlives it and runs until Close.
//
// Options this package can check are checked before anything starts. A
// step that fails closes the steps already started, so that nothing is
// left running, and New returns its error prefixed with the step; an
// option a layer refuses matches ErrBadOption as well as that layer's own
// sentinel.
func New(ctx context.Context, opts ...Option) (*Peer, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil Option", ErrBadOption)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	p := new(Peer)
	var err error
	if p.node, err = node.New(ctx, c.node...); err != nil {
		return nil, &startError{"node", err}
	}
	if p.endpoint, err = endpoint.New(p.node, c.endpoint...); err != nil {
		return nil, p.abort("endpoint", err)
	}
	if p.pipes, err = pipe.New(p.endpoint, c.pipe...); err != nil {
		return nil, p.abort("pipes", err)
	}
	if p.sockets, err = socket.New(p.pipes, c.socket...); err != nil {
		return nil, p.abort("sockets", err)
	}
	return p, nil
}

// abort closes what New started before step failed with err, and returns
// the error New reports. A failure to close is not reported: the step's
// error says why New failed.
func (p *Peer) abort(step string, err error) error {
	p.Close()
	return &startError{step, err}
}

// Close stops the peer: the socket service (its listeners), the pipe
// service (every pipe, and the JXTA sockets still open), the endpoint
// service, then the node, whose host ends every connection, open libp2p
// sockets included. As endpoint.Service.Close,
// it drops messages queued and not yet written, and sockets' bytes not yet
// sent (socket.Conn.Close does not wait for them): flush output pipes first
// when they must arrive, or call Shutdown. It returns the first error of
// the four; later calls of Close or Shutdown do nothing and return the
// same.
func (p *Peer) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.stop(context.Background(), false) })
	return p.closeErr
}

// Shutdown stops the peer as a peer that is done should: as Close, top
// down, but open sockets first end their writing, so that their peers
// read what was written, then io.EOF (socket.Service.Shutdown; a JXTA
// socket's peer must read as it goes, as its close waits for that); the
// endpoint writes out what its Sends queued, asks the peers sending to it
// to finish their streams, idle or not, and waits for them
// (endpoint.Service.Shutdown); and
// the node closes each connection once its peer has read what was
// written on it (node.Node.Shutdown). So another peer's Flush to this one
// succeeds for everything delivered, rather than failing with its stream
// reset by the exit. The pipes close first: a message that arrives after
// that is not delivered, and its sender's Flush fails (an
// UndeliveredError for one the endpoint refused while still reading,
// ErrMaybeLost once it drains and resets streams). When ctx ends, what is
// left closes as by Close, and Shutdown reports the connections it closed
// before their peers answered (or that it could not ask, its memory
// full). Later calls of Shutdown or Close do nothing and return the
// first's result.
func (p *Peer) Shutdown(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.stop(ctx, true) })
	return p.closeErr
}

// stop closes the four layers, top down (each unregisters from the one
// below while that one still runs), gracefully within ctx if graceful,
// and returns the first error.
func (p *Peer) stop(ctx context.Context, graceful bool) error {
	var errs []error
	if p.sockets != nil {
		if graceful {
			errs = append(errs, p.sockets.Shutdown(ctx))
		} else {
			errs = append(errs, p.sockets.Close())
		}
	}
	if p.pipes != nil {
		errs = append(errs, p.pipes.Close())
	}
	if p.endpoint != nil {
		if graceful {
			errs = append(errs, p.endpoint.Shutdown(ctx))
		} else {
			errs = append(errs, p.endpoint.Close())
		}
	}
	if p.node != nil {
		if graceful {
			errs = append(errs, p.node.Shutdown(ctx))
		} else {
			errs = append(errs, p.node.Close())
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Node returns the peer's node: its libp2p host, identity and DHT.
func (p *Peer) Node() *node.Node { return p.node }

// Endpoint returns the peer's endpoint service.
func (p *Peer) Endpoint() *endpoint.Service { return p.endpoint }

// Pipes returns the peer's pipe service, for input, output and
// bidirectional pipes.
func (p *Peer) Pipes() *pipe.Service { return p.pipes }

// Sockets returns the peer's socket service, for net.Listener and net.Conn
// over pipes.
func (p *Peer) Sockets() *socket.Service { return p.sockets }

// ID returns the peer's libp2p peer ID.
func (p *Peer) ID() peer.ID { return p.node.ID() }

// AddrInfo returns the peer's ID and listen addresses, as pipe.ToPeers and
// WithBootstrapPeers take them.
func (p *Peer) AddrInfo() peer.AddrInfo { return p.node.AddrInfo() }

// Addrs returns the peer's full multiaddrs, each ending in /p2p/<id>:
// another peer passes one to peer.AddrInfoFromString (go-libp2p's
// core/peer) for pipe.ToPeers.
func (p *Peer) Addrs() []ma.Multiaddr { return p.node.Addrs() }

// startError is a failed step of New.
type startError struct {
	step string
	err  error
}

func (e *startError) Error() string { return "p2pmsg: starting " + e.step + ": " + e.err.Error() }

// Unwrap returns the step's error and, when a layer refused an option,
// ErrBadOption.
func (e *startError) Unwrap() []error {
	for _, bad := range []error{node.ErrBadOption, endpoint.ErrBadOption, jxtatcp.ErrBadOption, pipe.ErrBadOption, socket.ErrBadOption} {
		if errors.Is(e.err, bad) {
			return []error{e.err, ErrBadOption}
		}
	}
	return []error{e.err}
}
