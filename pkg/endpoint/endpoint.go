// Package endpoint is JXTA's lowest messaging layer on libp2p: it delivers a
// JXTA message to the listener registered for (service, param) on another
// peer, addressed as protocol://peer/service/param.
//
// It builds on package node (the libp2p host) and package wire (the JXTA
// binary message format) and knows nothing of pipes or sockets.
//
// # On the wire
//
// Messages travel on one long-lived libp2p stream per sending peer and
// destination peer, protocol ProtocolID, one frame per message:
//
//	uvarint(len(service)) service uvarint(len(param)) param uvarint(len(msg)) msg
//
// where msg is the application/x-jxta-msg encoding. The destination lives in
// this compact header, not in JXTA elements: a one-byte payload in a
// one-element message to an 8-byte service costs 33 bytes beyond the payload
// (22 of them the JXTA message format itself; JXTA 2.x needed 310 and more). Frames to one destination
// are written in Send order under a per-peer lock, so order is kept.
//
// # Trust and flow
//
// The source of a message is the libp2p peer on the other end of the
// authenticated connection, never what the message says. A message whose
// jxta:EndpointSourceAddress element names another peer is rejected and
// counted. Listeners run on the stream's reader: a slow listener stops the
// reading, libp2p's flow control then stalls the sender, and memory stays
// bounded. A panicking listener is recovered and counted.
package endpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// ProtocolID is the libp2p protocol that carries endpoint frames.
const ProtocolID protocol.ID = "/p2pmsg/endpoint/1.0.0"

// MaxNameLen bounds service names and parameters, in bytes.
const MaxNameLen = 1024

// SourceElement is the element JXTA uses to name a message's source.
const SourceElement = "EndpointSourceAddress"

// Errors.
var (
	ErrClosed       = errors.New("endpoint: service closed")
	ErrExists       = errors.New("endpoint: a listener is already registered there")
	ErrUnknownPeer  = errors.New("endpoint: no known peer has that address")
	ErrBadOption    = errors.New("endpoint: invalid option")
	ErrFrame        = errors.New("endpoint: malformed frame")
	ErrSourceForged = errors.New("endpoint: message names another peer as its source")
)

// Delivery is one received message and where it came from.
type Delivery struct {
	Source     peer.ID // the authenticated sending peer
	SourceJXTA id.ID   // its JXTA peer ID, derived from its key
	Service    string
	Param      string
	Message    *message.Message
}

// Listener receives messages. Deliver runs on the stream's reader: return
// promptly or the sender is slowed (on purpose).
type Listener interface {
	Deliver(ctx context.Context, d *Delivery)
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(ctx context.Context, d *Delivery)

// Deliver implements Listener.
func (f ListenerFunc) Deliver(ctx context.Context, d *Delivery) { f(ctx, d) }

// Stats counts what the service dropped.
type Stats struct {
	Received        uint64 // messages handed to a listener
	NoListener      uint64 // messages for an unregistered service
	SourceForged    uint64 // messages whose source element lied
	ListenerPanics  uint64 // listeners that panicked
	MalformedFrames uint64 // frames or messages that failed to decode
}

type options struct {
	maxMessage int64
}

// Option configures the service.
type Option func(*options) error

// WithMaxMessageSize bounds one received message (default 64 MiB, at most 1 GiB).
func WithMaxMessageSize(n int64) Option {
	return func(o *options) error {
		if n < 64 || n > 1<<30 {
			return fmt.Errorf("%w: max message size %d out of range [64, 1 GiB]", ErrBadOption, n)
		}
		o.maxMessage = n
		return nil
	}
}

type listenerKey struct{ service, param string }

// Service is a node's endpoint service.
type Service struct {
	node *node.Node
	opts options
	ctx  context.Context
	stop context.CancelFunc

	mu        sync.RWMutex
	listeners map[listenerKey]Listener
	senders   map[peer.ID]*sender
	closed    bool

	wg    sync.WaitGroup
	stats struct {
		received, noListener, forged, panics, malformed atomic.Uint64
	}
}

// New starts the endpoint service on n.
func New(n *node.Node, opts ...Option) (*Service, error) {
	o := options{maxMessage: wire.DefaultMaxMessageSize}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{node: n, opts: o, ctx: ctx, stop: cancel,
		listeners: map[listenerKey]Listener{}, senders: map[peer.ID]*sender{}}
	n.Host().SetStreamHandler(ProtocolID, s.handleStream)
	return s, nil
}

// Node returns the node the service runs on.
func (s *Service) Node() *node.Node { return s.node }

// Register installs l for (service, param). A listener registered with an
// empty param also receives messages for any param without a listener of
// its own.
func (s *Service) Register(service, param string, l Listener) error {
	if len(service) > MaxNameLen || len(param) > MaxNameLen {
		return fmt.Errorf("%w: service or parameter longer than %d bytes", ErrBadOption, MaxNameLen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	k := listenerKey{service, param}
	if _, ok := s.listeners[k]; ok {
		return fmt.Errorf("%w: %s/%s", ErrExists, service, param)
	}
	s.listeners[k] = l
	return nil
}

// Unregister removes the listener for (service, param).
func (s *Service) Unregister(service, param string) {
	s.mu.Lock()
	delete(s.listeners, listenerKey{service, param})
	s.mu.Unlock()
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{
		Received: s.stats.received.Load(), NoListener: s.stats.noListener.Load(),
		SourceForged: s.stats.forged.Load(), ListenerPanics: s.stats.panics.Load(),
		MalformedFrames: s.stats.malformed.Load(),
	}
}

// Close stops sending and receiving and waits for the readers to finish.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	senders := s.senders
	s.senders = map[peer.ID]*sender{}
	s.mu.Unlock()
	s.node.Host().RemoveStreamHandler(ProtocolID)
	s.stop()
	for _, snd := range senders {
		snd.close()
	}
	s.wg.Wait()
	return nil
}

// Resolve maps an address to the libp2p peer it names.
func (s *Service) Resolve(a Address) (peer.ID, error) {
	switch a.Protocol {
	case ProtocolP2P:
		p, err := peer.Decode(a.Addr)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrAddress, err)
		}
		return p, nil
	case ProtocolJXTA:
		want, err := id.Parse("urn:jxta:" + a.Addr)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrAddress, err)
		}
		h := s.node.Host()
		for _, p := range h.Network().Peers() {
			if jid, err := s.jxtaIDOf(p); err == nil && jid == want {
				return p, nil
			}
		}
		return "", fmt.Errorf("%w: %s (only connected peers are known)", ErrUnknownPeer, a)
	}
	return "", fmt.Errorf("%w: protocol %q (want p2p or jxta)", ErrAddress, a.Protocol)
}

func (s *Service) jxtaIDOf(p peer.ID) (id.ID, error) {
	pub := s.node.Host().Peerstore().PubKey(p)
	if pub == nil {
		var err error
		if pub, err = p.ExtractPublicKey(); err != nil {
			return id.ID{}, err
		}
	}
	return id.PeerIDFromPublicKey(s.node.Group(), pub)
}

// Send delivers m to the listener at addr on another peer. It returns once
// the message is written to the peer's stream; order is kept per peer. A
// failed stream is dropped, and the next Send opens a new one, dialling the
// peer again if needed. When the receiver is slow Send blocks (backpressure)
// until ctx is done; a Send cut short that way resets the stream, so
// messages still unread on it may be lost.
func (s *Service) Send(ctx context.Context, addr Address, m *message.Message) error {
	p, err := s.Resolve(addr)
	if err != nil {
		return err
	}
	if len(addr.Service) > MaxNameLen || len(addr.Param) > MaxNameLen {
		return fmt.Errorf("%w: service or parameter longer than %d bytes", ErrAddress, MaxNameLen)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	snd := s.senders[p]
	if snd == nil {
		snd = &sender{svc: s, peer: p, lock: make(chan struct{}, 1)}
		s.senders[p] = snd
	}
	s.mu.Unlock()
	return snd.send(ctx, addr.Service, addr.Param, m)
}

// sender owns the outgoing stream to one peer.
type sender struct {
	svc  *Service
	peer peer.ID

	// lock (capacity 1) serializes sends; unlike a mutex, waiting for it
	// honours ctx.
	lock chan struct{}
	st   network.Stream
	w    *bufio.Writer
	enc  *wire.Encoder
	hdr  []byte
	// deadline is the write deadline last set on st.
	deadline time.Time
}

func (snd *sender) send(ctx context.Context, service, param string, m *message.Message) error {
	size, err := wire.Size(m)
	if err != nil {
		return err
	}
	select {
	case snd.lock <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("endpoint: sending to %s: %w", snd.peer, ctx.Err())
	}
	defer func() { <-snd.lock }()
	if snd.st == nil {
		st, err := snd.svc.node.Host().NewStream(network.WithAllowLimitedConn(ctx, "endpoint"), snd.peer, ProtocolID)
		if err != nil {
			return fmt.Errorf("endpoint: opening stream to %s: %w", snd.peer, err)
		}
		snd.st = st
		snd.deadline = time.Time{}
		snd.w = bufio.NewWriterSize(st, 32<<10)
		snd.enc = wire.NewEncoder(snd.w)
	}
	// Touch the stream's deadline only when it changes: each call wakes
	// yamux's writers.
	dl, _ := ctx.Deadline()
	if !dl.Equal(snd.deadline) {
		snd.st.SetWriteDeadline(dl)
		snd.deadline = dl
	}
	h := snd.hdr[:0]
	h = binary.AppendUvarint(h, uint64(len(service)))
	h = append(h, service...)
	h = binary.AppendUvarint(h, uint64(len(param)))
	h = append(h, param...)
	h = binary.AppendUvarint(h, uint64(size))
	snd.hdr = h
	// Cancelling ctx unblocks a write stalled by a slow receiver: it moves
	// the write deadline into the past.
	var stop func() bool
	if ctx.Done() != nil {
		st := snd.st
		stop = context.AfterFunc(ctx, func() { st.SetWriteDeadline(pastDeadline) })
	}
	if _, err = snd.w.Write(h); err == nil {
		if err = snd.enc.Encode(m); err == nil {
			err = snd.w.Flush()
		}
	}
	if stop != nil && !stop() {
		snd.deadline = pastDeadline // set again before the next write
	}
	if err != nil {
		snd.st.Reset()
		snd.st = nil
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("endpoint: sending to %s: %w (%w)", snd.peer, cerr, err)
		}
		return fmt.Errorf("endpoint: sending to %s: %w", snd.peer, err)
	}
	return nil
}

// pastDeadline is a write deadline that has passed.
var pastDeadline = time.Unix(1, 0)

func (snd *sender) close() {
	snd.lock <- struct{}{}
	if snd.st != nil {
		snd.st.Close()
		snd.st = nil
	}
	<-snd.lock
}

func (s *Service) handleStream(st network.Stream) {
	// Add under the lock Close takes, so no reader starts after Close
	// began waiting for them.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		st.Reset()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer st.Close()
	// Close stops readers blocked on the stream.
	stop := context.AfterFunc(s.ctx, func() { st.Reset() })
	defer stop()
	src := st.Conn().RemotePeer()
	srcJXTA, err := s.jxtaIDOf(src)
	if err != nil {
		st.Reset()
		return
	}
	br := bufio.NewReaderSize(st, 64<<10)
	for {
		service, param, n, err := s.readHeader(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.stats.malformed.Add(1)
				st.Reset()
			}
			return
		}
		lr := &io.LimitedReader{R: br, N: n}
		m, err := wire.Decode(lr, wire.WithMaxMessageSize(max(n, 1)))
		if err == nil && lr.N != 0 {
			err = fmt.Errorf("%w: %d bytes after the message", ErrFrame, lr.N)
		}
		if err != nil {
			s.stats.malformed.Add(1)
			st.Reset() // the stream's framing can no longer be trusted
			return
		}
		s.deliver(&Delivery{Source: src, SourceJXTA: srcJXTA, Service: service, Param: param, Message: m})
	}
}

func (s *Service) readHeader(br *bufio.Reader) (service, param string, n int64, err error) {
	readStr := func(first bool) (string, error) {
		l, err := binary.ReadUvarint(br)
		if err != nil {
			if first && err == io.EOF {
				return "", io.EOF
			}
			return "", fmt.Errorf("%w: %v", ErrFrame, err)
		}
		if l > MaxNameLen {
			return "", fmt.Errorf("%w: name of %d bytes", ErrFrame, l)
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", fmt.Errorf("%w: %v", ErrFrame, err)
		}
		return string(b), nil
	}
	if service, err = readStr(true); err != nil {
		return
	}
	if param, err = readStr(false); err != nil {
		return
	}
	l, err := binary.ReadUvarint(br)
	if err != nil {
		return "", "", 0, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	if l > uint64(s.opts.maxMessage) {
		return "", "", 0, fmt.Errorf("%w: message of %d bytes over the limit", ErrFrame, l)
	}
	return service, param, int64(l), nil
}

func (s *Service) deliver(d *Delivery) {
	if el, ok := d.Message.Get(message.JXTANamespace, SourceElement); ok && !s.sourceMatches(string(el.Data), d) {
		s.stats.forged.Add(1)
		return
	}
	s.mu.RLock()
	l := s.listeners[listenerKey{d.Service, d.Param}]
	if l == nil {
		l = s.listeners[listenerKey{d.Service, ""}]
	}
	s.mu.RUnlock()
	if l == nil {
		s.stats.noListener.Add(1)
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.stats.panics.Add(1)
		}
	}()
	s.stats.received.Add(1) // counted when handed over, so tests can rely on it
	l.Deliver(s.ctx, d)
}

// sourceMatches checks a claimed source address against the authenticated
// sender.
func (s *Service) sourceMatches(claim string, d *Delivery) bool {
	a, err := ParseAddress(claim)
	if err != nil {
		return false
	}
	switch a.Protocol {
	case ProtocolP2P:
		return a.Addr == d.Source.String()
	case ProtocolJXTA:
		return "urn:jxta:"+a.Addr == d.SourceJXTA.String()
	}
	return false
}
