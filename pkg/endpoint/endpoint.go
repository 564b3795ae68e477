// Package endpoint is JXTA's lowest messaging layer on libp2p: it delivers a
// JXTA message to the listener registered for (service, param) on another
// peer, addressed as protocol://peer/service/param.
//
// It builds on package node (the libp2p host) and package wire (the JXTA
// binary message format) and knows nothing of pipes or sockets. With
// WithJXTA it is also a JXTA peer on JXTA's own TCP transport (package
// jxtatcp), reaching and reached by JXSE 2.7 peers (jxta.go).
//
// # On the wire
//
// Messages travel on one long-lived libp2p stream per sending peer and
// destination peer, protocol ProtocolID, one frame per message:
//
//	uvarint(len(service)+1) service uvarint(len(param)) param uvarint(len(msg)) msg
//
// or, for a frame going where the stream's previous frame went,
//
//	0x00 uvarint(len(msg)) msg
//
// where msg is the application/x-jxta-msg encoding. The destination lives in
// this compact header, not in JXTA elements: a one-byte payload in a
// one-element message to an 8-byte service costs 33 bytes beyond the payload
// (22 of them the JXTA message format itself; JXTA 2.x needed 310 and more),
// and the messages after it in a batch to the same destination 24 (a
// pipe's frame names a 9-byte service and a 20-byte key). The sender names
// the destination in the first frame of every batch it writes; a receiver
// refuses a stream whose first frame names none (ErrFrame).
//
// Small messages (16 KiB of data or less) are encoded into a per-peer queue
// and Send returns; a flusher writes the whole queue in one write, so the
// messages sent while a write is in progress leave together in the next
// (send.go). Nothing waits for a timer: a lone message leaves at once, and
// under load a write carries hundreds of messages, which is how one peer
// sends millions of small messages a second. Large messages are written by
// their Send after what is queued. Order per destination is the order in
// which Sends were accepted, from any number of goroutines.
//
// The receiver answers on the same stream (refuse.go): first with a hello
// that states its maximum message size, so a message over it fails at the
// sender (ErrTooLarge), then with a refusal for each message no listener
// took, which the sender's next Send to that destination or its Flush
// reports (ErrRefused). Nothing a receiver does not deliver is lost
// without its sender being told.
//
// # Trust and flow
//
// The source of a message is the libp2p peer on the other end of the
// authenticated connection, never what the message says. A message whose
// jxta:EndpointSourceAddress element names anything but its sender's own
// p2p:// or jxta:// address is not delivered, counted, and refused back
// (RefusedForged, ErrSourceForged). Listeners run on the stream's reader: a
// slow listener stops the reading, libp2p's flow control then stalls the
// sender, and memory stays bounded. A panicking listener is recovered and
// counted. What one peer can make the service hold is bounded per message
// (WithMaxMessageSize), per peer in streams (WithMaxStreamsPerPeer), in
// bytes held for it — frames being read, messages being delivered or kept
// with Delivery.Hold — (WithMemoryBudget, per peer and for all peers), in
// memory allocated ahead of the bytes (WithMaxPrealloc), in time (a frame
// that stops advancing is reset, WithFrameTimeout), and by libp2p's resource
// manager; see limits.go and budget.go. A full budget stalls the peer, as a
// slow listener does; it never drops a message.
//
// # Costs
//
// Receiving decodes small frames in place from the stream's buffer, many
// per read, into a delivery block that holds the Delivery, the Message,
// its first elements and up to 256 bytes of their data in one allocation;
// larger elements are read straight into buffers allocated once at their
// final size. A listener that drops a message once done with it can hand
// it back with Delivery.Release: the block is reused for a later message,
// as are buffers of 4 KiB and more (see buffers.go), so a releasing
// listener receives small messages with no allocation at all. Sending
// encodes a small message straight into the queue and writes large
// elements from the caller's memory. With listeners that do, the endpoint moves 1 MiB
// and larger messages over loopback TCP as fast as a raw libp2p stream;
// listeners that keep every message pay for allocating and collecting
// their buffers (about a third of the bandwidth at 1 MiB, less with a
// higher GOGC). A 1-byte round trip costs 1.1 to 1.35 times the raw
// stream's, the decoding, delivery and encoding of two messages
// (docs/performance.md).
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// ProtocolID is the libp2p protocol that carries endpoint frames.
const ProtocolID protocol.ID = "/p2pmsg/endpoint/1.2.0"

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
	ErrMaybeLost    = errors.New("endpoint: messages sent earlier may be lost (their stream was reset)")
	// ErrPeerGone: a Send failed because the peer's side ended the
	// stream under it, or the connection under it ended (the peer
	// closed, restarted, or the connection was lost), or, with no
	// connection left, the peer could not be dialled. The message was
	// not delivered; the next Send opens a new stream, dialling again.
	ErrPeerGone = errors.New("endpoint: the peer went away")
)

// Delivery is one received message and where it came from.
type Delivery struct {
	Source     peer.ID // the authenticated sending peer
	SourceJXTA id.ID   // its JXTA peer ID, derived from its key
	Service    string
	Param      string
	Message    *message.Message
	// Security names what authenticates and encrypts the connection the
	// message came on: the security protocol (e.g. /tls/1.0.0, /noise),
	// or for transports with security built in, the transport (quic-v1).
	// Empty only for a connection with neither, which p2pmsg nodes never
	// make.
	Security string
	// Relayed is true when the message came through a circuit relay. The
	// connection is still secured end to end with the source; the relay
	// forwards only ciphertext.
	Relayed bool
	// Transport is "" for libp2p, TransportJXTA for JXTA's TCP transport
	// (WithJXTA), where Source is empty and SourceJXTA is the sender.
	Transport string
	// Unverified is true when nothing authenticates SourceJXTA: a JXTA
	// peer's message that was not signed (WithJXTA with unsigned
	// messages accepted). libp2p messages are always authenticated.
	Unverified bool
	// RemoteHost is the remote host of the connection the message came
	// on, as bounds shared out by host count it: the IPv4 address as a
	// /32, or the IPv6 /64 (a host picks addresses in its /64 at will).
	// For a relayed message it is the relay's host: the peer behind the
	// relay shows no address of its own. Unlike Source, it costs a
	// hostile peer a machine, not a key pair, to change. The zero Prefix
	// when the connection's address has no IP.
	RemoteHost netip.Prefix

	// bufs are the service's buffers holding the message's larger
	// elements, for Release.
	bufs *recvBufs
	// The memory-budget charge (Hold, Size) and a listener's refusal
	// (Refuse).
	svc     *Service
	peer    *peerIn
	charged int64        // bytes still charged, released when the listener returns unless held
	held    atomic.Int64 // bytes Hold kept charged, until Unhold
	size    int64
	refused byte
	reason  string

	// jxta is a JXTA peer's message as its transport handed it over,
	// whose Hold keeps the frame charged to the transport's budget;
	// unholdJXTA ends that hold (set before held).
	jxta       *jxtatcp.Incoming
	unholdJXTA func()

	// blk is the block d lives in when it is recycled; state says who
	// recycles it.
	blk   *deliveryBlock
	state atomic.Uint32
	// in is the stream's reader, for WakeLater; nil once the listener
	// has returned.
	in *inStream
}

// A Waker is woken by a stream's reader once the messages it has already
// read are handed over (see Delivery.WakeLater).
type Waker interface {
	Wake()
}

// WakeLater asks the reader that delivers d to call w.Wake once it has
// handed over every message it already holds, before it waits for
// anything: for the network, for memory, to write to the sender. A
// listener that queues messages for a consumer goroutine can so wake it
// once per burst of messages rather than once per message, which on a
// busy node halves a small message's cost. The listener must call
// WakeNow before it waits itself. Outside Deliver, and for deliveries not
// from a stream, w is woken at once.
func (d *Delivery) WakeLater(w Waker) {
	if d.in == nil {
		w.Wake()
		return
	}
	d.in.wakeLater(w)
}

// WakeNow runs the wakes WakeLater deferred so far on d's reader. Call it
// from Deliver before waiting for anything, or the consumer that would
// end the wait may never be woken.
func (d *Delivery) WakeNow() {
	if d.in != nil {
		d.in.wake()
	}
}

// ConnSecurity returns what authenticates and encrypts c (see
// Delivery.Security), or "" if nothing does.
func ConnSecurity(c network.Conn) string {
	cs := c.ConnState()
	if cs.Security != "" {
		return string(cs.Security)
	}
	switch cs.Transport {
	case "quic", "quic-v1", "webtransport", "webrtc":
		return cs.Transport // TLS 1.3 or DTLS inside the transport
	case "p2p-circuit":
		// go-libp2p upgrades every relayed connection with the node's
		// security protocols, end to end, but its circuit transport
		// does not say which one it negotiated.
		return "p2p-circuit+upgraded"
	}
	return ""
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

// Stats counts what the service refused, dropped or waited for.
type Stats struct {
	Received         uint64 // messages handed to a listener
	NoListener       uint64 // messages for an unregistered service (refused back to their sender)
	SourceForged     uint64 // messages whose source element lied
	ListenerPanics   uint64 // listeners that panicked
	MalformedFrames  uint64 // frames or messages that failed to decode
	StreamsRefused   uint64 // incoming streams over the per-peer limit (WithMaxStreamsPerPeer)
	FramesTimedOut   uint64 // frames reset for not advancing within the frame timeout (WithFrameTimeout)
	FramesShed       uint64 // frames reset, while others waited for the memory budget, for arriving too slowly to end within another frame timeout
	BudgetWaits      uint64 // frames that waited for memory budget before being read (WithMemoryBudget)
	RefusalsSent     uint64 // refusals written back to senders (no listener, Delivery.Refuse)
	RefusalsReceived uint64 // refusals received from peers for messages this service sent
	// ReportsDropped counts what retired senders had still to report
	// (messages that may be lost, refusals) and was dropped to bound
	// memory: more peers than the sender table holds had such reports
	// that no Flush collected (retire.go).
	ReportsDropped uint64
}

type options struct {
	maxMessage int64
	// Per-peer limits, see limits.go; negative means "the default".
	maxPeerStreams            int
	peerPrealloc, allPrealloc int64
	// Memory and time budgets, see budget.go; zero means "the default".
	peerBudget, allBudget int64
	frameTimeout          time.Duration
	jxta                  *jxtaConfig
}

// Option configures the service.
type Option func(*options) error

// WithMaxMessageSize bounds one received message (default 64 MiB, at most
// 1 GiB). Senders learn it when they open a stream to the service, and a
// message over it fails at the sender with a LimitError. Set it above
// 64 KiB: smaller messages may be sent before the sender has learnt the
// limit, and those over it then reset the stream.
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
	jxta      *jxtatcp.Transport // nil without WithJXTA
	// listenersGen counts changes to listeners, for the readers' caches;
	// it changes under mu.
	listenersGen atomic.Uint64
	// senders holds at most maxSenders idle senders (retire.go);
	// sweepAt is the size at which the next Send to a new peer retires
	// idle ones, reports what retired senders had not yet reported, and
	// ending the streams they had, to end once mu is released.
	senders    map[peer.ID]*sender
	maxSenders int
	sweepAt    int
	reports    map[peer.ID]*report
	ending     []func() error
	closed     bool
	// draining is set by Shutdown: readers deliver no further message
	// and end their streams cleanly at the peer's end of stream.
	draining atomic.Bool
	// resolved caches Resolve's answers: decoding a peer ID (base58 and
	// multihash) costs more than the rest of a small Send.
	resolved map[resolveKey]peer.ID
	byAddr   map[resolveKey]*sender // Send's shortcut past Resolve
	// sendCache is Send's shortcut past byAddr.
	sendCache [16]atomic.Pointer[sentTo]

	// Incoming streams and preallocated bytes per peer (limits.go).
	inMu       sync.Mutex
	in         map[peer.ID]*peerIn
	streams    map[*inStream]struct{} // being read, for the frame watchdog
	budget     budget
	prealloc   int64 // bytes preallocated for frames being read, all peers
	decodeOpts []wire.Option
	bufs       bufPool   // element buffers handed back by Delivery.Release
	blocks     sync.Pool // *deliveryBlock, recycled by Delivery.Release

	wg      sync.WaitGroup
	readers sync.WaitGroup // incoming streams' readers, a subset of wg
	stats   struct {
		received, noListener, forged, panics, malformed, refused    atomic.Uint64
		timedOut, shed, budgetWaits, refusalsSent, refusalsReceived atomic.Uint64
		reportsDropped                                              atomic.Uint64
	}
}

// New starts the endpoint service on n.
func New(n *node.Node, opts ...Option) (*Service, error) {
	o := options{maxMessage: wire.DefaultMaxMessageSize, maxPeerStreams: -1, peerPrealloc: -1, allPrealloc: -1}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := o.resolveLimits(); err != nil {
		return nil, err
	}
	if err := o.resolveBudget(); err != nil {
		return nil, err
	}
	var decodeOpts []wire.Option
	if o.maxMessage != wire.DefaultMaxMessageSize {
		// Without options Decode uses its defaults and allocates nothing
		// for them.
		decodeOpts = []wire.Option{wire.WithMaxMessageSize(o.maxMessage)}
	}
	if _, err := wire.NewUnmarshaler(decodeOpts...); err != nil { // each stream makes one
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{node: n, opts: o, ctx: ctx, stop: cancel,
		listeners: map[listenerKey]Listener{}, senders: map[peer.ID]*sender{},
		maxSenders: maxSenders, sweepAt: maxSenders, reports: map[peer.ID]*report{},
		resolved: map[resolveKey]peer.ID{}, byAddr: map[resolveKey]*sender{}, in: map[peer.ID]*peerIn{},
		streams: map[*inStream]struct{}{}}
	s.budget.freed = make(chan struct{})
	s.blocks.New = func() any { return new(deliveryBlock) }
	s.decodeOpts = decodeOpts
	if o.jxta != nil {
		if err := s.startJXTA(o.jxta); err != nil {
			cancel()
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.watchFrames()
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
	s.listenersGen.Add(1)
	return nil
}

// Unregister removes the listener for (service, param).
func (s *Service) Unregister(service, param string) {
	s.mu.Lock()
	delete(s.listeners, listenerKey{service, param})
	s.listenersGen.Add(1)
	s.mu.Unlock()
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{
		Received: s.stats.received.Load(), NoListener: s.stats.noListener.Load(),
		SourceForged: s.stats.forged.Load(), ListenerPanics: s.stats.panics.Load(),
		MalformedFrames: s.stats.malformed.Load(), StreamsRefused: s.stats.refused.Load(),
		FramesTimedOut: s.stats.timedOut.Load(), FramesShed: s.stats.shed.Load(), BudgetWaits: s.stats.budgetWaits.Load(),
		RefusalsSent: s.stats.refusalsSent.Load(), RefusalsReceived: s.stats.refusalsReceived.Load(),
		ReportsDropped: s.stats.reportsDropped.Load(),
	}
}

// Close stops sending and receiving and waits for the readers to finish.
// Writes in progress are cut short and queued messages not yet written are
// dropped: Flush first to know everything sent was delivered, or use
// Shutdown, which writes them out.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	senders, ending := s.senders, s.ending
	s.senders, s.ending = map[peer.ID]*sender{}, nil
	clear(s.byAddr)
	clear(s.reports)
	s.mu.Unlock()
	s.node.Host().RemoveStreamHandler(ProtocolID)
	s.stop()
	for _, end := range ending {
		end()
	}
	for _, snd := range senders {
		snd.close()
	}
	if s.jxta != nil {
		s.jxta.Close()
	}
	s.wg.Wait()
	return nil
}

// Shutdown closes the service gracefully, as a receiver that is done should:
// it stops accepting streams and messages, asks each peer that is sending to
// end its stream (a record on the stream's back channel, which a p2pmsg
// sender answers at once, as a Flush would, even when its application is
// idle), then waits, until ctx ends, for them to finish, so that a sender's
// Flush learns that everything it sent was delivered rather than seeing its
// stream reset. A message that starts arriving after Shutdown began is not
// delivered (its sender's Flush fails). When ctx ends first, the remaining
// streams are reset as by Close, which Shutdown always ends with. Messages
// this service's Sends queued are written out first, within ctx. The node's
// connections stay up: closing them at once afterwards can still cut off a
// stream's end on its way to its sender, which node.Node.Shutdown does not.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.draining.Store(true)
	s.mu.Unlock()
	s.node.Host().RemoveStreamHandler(ProtocolID)
	s.askToEnd()
	// Write out what Sends queued, so the peers read it before the
	// streams end.
	s.mu.Lock()
	senders := make([]*sender, 0, len(s.senders))
	for _, snd := range s.senders {
		senders = append(senders, snd)
	}
	s.mu.Unlock()
	for _, snd := range senders {
		snd.drain(ctx)
	}
	done := make(chan struct{})
	go func() { s.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	err := s.Close()
	<-done
	return err
}

// askToEnd asks the sender of every stream being read to end it (a
// going-away record), each write on a goroutine of its own: a sender
// that does not read its back channel holds only that one, at most
// backWriteTimeout, and then has its stream reset. Streams opened since
// draining began are asked as they are greeted (inStream.greet).
func (s *Service) askToEnd() {
	s.inMu.Lock()
	ins := make([]*inStream, 0, len(s.streams))
	for in := range s.streams {
		ins = append(ins, in)
	}
	s.inMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, in := range ins {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			in.goAway()
		}()
	}
}

// Resolve maps an address to the libp2p peer it names. A jxta:// address
// names a peer whose key derives that JXTA ID; it is looked for among the
// connected peers, and once found it stays known (both IDs come from the
// same key, so the answer cannot change).
func (s *Service) Resolve(a Address) (peer.ID, error) {
	k := resolveKey{a.Protocol, a.Addr}
	s.mu.RLock()
	p, ok := s.resolved[k]
	s.mu.RUnlock()
	if ok {
		return p, nil
	}
	p, err := s.resolve(a)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if len(s.resolved) >= maxResolved {
		clear(s.resolved) // bounded; refilled by the next Sends
	}
	s.resolved[k] = p
	s.mu.Unlock()
	return p, nil
}

// resolveKey is an address without its service and param.
type resolveKey struct{ protocol, addr string }

// maxResolved bounds Resolve's cache.
const maxResolved = 4096

func (s *Service) resolve(a Address) (peer.ID, error) {
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
// the message is accepted: a small one copied into the peer's queue, a
// large one written to the peer's stream. Either way the caller may reuse
// m and its data at once. Order is kept per peer, across goroutines.
// Flush says when the peer has it.
//
// A message larger than the peer accepts fails with a LimitError
// (ErrTooLarge) and is not sent. When the peer refused earlier messages to
// the same addr (no listener there, or the listener refused them), Send
// returns a RefusedError (ErrRefused) counting them and does not send m:
// the caller decides whether to send it elsewhere or again. When the
// stream failed under messages already accepted, the next Send fails with
// ErrMaybeLost (once, and Flush says it again) and does not send m; the
// Send after it opens a new stream, dialling the peer again if needed.
//
// When the receiver is slow Send blocks (backpressure) until ctx is done:
// a small message waiting for room in the queue is then not sent, and
// nothing else is lost; a large message cut short resets the stream, so
// messages still unread on it may be lost (Flush reports it). A
// SendGroup's Close cuts short the waits of Sends made through it the
// same way.
func (s *Service) Send(ctx context.Context, addr Address, m *message.Message) error {
	return s.send(ctx, nil, addr, m)
}

// send is Send, through g if g is not nil (SendGroup.Send).
func (s *Service) send(ctx context.Context, g *SendGroup, addr Address, m *message.Message) error {
	if len(addr.Service) > MaxNameLen || len(addr.Param) > MaxNameLen {
		return fmt.Errorf("%w: service or parameter longer than %d bytes", ErrAddress, MaxNameLen)
	}
	slot := &s.sendCache[0]
	if n := len(addr.Addr); n > 0 {
		slot = &s.sendCache[addr.Addr[n-1]%byte(len(s.sendCache))]
		if c := slot.Load(); c != nil && c.addr == addr.Addr && c.protocol == addr.Protocol {
			if err := c.snd.send(ctx, g, addr.Service, addr.Param, m); err != errRetired {
				return err
			}
			slot.CompareAndSwap(c, nil)
		}
	}
	if addr.Protocol == ProtocolTCP {
		return s.sendJXTA(ctx, addr, m)
	}
	for {
		snd, err := s.senderFor(addr)
		if err != nil {
			if addr.Protocol == ProtocolJXTA && s.jxta != nil && errors.Is(err, ErrUnknownPeer) {
				// Not a libp2p peer: a JXTA peer, perhaps.
				return s.sendJXTA(ctx, addr, m)
			}
			return err
		}
		slot.Store(&sentTo{addr.Protocol, addr.Addr, snd})
		if err := snd.send(ctx, g, addr.Service, addr.Param, m); err != errRetired {
			return err
		}
		// Retired between the lookup and the send, before anything of m
		// was accepted: look again.
	}
}

// senderFor returns the sender for addr, making it if needed.
func (s *Service) senderFor(addr Address) (*sender, error) {
	k := resolveKey{addr.Protocol, addr.Addr}
	s.mu.RLock()
	snd, closed := s.byAddr[k], s.closed
	s.mu.RUnlock()
	if snd != nil && snd.isDead() {
		snd = nil // retired since: a new one is made
	}
	if snd == nil && !closed {
		p, err := s.Resolve(addr)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if closed = s.closed; !closed {
			if snd = s.senders[p]; snd == nil {
				snd = s.addSenderLocked(p)
			}
			if len(s.byAddr) >= maxResolved {
				clear(s.byAddr)
			}
			s.byAddr[k] = snd
		}
		ending := len(s.ending) > 0
		s.mu.Unlock()
		if ending {
			s.endRetired()
		}
	}
	if closed {
		return nil, ErrClosed
	}
	return snd, nil
}

// sentTo remembers the sender of an address, for Send's cache: looking up
// byAddr (hashing and comparing a 50-byte peer ID under a lock) costs a
// third of a small Send. The cache is indexed by the address's last byte,
// random in peer IDs. An entry may outlive its sender's place in the
// table: a retired sender answers errRetired, and Send looks again.
type sentTo struct {
	protocol, addr string
	snd            *sender
}

// isCircuit reports whether c runs through a circuit relay.
func isCircuit(c network.Conn) bool {
	_, err := c.RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

func (s *Service) handleStream(st network.Stream) {
	// Add under the lock Close takes, so no reader starts after Close
	// began waiting for them.
	s.mu.Lock()
	if s.closed || s.draining.Load() {
		s.mu.Unlock()
		st.Reset()
		return
	}
	s.wg.Add(1)
	s.readers.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer s.readers.Done()
	defer st.Close()
	// Close stops readers blocked on the stream.
	stop := context.AfterFunc(s.ctx, func() { st.Reset() })
	defer stop()
	src := st.Conn().RemotePeer()
	in := s.openIn(src, st)
	if in == nil { // the peer has too many streams open to us
		st.Reset()
		s.stats.refused.Add(1)
		return
	}
	defer s.closeIn(in)
	defer in.wake()
	// Before st.Close: a back channel write failing on the closed stream
	// must not reset it (inStream.write).
	defer in.ended.Store(true)
	security, relayed := ConnSecurity(st.Conn()), st.Conn().Stat().Limited || isCircuit(st.Conn())
	remoteHost, _ := hostkey.FromMultiaddr(st.Conn().RemoteMultiaddr())
	srcJXTA, err := s.jxtaIDOf(src)
	if err != nil {
		st.Reset()
		return
	}
	if err := in.greet(); err != nil {
		st.Reset()
		return
	}
	for {
		service, param, n, buffered, err := in.readHeader()
		if err != nil {
			if err != io.EOF && !in.backFailed.Load() { // a bare io.EOF only: see startBack
				in.failed()
				st.Reset()
			}
			return // (a sender that did not take its refusals was reset)
		}
		if s.draining.Load() {
			st.Reset() // shutting down: the sender must not count it delivered
			return
		}
		// Charge the frame before reading its body; waiting here is the
		// receiver's stall, not the peer's. A frame already buffered
		// whole cannot stall, and does not touch the watchdog's marks.
		if !buffered {
			in.prog.reading.Store(false)
		}
		charge := n + frameOverhead
		if !s.tryCharge(in.peer, charge) {
			in.wake() // what is queued may be what frees the budget
			if err := s.charge(in.peer, charge); err != nil {
				st.Reset()
				return
			}
		}
		if !buffered {
			in.prog.body.Store(n)
			in.prog.reading.Store(true)
		}
		d, err := in.readDelivery(n)
		if !buffered {
			in.prog.reading.Store(false)
			in.prog.body.Store(0)
		}
		if err != nil {
			s.discharge(in.peer, charge)
			in.failed()
			st.Reset() // the stream's framing can no longer be trusted
			return
		}
		extra := int64(d.Message.Len()) * elementOverhead
		s.forceCharge(in.peer, extra)
		d.Source, d.SourceJXTA, d.Service, d.Param = src, srcJXTA, service, param
		d.Security, d.Relayed, d.RemoteHost = security, relayed, remoteHost
		d.svc, d.peer, d.charged, d.size = s, in.peer, charge+extra, charge+extra
		d.in = in
		s.deliver(d, in)
		charged, refused, reason := d.charged, d.refused, d.reason
		d.in = nil
		d.returned() // d may be recycled from here on
		if charged > 0 {
			s.discharge(in.peer, charged)
		}
		if refused != 0 {
			s.stats.refusalsSent.Add(1)
			in.refuse(refused, service, param, reason)
			if in.backFailed.Load() {
				return // a sender that does not read its answers: reset
			}
		}
	}
}

// deliver hands d to its listener. in remembers the listener of the last
// destination its stream carried, until the listeners change.
func (s *Service) deliver(d *Delivery, in *inStream) {
	if el, ok := d.Message.Get(message.JXTANamespace, SourceElement); ok && !s.sourceMatches(string(el.Data), d) {
		s.stats.forged.Add(1)
		d.Release() // nobody saw it
		d.refused, d.reason = RefusedForged, ""
		return
	}
	var l Listener
	if c := &in.last; c.gen == s.listenersGen.Load() && c.service == d.Service && c.param == d.Param {
		l = c.l
	} else {
		gen := s.listenersGen.Load()
		l = s.listenerFor(d.Service, d.Param)
		*c = lastListener{gen: gen, service: d.Service, param: d.Param, l: l}
	}
	if l == nil {
		s.stats.noListener.Add(1)
		d.Release()
		d.refused, d.reason = RefusedNoListener, ""
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

// listenerFor returns the listener for (service, param), or for service
// with any param; nil if none.
func (s *Service) listenerFor(service, param string) Listener {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := s.listeners[listenerKey{service, param}]
	if l == nil {
		l = s.listeners[listenerKey{service, ""}]
	}
	return l
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
