// Package pipe is JXTA's pipe layer on p2pmsg's endpoint service: virtual
// channels named by pipe IDs and described by pipe advertisements, bound
// by input pipes on some peers and reached through output pipes from
// others, wherever the inputs happen to live.
//
// It builds on package endpoint (addressed messages over libp2p streams),
// package adv (pipe advertisements) and, for propagate pipes,
// go-libp2p-pubsub. It knows nothing of sockets. When the endpoint is also
// a JXTA peer (endpoint.WithJXTA), unicast pipes are shared with JXSE 2.7
// peers through JXTA's resolver and pipe binding protocol (jxta.go,
// ToJXTAPeers), bidirectional pipes are JxtaBiDiPipes with them
// (jxtabidi.go, over JXTA's reliable layer, package jxtarel), and
// JXTASession gives layers above the pipe pairs JXTA's connections use.
//
// # Pipe types
//
//   - JxtaUnicast: one input pipe, best effort. An output pipe resolves the
//     peer where the input is bound and sends to it over the endpoint.
//   - JxtaUnicastSecure: as unicast, but a message is sent and accepted
//     only over connections that are authenticated and encrypted (TLS 1.3
//     or Noise, or QUIC's built-in TLS), and the receiver learns the
//     sender's identity (Received.From, proven by its key). libp2p secures
//     a relayed connection end to end between the two peers, so this holds
//     through circuit relays too: the relay forwards only ciphertext.
//   - JxtaPropagate: every peer bound to the pipe gets each message. Each
//     propagate pipe is a gossipsub topic named TopicPrefix + pipe ID;
//     binding an input pipe subscribes, and membership is gossipsub's: the
//     members are the peers subscribed to the topic, learnt from every
//     connected peer's subscription announcements. Below gossipsub's mesh
//     degree (6), members connected to each other are direct mesh
//     neighbours, so a message goes straight from the sender to each;
//     larger groups get gossipsub's bounded fan-out and gossip repair.
//     Members reach each other only over connections: ones that share
//     only a bootstrap peer form a star around it and lose the room with
//     it, so a room wants the DHT (or mDNS, or several bootstrap peers);
//     with a DHT, binding a propagate input also publishes a provider
//     record and an output pipe connects to the providers it finds.
//     Delivery is best effort and not in order: gossipsub validates
//     messages in parallel, so a few of one author's may arrive out of
//     order; none arrives twice while the receiver runs (its replay
//     windows are in memory: a message captured before it restarts is
//     taken once more after). The advertisement names no binders:
//     members are whoever subscribes. Messages are signed by their author
//     (pubsub's StrictSign), so Received.From is proven here too. The
//     service starts its gossipsub router with its first propagate pipe: a
//     node that has none runs no gossipsub.
//
// Bidirectional pipes (JXTA's JxtaServerPipe and JxtaBiDiPipe) are
// Listen/Accept on one side and Connect on the other; each Bidi both
// sends and receives, in order, over the endpoint.
//
// # Binding resolution
//
// An output pipe or Connect finds where its pipe is bound (a) among the
// peers the caller names (ToPeers), otherwise (b) by asking every
// connected peer, in the spirit of JXTA's Pipe Binding Protocol, over
// ResolverProtocol, and (c) when the node has a DHT, by looking up the
// pipe's provider records and asking those peers. Binding a pipe also
// tells the connected peers (BindingProtocol, in the spirit of JXTA's
// SRDI): asked for it, they refer the asker to the binder, and one asked
// in vain forwards the binding to the asker when it arrives, so a new
// binder is found as soon as it has told its neighbours, before its
// provider record is in the DHT. Resolution is bounded by the caller's
// context and WithResolveTimeout; failure wraps ErrNotResolved. An output
// pipe whose send fails forgets the peer and resolves again on the next
// Send. While it sends to a peer, that peer's connection is protected
// from the connection manager's trimming.
//
// Every answer is considered, up to the connected peers asked
// (WithQueryPeers; those that pushed the binding and the advertisement's
// named binders first), 16 DHT providers and 4 referred peers per peer
// asked in vain (in its answer and in the bindings it forwards; a
// forward from a peer not asked in vain is ignored, Stats.IgnoredReferrals),
// and the first that holds is taken. Which answers hold depends on the advertisement:
//
//   - A pipe whose advertisement names its binders (Binders), and every
//     secure pipe, needs proof: the answering peer must be named there
//     and must sign the pipe ID, role and the querier's fresh nonce with
//     its key (proof.go). Other answers, and DHT records leading to peers
//     that cannot prove, are ignored and counted (Stats.UnprovenAnswers).
//     A secure pipe whose advertisement names no binder cannot be
//     resolved by asking around (ErrUnprovable): name the binders, or the
//     peer (ToPeers).
//   - An unicast pipe that names no binders promises less: any peer can
//     claim to bind it, and the first to answer wins. What still holds is
//     who is at the other end (OutputPipe.RemotePeer, proven by the
//     connection) and, for every message, who sent it (Received.From).
//     Name the binders when it matters where messages go.
//
// Propagate messages carry their author's sequence number, and one seen
// before, or too far behind the author's latest, is dropped even after
// gossipsub has forgotten it (seqno.go; Stats.PropagateReplays).
//
// # Flow control and its limits
//
// Unicast messages and bidirectional pipes from one peer share that
// peer's endpoint stream, and an input pipe or Bidi whose queue is full
// holds the stream until the application receives: the sender slows down
// instead of memory growing, but other pipes from the same peer wait too.
// Receive promptly, or hand off from a handler. Queues are bounded in
// messages (WithQueueLen) and in bytes (WithQueueBytes), and a queued
// message stays on its sender's endpoint memory budget until received
// (endpoint.WithMemoryBudget), so one peer cannot make a node's queues
// hold more than that budget, however many pipes it fills. Closing an
// input pipe or Bidi takes its queued messages off their senders'
// budgets; they can still be received.
//
// A unicast message that reaches a peer where its pipe is not bound (it
// was closed, or moved) is refused back to the sender: the output pipe
// resolves the binding again, and its next Send goes to the new binder
// while Flush reports the refused messages (UndeliveredError). So every
// message whose Send succeeded is delivered or reported by Flush; none is
// dropped in silence. Propagate pipes are best effort: gossipsub does not slow
// a publisher down, and a member more than its subscription buffer
// (twice the queue length, at least 32) behind loses messages. A handler may still run
// once after its pipe's Close returns.
//
// # On the wire
//
// A unicast message is an endpoint message to service DataService with
// the pipe's 20-character Key as parameter: 54 bytes beyond a one-byte
// payload (JXTA 2.x needed 877).
package pipe

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// Endpoint services and protocols of the pipe layer.
const (
	// DataService carries unicast and secure pipe messages; the endpoint
	// parameter is the pipe's Key.
	DataService = "jxta-pipe"
	// BidiService carries bidirectional pipes' handshakes and messages.
	BidiService = "jxta-bidi"
	// TopicPrefix + pipe ID is a propagate pipe's gossipsub topic.
	TopicPrefix = "/p2pmsg/pipe/"
)

// Errors. Errors this package makes wrap one of these (use errors.Is);
// failures of the layers below (endpoint, libp2p, gossipsub) are passed
// on wrapped with the pipe they concern.
var (
	ErrClosed      = errors.New("pipe: closed")
	ErrBound       = errors.New("pipe: already bound on this peer")
	ErrNotResolved = errors.New("pipe: no peer found with the pipe bound")
	ErrBadAdv      = errors.New("pipe: invalid pipe advertisement")
	ErrBadOption   = errors.New("pipe: invalid option")
	ErrWrongType   = errors.New("pipe: not possible with this pipe type")
	ErrInsecure    = errors.New("pipe: connection to the peer is not authenticated and encrypted")
	ErrRefused     = errors.New("pipe: connection refused")
	ErrPeerGone    = errors.New("pipe: remote peer went away")
	ErrTooLarge    = errors.New("pipe: message too large")
	ErrHandler     = errors.New("pipe: input pipe delivers to its handler")
)

// Roles a peer can have a pipe bound in, as binding resolution asks for
// them.
const (
	// RoleInput is an input pipe (unicast or secure).
	RoleInput = "input"
	// RoleBidi is a bidirectional pipe listener.
	RoleBidi = "bidi"
	// RolePropagate is a propagate input pipe.
	RolePropagate = "propagate"
)

// Key is the compact name of a pipe on the wire: 20 URL-safe base64
// characters of the SHA-256 of its ID (120 bits, so distinct pipes do not
// collide).
func Key(p id.ID) string {
	sum := sha256.Sum256([]byte(p.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:15])
}

// Received is a message that arrived on a pipe, and who sent it.
type Received struct {
	Message *message.Message
	// From is the sending peer, proven by its key: the authenticated
	// libp2p connection for unicast and bidirectional pipes, the author's
	// signature for propagate pipes.
	From peer.ID
	// FromJXTA is the sender's JXTA peer ID: From's, derived from its
	// key; for a JXTA peer's message (From empty), the JXTA transport's
	// sender, proven by its CBJX signature unless Unverified.
	FromJXTA id.ID
	// Unverified is true when nothing proves FromJXTA: a JXTA peer's
	// message that came unsigned (endpoint.Delivery.Unverified; a JXTA
	// transport that accepts unsigned messages).
	Unverified bool
	Pipe       id.ID
	// Security is what authenticated and encrypted the connection it came
	// on (see endpoint.Delivery.Security); empty for propagate messages,
	// which are signed end to end but travel hop by hop.
	Security string
	// Relayed is true when it came through a circuit relay.
	Relayed bool
	// RemoteHost is the remote host of the connection it came on
	// (endpoint.Delivery.RemoteHost): the zero Prefix for propagate
	// messages, which travel hop by hop, and for this peer's own.
	RemoteHost netip.Prefix

	delivery *endpoint.Delivery // what Release releases
	queued   queued             // what it holds while queued (queue.go)
	pooled   bool               // from receivedPool
	kept     bool               // kept with its delivery's storage (endpoint.Delivery.Kept), and recycled with it
	// listening is the context of the endpoint listener a JXTA session
	// pipe's message is handed over in, while that listener runs: a
	// Bidi waiting for room in its queue waits no longer than it, so
	// that the endpoint can close. Nil once the listener has returned.
	listening context.Context
}

// received returns the Received of d, a message from the endpoint to pipe.
// It stays with the delivery's storage when both are released, so that
// the next message in that storage comes with it: no pool to go through
// (recycle).
func received(d *endpoint.Delivery, pipe id.ID) *Received {
	var r *Received
	slot := d.Kept()
	if slot != nil {
		r, _ = (*slot).(*Received)
	}
	if r == nil {
		r = receivedPool.Get().(*Received)
		if slot != nil {
			*slot = r
		}
	}
	*r = Received{Message: d.Message, From: d.Source, FromJXTA: d.SourceJXTA, Unverified: d.Unverified, Pipe: pipe, Security: d.Security,
		Relayed: d.Relayed, RemoteHost: d.RemoteHost, delivery: d, pooled: true, kept: slot != nil}
	return r
}

// receivedPool recycles the Received of unicast and secure pipes'
// messages: Release, and Receive, which returns only the message, hand
// them back.
var receivedPool = sync.Pool{New: func() any { return &Received{pooled: true} }}

// Refuse tells the sender that this message was not taken, with reason
// (at most endpoint.MaxReasonLen bytes are sent): its output pipe's
// next Send or Flush reports an UndeliveredError naming it. Only a
// WithHandler function can refuse, while it runs, and only messages of
// unicast and secure pipes from other peers (the endpoint's back
// channel); elsewhere Refuse does nothing. Call it before Release.
func (r *Received) Refuse(reason string) {
	if r.delivery != nil {
		r.delivery.Refuse(reason)
	}
}

// Release hands the message's buffers, and r itself, back for reuse by
// later messages (see endpoint.Delivery.Release). Call it only when
// nothing will use r, the message or its data again, and only once: a
// second call may release another message, the one now using the
// recycled r. It is optional.
func (r *Received) Release() {
	if d := r.delivery; d != nil {
		kept := r.kept // r goes with d's storage, maybe to the next message at once: untouched after d.Release
		r.delivery = nil
		d.Release()
		if kept {
			return
		}
	}
	r.recycle()
}

// recycle returns r to the pool if it came from there; the message and
// its delivery are left to whoever has them, and r leaves the delivery's
// storage, which they keep.
func (r *Received) recycle() {
	if r.kept && r.delivery != nil {
		if slot := r.delivery.Kept(); *slot == r {
			*slot = nil
		}
	}
	if r.pooled {
		*r = Received{pooled: true}
		receivedPool.Put(r)
	}
}

type options struct {
	resolveTimeout time.Duration
	queryPeers     int
	queue          int
	queueBytes     int64
	backlog        int
	bidisPerPeer   int
	ps             *pubsub.PubSub
	routing        routing.ContentRouting
	noRouting      bool
	maxPropagate   int
}

// Option configures a Service.
type Option func(*options) error

// WithResolveTimeout bounds binding resolution when the caller's context
// has no earlier deadline (default 10 s, at least 10 ms).
func WithResolveTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: resolve timeout %v below 10ms", ErrBadOption, d)
		}
		o.resolveTimeout = d
		return nil
	}
}

// WithQueryPeers bounds how many connected peers one resolution asks
// (default 64, 1 to 4096).
func WithQueryPeers(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 4096 {
			return fmt.Errorf("%w: query peers %d out of [1, 4096]", ErrBadOption, n)
		}
		o.queryPeers = n
		return nil
	}
}

// WithQueueLen sets how many received messages an input pipe or a Bidi
// holds before the sender is slowed down (default 64, 1 to 65536).
func WithQueueLen(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 1<<16 {
			return fmt.Errorf("%w: queue length %d out of [1, 65536]", ErrBadOption, n)
		}
		o.queue = n
		return nil
	}
}

// DefaultQueueBytes is WithQueueBytes's default: room for the default
// queue length of 256 KiB messages, so that it is the message count that
// bounds queues of ordinary messages, and the bytes only queues of large
// ones.
const DefaultQueueBytes = 16 << 20

// WithQueueBytes bounds the bytes of the received messages an input pipe
// or a Bidi holds before the sender is slowed down (default
// DefaultQueueBytes, 1 KiB to 64 GiB). An empty queue takes a message of
// any size (up to the endpoint's limit). Queued messages also stay on
// their sender's endpoint memory budget (endpoint.WithMemoryBudget), a
// JXTA peer's on its host's share of the JXTA transport's
// (jxtatcp.WithHostMemoryBudget), until received, which bounds what one
// peer can make all of a node's queues hold.
func WithQueueBytes(n int64) Option {
	return func(o *options) error {
		if n < 1<<10 || n > 64<<30 {
			return fmt.Errorf("%w: queue bytes %d out of [1 KiB, 64 GiB]", ErrBadOption, n)
		}
		o.queueBytes = n
		return nil
	}
}

// WithBacklog sets how many connections a bidirectional pipe listener
// holds before Accept takes them; more are refused (default 16, 1 to
// 4096), as are a libp2p peer's beyond a quarter of them (at least one)
// and one remote host's beyond a quarter (Stats.BidisRefused), so that
// neither can take every place.
func WithBacklog(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 4096 {
			return fmt.Errorf("%w: backlog %d out of [1, 4096]", ErrBadOption, n)
		}
		o.backlog = n
		return nil
	}
}

// DefaultBidisPerPeer is how many bidirectional pipe connections one
// peer may open to this one (WithBidisPerPeer): as many as the socket
// streams a node takes from one peer (node.MaxSocketStreamsPerPeer),
// the pool a client keeps to a server.
const DefaultBidisPerPeer = 64

// WithBidisPerPeer sets how many bidirectional pipe connections one peer
// may hold open to this one, accepted or waiting for Accept, on all
// listeners together; its further connect requests are refused and
// counted (Stats.BidisRefused). Default DefaultBidisPerPeer, 1 to 65536.
// Connections this peer opens (Connect) and JXTA peers' JxtaBiDiPipes
// are not counted.
func WithBidisPerPeer(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 1<<16 {
			return fmt.Errorf("%w: bidis per peer %d out of [1, 65536]", ErrBadOption, n)
		}
		o.bidisPerPeer = n
		return nil
	}
}

// WithPubSub makes propagate pipes use ps. Default: a gossipsub router the
// service starts on the node's host when the first propagate pipe is
// bound or opened, with messages of at most DefaultMaxPropagate bytes. With ps, propagate messages are still held to
// DefaultMaxPropagate bytes: ps must accept RPCs of that size plus a few
// KiB, or gossipsub drops them without telling the sender. All members of
// a pipe must accept the same sizes. ps keeps its own configuration: the
// service sets no peer scoring on it (its own router scores peers,
// score.go), and Stats counts none of its drops.
func WithPubSub(ps *pubsub.PubSub) Option {
	return func(o *options) error {
		if ps == nil {
			return fmt.Errorf("%w: nil pubsub", ErrBadOption)
		}
		o.ps = ps
		return nil
	}
}

// WithRouting publishes and finds pipe bindings as provider records in r.
// Default: the node's DHT when it has one (node.WithDHT), else none.
func WithRouting(r routing.ContentRouting) Option {
	return func(o *options) error {
		if r == nil {
			return fmt.Errorf("%w: nil routing", ErrBadOption)
		}
		o.routing = r
		return nil
	}
}

// WithoutRouting keeps pipe bindings out of the node's DHT.
func WithoutRouting() Option {
	return func(o *options) error { o.noRouting = true; return nil }
}

// DefaultMaxPropagate is the largest propagate message, in bytes, of the
// gossipsub router the service starts itself (gossipsub's own default).
const DefaultMaxPropagate = 1 << 20

// propagateHeadroom is what a gossipsub RPC adds to a message: topic,
// sequence number, author, signature and key.
const propagateHeadroom = 4 << 10

// Service is a node's pipe service. Its methods are safe for concurrent
// use.
type Service struct {
	ep   *endpoint.Service
	node *node.Node
	host host.Host
	self peer.ID // host.ID(), which every send compares with
	opts options
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex
	inputs map[string]*InputPipe // by Key: unicast and secure inputs
	// flights are the resolutions Resolve callers share, by flightKey.
	flights map[string]*flight
	// flushLocks serialise each peer's Flushes with the sorting of what
	// they learn (loss.go). Under mu.
	flushLocks map[peer.ID]*flushLock
	// jxtaPipes are the pipes bound for JXTA peers only (jxtasession.go),
	// by pipe ID.
	jxtaPipes map[string]bool
	// jxtaBidis are the open JxtaBiDiPipes with JXTA peers (jxtabidi.go).
	jxtaBidis   map[*Bidi]struct{}
	jxtaOpens   map[string]bool // client peer and pipe of the JxtaBiDiPipe opens taken
	jxtaRefused atomic.Uint64
	jxta        *jxtaResolver        // with endpoint.WithJXTA (jxta.go)
	bindings    map[bindingKey]int   // roles bound here, for resolution
	servers     map[string]*Listener // by Key
	conns       map[connKey]*Bidi
	topics      map[string]*topicRef // by pipe ID string
	closed      bool
	wg          sync.WaitGroup
	notifiee    *network.NotifyBundle
	// protected counts, by peer, the output pipes sending there, which
	// keep its connections from being trimmed (output.go).
	protected map[peer.ID]int
	// senders are the connected peers tagged as senders on this node's
	// input pipes (output.go); sendersGen counts the peers it forgot, so
	// that an input pipe's last tagged sender can stand for a look-up.
	senders    sync.Map
	sendersGen atomic.Uint64
	// refusals are the Bidi refusals waiting to be sent, by peer
	// (bidi.go), for at most refusalPeers peers at once
	// (maxRefusalPeers; fewer in tests). Under mu.
	refusals     map[peer.ID][]string
	refusalPeers int
	// undelivered counts, per refusing peer and pipe key, messages
	// refused by their receiver that a Flush learnt of on another output
	// pipe's behalf, kept only while an open output pipe of the key has
	// sent to the peer: sentPeers counts those pipes by (peer, key),
	// sentAll by key those that sent to more peers than they remember
	// (maxBoundTo; fewer in tests), which take every peer's (output.go).
	// Under mu.
	undelivered map[peerKey]int
	sentPeers   map[peerKey]int
	sentAll     map[string]int
	maxBoundTo  int
	// openOutputs are the output pipes open here, for Close.
	openOutputs map[*OutputPipe]struct{}
	// bidiNotes are the Bidis registered here and not yet closed, ended
	// or not, for the refusals other Flushes learn of (sortRefusal).
	bidiNotes map[connKey]*Bidi
	// seqnoTables are the propagate topics' replay windows (seqno.go),
	// kept for the service's lifetime: the application's pipes bound
	// their number, maxAuthors each one's size.
	seqnoTables map[string]*seqnos
	// ownPubSub is set once the service started its own gossipsub
	// router (s.opts.ps), whose mesh s.gossip watches. Under mu.
	ownPubSub bool
	// strayRefusals counts refusals for pipes no output pipe here sends
	// on.
	strayRefusals atomic.Uint64
	// refusalsDropped counts refusals of Bidi connect requests dropped
	// unsent (bidi.go, maxRefusalsPerPeer).
	refusalsDropped atomic.Uint64
	// bidisRefused counts Bidi connect requests refused for their
	// peer's or host's share (WithBidisPerPeer, a backlog's quarter),
	// backlogFull those refused for a full backlog.
	bidisRefused, backlogFull atomic.Uint64
	// peerBidis counts, per remote peer, the connections in conns, and
	// peerIncoming those of them it opened. Under mu.
	peerBidis    map[peer.ID]int
	peerIncoming map[peer.ID]int
	// unproven counts binding answers ignored for want of a proof
	// (proof.go); replays counts propagate messages refused as replayed
	// (seqno.go).
	unproven, replays atomic.Uint64
	// index holds the bindings connected peers pushed (referral.go);
	// ignoredBindings counts pushes refused (malformed, or beyond
	// maxIndexPerPeer).
	index           bindingIndex
	ignoredBindings atomic.Uint64
	// ignoredReferrals counts referrals resolutions did not follow.
	ignoredReferrals atomic.Uint64
	// pending are the askers this peer could not answer, to whom it
	// forwards a binding pushed later; resolving are the hint channels
	// of the resolutions running here, by pipe key and role
	// (referral.go).
	pending   pendingAsks
	resolving map[bindingKey]map[chan hint]struct{}
	gossip    gossipDrops // what our gossipsub router dropped
}

// Stats counts what the service refused from other peers, and what the
// gossipsub router it started (not one given with WithPubSub) dropped.
type Stats struct {
	// UnprovenAnswers are binding answers ignored because they did not
	// prove the binding (a pipe whose advertisement names binders, or a
	// secure pipe): the answering peer is not an allowed binder, or its
	// proof is missing or wrong.
	UnprovenAnswers uint64
	// PropagateReplays are propagate messages refused because their
	// author's sequence number was seen before or is too old.
	PropagateReplays uint64
	// PropagateOutboundDropped counts copies of propagate messages
	// gossipsub dropped on their way to a peer whose outbound queue was
	// full. A member may still get the message from another peer: the
	// mesh sends each several times.
	PropagateOutboundDropped uint64
	// PropagateInboundDropped counts propagate messages dropped on
	// arrival for want of room in gossipsub's validation queue.
	PropagateInboundDropped uint64
	// PropagateRejected counts propagate messages refused as invalid:
	// signature missing, wrong or unexpected, or refused by the topic
	// validator. Each one lowers its sender's score (score.go).
	PropagateRejected uint64
	// PropagateGraylisted counts propagate messages dropped unread
	// because their sender's score was below the graylist threshold,
	// as of the last reading of the scores (once a second): a peer
	// graylisted since has its messages dropped, uncounted, until then.
	PropagateGraylisted uint64
	// PropagateGraylistedPeers is how many peers were graylisted at
	// that reading.
	PropagateGraylistedPeers int
	// PropagateUndelivered counts propagate messages gossipsub dropped
	// because an input pipe here fell behind (its queue full, Receive not
	// called): they never reach the pipe.
	PropagateUndelivered uint64
	// StrayRefusals counts refusals a receiver reported for pipes no
	// output pipe here sends on (closed before a Flush took them, or
	// made up by the receiver): nobody is left to tell.
	StrayRefusals uint64
	// BidiRefusalsDropped counts refusals of bidirectional pipe
	// connect requests (for a pipe not bound here, a listener closed or
	// its backlog full) dropped unsent: a peer sent such requests faster
	// than they are answered (more than 16 waiting), read none of the
	// answers or speaks no endpoint protocol (a refusal whose send
	// fails, or is not taken within 5 s, is dropped with the peer's
	// others waiting), or more than 256 peers were being refused at
	// once. The peers whose refusal was dropped see their Connect fail
	// only at the resolve timeout (ErrRefused, "did not accept"); each
	// peer's refusals are sent apart from every other's, so one that
	// does not read delays no other's.
	BidiRefusalsDropped uint64
	// BidisRefused counts bidirectional pipe connect requests refused
	// because their peer already held WithBidisPerPeer connections here,
	// or it or its remote host held its quarter of a listener's backlog.
	BidisRefused uint64
	// BidiBacklogFull counts bidirectional pipe connect requests from
	// libp2p peers refused because the listener's backlog was full
	// (WithBacklog); a JXTA peer's count in JXTARefused.
	BidiBacklogFull uint64
	// IgnoredBindings counts bindings neighbours pushed
	// (BindingProtocol) that were malformed, or beyond what one
	// neighbour may have kept here.
	IgnoredBindings uint64
	// IgnoredReferrals counts referrals a resolution did not follow:
	// forwarded by a peer it had not asked in vain, or beyond the
	// maxReferrals it follows from any one peer.
	IgnoredReferrals uint64
	// JXTARefused counts what JXTA peers sent that was dropped: JXTA
	// handshakes that are malformed or name another peer than the
	// sender, JxtaBiDiPipe opens beyond a listener's backlog, messages
	// inside JxtaBiDiPipe blocks whose signature fails or is not the
	// remote peer's, binding queries over a resolver document's
	// bounds (64 KiB, 512 tags and attributes) or naming another
	// querier than their sender, and queries that came while 32
	// answers were being sent, while their sender's host had 8 (a
	// quarter) in flight, or while a host with answers in flight would
	// have taken one of the last 8, kept for hosts with none.
	JXTARefused uint64
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{
		UnprovenAnswers: s.unproven.Load(), PropagateReplays: s.replays.Load(),
		PropagateOutboundDropped: s.gossip.outbound.Load(), PropagateInboundDropped: s.gossip.inbound.Load(),
		PropagateUndelivered: s.gossip.undelivered.Load(), PropagateRejected: s.gossip.rejected.Load(),
		PropagateGraylisted: s.gossip.graylistedMsgs.Load(), PropagateGraylistedPeers: s.gossip.graylistedPeers(),
		JXTARefused: s.jxtaRefused.Load(), IgnoredBindings: s.ignoredBindings.Load(),
		IgnoredReferrals: s.ignoredReferrals.Load(), StrayRefusals: s.strayRefusals.Load(),
		BidiRefusalsDropped: s.refusalsDropped.Load(), BidisRefused: s.bidisRefused.Load(), BidiBacklogFull: s.backlogFull.Load(),
	}
}

type bindingKey struct{ key, role string }

// New starts the pipe service on ep.
func New(ep *endpoint.Service, opts ...Option) (*Service, error) {
	o := options{resolveTimeout: 10 * time.Second, queryPeers: 64, queue: 64, queueBytes: DefaultQueueBytes, backlog: 16, bidisPerPeer: DefaultBidisPerPeer, maxPropagate: DefaultMaxPropagate}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	n := ep.Node()
	if o.routing == nil && !o.noRouting {
		if r := n.Routing(); r != nil {
			o.routing = r
		}
	}
	if o.noRouting {
		o.routing = nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		ep: ep, node: n, host: n.Host(), self: n.Host().ID(), opts: o, ctx: ctx, stop: cancel,
		inputs: map[string]*InputPipe{}, openOutputs: map[*OutputPipe]struct{}{}, bidiNotes: map[connKey]*Bidi{}, seqnoTables: map[string]*seqnos{}, jxtaPipes: map[string]bool{}, jxtaBidis: map[*Bidi]struct{}{}, jxtaOpens: map[string]bool{}, bindings: map[bindingKey]int{}, servers: map[string]*Listener{},
		conns: map[connKey]*Bidi{}, peerBidis: map[peer.ID]int{}, peerIncoming: map[peer.ID]int{}, topics: map[string]*topicRef{},
		refusals: map[peer.ID][]string{}, refusalPeers: maxRefusalPeers, maxBoundTo: maxBoundTo,
	}
	if err := ep.Register(DataService, "", endpoint.ListenerFunc(refuseData)); err != nil {
		cancel()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if err := ep.Register(BidiService, "", endpoint.ListenerFunc(s.deliverBidi)); err != nil {
		ep.Unregister(DataService, "")
		cancel()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if err := s.startJXTA(); err != nil {
		ep.Unregister(DataService, "")
		ep.Unregister(BidiService, "")
		cancel()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	s.host.SetStreamHandler(ResolverProtocol, s.handleQuery)
	s.host.SetStreamHandler(BindingProtocol, s.handleBinding)
	s.notifiee = &network.NotifyBundle{DisconnectedF: s.disconnected}
	s.host.Network().Notify(s.notifiee)
	return s, nil
}

// pubsub returns the router of propagate pipes, starting the service's
// own on first use. A node that binds no propagate pipe runs no
// gossipsub: gossipsub keeps a stream and three goroutines on every
// connection of a node that runs it, member of a topic or not. Peers
// connected before it starts learn of it from identify's push of the
// node's new protocols, as gossipsub watches for. s.mu is held.
func (s *Service) pubsub() (*pubsub.PubSub, error) {
	if s.opts.ps != nil {
		return s.opts.ps, nil
	}
	// gossipsub bounds whole RPCs (topic, signature, key), which it
	// drops silently when too large: leave room beyond the message.
	ps, err := pubsub.NewGossipSub(s.ctx, s.host,
		pubsub.WithMaxMessageSize(s.opts.maxPropagate+propagateHeadroom), pubsub.WithRawTracer(&s.gossip),
		// Peer scoring (score.go); topics get their parameters as pipes
		// join them.
		pubsub.WithPeerScore(peerScoreParams(s.host.Network()), peerScoreThresholds()),
		pubsub.WithPeerScoreInspect(pubsub.PeerScoreInspectFn(s.gossip.inspect), scoreInspectPeriod),
		pubsub.WithAppSpecificRpcInspector(s.gossip.countGraylisted))
	if err != nil {
		return nil, fmt.Errorf("pipe: starting gossipsub: %w", err)
	}
	s.opts.ps = ps
	s.ownPubSub = true
	return ps, nil
}

// Endpoint returns the endpoint service the pipes run on.
func (s *Service) Endpoint() *endpoint.Service { return s.ep }

// Node returns the node the pipes run on.
func (s *Service) Node() *node.Node { return s.node }

// Close closes every pipe of the service and stops it. The endpoint
// service and the node stay up. Binding, resolving and connecting fail
// with ErrClosed afterwards.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	inputs := mapValues(s.inputs)
	outputs := mapKeys(s.openOutputs)
	servers := mapValues(s.servers)
	conns := mapValues(s.conns)
	var topicInputs []*InputPipe
	for _, t := range s.topics {
		topicInputs = append(topicInputs, t.inputs...)
	}
	s.mu.Unlock()
	s.host.Network().StopNotify(s.notifiee)
	s.host.RemoveStreamHandler(ResolverProtocol)
	s.host.RemoveStreamHandler(BindingProtocol)
	s.ep.Unregister(DataService, "")
	s.ep.Unregister(BidiService, "")
	s.stopJXTA()
	for _, p := range append(inputs, topicInputs...) {
		p.Close()
	}
	for _, o := range outputs {
		o.Close()
	}
	for _, l := range servers {
		l.Close()
	}
	// Tell the other ends, in parallel, each bounded by closeTimeout.
	var wg sync.WaitGroup
	for _, b := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); b.Close() }()
	}
	wg.Wait()
	s.jxtaCloseAll()
	s.stop()
	s.wg.Wait()
	return nil
}

// closedErr is ErrClosed, naming what, once the service is closed, and
// nil before: what a closed service would start could only fail further
// down, where the error would name the layer below that it ran into (the
// endpoint closed, or the node: "no peer has the pipe bound").
func (s *Service) closedErr(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: pipe service (%s)", ErrClosed, what)
	}
	return nil
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// bindLocal records v as this peer's binding of key in m (s.inputs or
// s.servers) under role, and publishes a provider record for the pipe;
// the function it returns undoes both.
func bindLocal[T comparable](s *Service, m map[string]T, key, role string, v T, pipeID id.ID, what string) (release func(), err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := m[key]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s %s", ErrBound, what, pipeID)
	}
	m[key] = v
	s.bind(key, role)
	s.mu.Unlock()
	stop := s.provide(pipeID)
	s.pushBinding(pipeID, role, true)
	return func() {
		stop()
		s.mu.Lock()
		if m[key] == v {
			delete(m, key)
		}
		gone := s.unbind(key, role)
		s.mu.Unlock()
		if gone {
			s.pushBinding(pipeID, role, false)
		}
	}, nil
}

// bind records a role for resolution; unbind undoes it.
func (s *Service) bind(key, role string) {
	s.bindings[bindingKey{key, role}]++
}

// unbind reports whether the role is no longer bound at all.
func (s *Service) unbind(key, role string) bool {
	k := bindingKey{key, role}
	if s.bindings[k]--; s.bindings[k] <= 0 {
		delete(s.bindings, k)
		return true
	}
	return false
}

func (s *Service) bound(key, role string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bindings[bindingKey{key, role}] > 0
}

// Announce makes this peer answer binding resolution for the pipe in role
// without the pipe service receiving anything on it: for layers above,
// such as sockets, that carry the pipe's data themselves. Release undoes
// it. role is any short name the resolving side asks for.
func (s *Service) Announce(a *adv.PipeAdvertisement, role string) (release func(), err error) {
	if err := checkAdv(a); err != nil {
		return nil, err
	}
	if role == "" || len(role) > 64 {
		return nil, fmt.Errorf("%w: role %q", ErrBadOption, role)
	}
	key := Key(a.ID)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.bind(key, role)
	s.mu.Unlock()
	stopProvide := s.provide(a.ID)
	s.pushBinding(a.ID, role, true)
	var once sync.Once
	return func() {
		once.Do(func() {
			stopProvide()
			s.mu.Lock()
			gone := s.unbind(key, role)
			s.mu.Unlock()
			if gone {
				s.pushBinding(a.ID, role, false)
			}
		})
	}, nil
}

func checkAdv(a *adv.PipeAdvertisement) error {
	if a == nil {
		return fmt.Errorf("%w: nil", ErrBadAdv)
	}
	if err := a.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadAdv, err)
	}
	return nil
}

// disconnected fails the bidirectional pipes of a peer that is no longer
// connected at all.
func (s *Service) disconnected(nw network.Network, c network.Conn) {
	p := c.RemotePeer()
	if cs := nw.Connectedness(p); cs == network.Connected || cs == network.Limited {
		return
	}
	if _, ok := s.senders.LoadAndDelete(p); ok {
		s.sendersGen.Add(1)
	}
	s.index.forget(p)
	s.mu.Lock()
	var gone []*Bidi
	for k, b := range s.conns {
		if k.peer == p {
			gone = append(gone, b)
		}
	}
	s.mu.Unlock()
	for _, b := range gone {
		b.fail(fmt.Errorf("%w: %s", ErrPeerGone, p))
	}
}

// jxtaID derives a peer's JXTA peer ID from its key: the one its ID
// holds, else the one the peerstore has (a key an ID only hashes, such
// as RSA's). The ID is read first because go-libp2p's in-memory
// peerstore keeps for good a key it extracts from an ID when asked for
// it; only a disconnect lets it go, so every propagate author, never
// connected, stayed in it, one key per identity that published.
func (s *Service) jxtaID(p peer.ID) id.ID {
	pub, err := p.ExtractPublicKey()
	if err != nil || pub == nil {
		if pub = s.host.Peerstore().PubKey(p); pub == nil {
			return id.ID{}
		}
	}
	j, _ := id.PeerIDFromPublicKey(s.node.Group(), pub)
	return j
}
