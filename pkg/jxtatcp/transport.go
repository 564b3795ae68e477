package jxtatcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// Incoming is a message received from a JXTA peer, its address elements
// (and router element) removed.
type Incoming struct {
	Message *message.Message
	// Source is the sending peer: the CBJX signer when Signed, else the
	// peer the message's source address names, which nothing checks.
	Source id.ID
	Signed bool
	// Service and Param are the listener the message is for, in the net
	// peer group (or the world group, for unprefixed services).
	Service, Param string
	// Remote is the connection's remote TCP address.
	Remote string
	// Size is the length of the frame's body: what the message took on
	// the wire, signature included.
	Size int64

	cl   *claim // the frame's hold on the memory budget
	hold atomic.Uint32
}

// An Incoming's hold on its frame's claim.
const (
	handling = iota // the handler runs
	kept            // Hold was called while it ran
	ended           // the handler returned, or the held claim was released
)

// Hold keeps the frame's length charged to the memory budget and to its
// host's share after the handler returns, until release is called: for
// a handler that queues the message for later (a pipe's queue) rather
// than consuming it, so that what one host's queued messages hold is
// bounded by its share, as its frames being read and handled are, and a
// host whose messages the application does not read stalls when its
// share is full. Call Hold only from the handler, before it returns; a
// later call holds nothing and returns a release that does nothing.
// release may be called from any goroutine, more than once; only the
// first call counts. A message held and never released keeps its bytes
// charged, which stalls its host.
func (in *Incoming) Hold() (release func()) {
	if in.cl == nil || !in.hold.CompareAndSwap(handling, kept) {
		return func() {}
	}
	b := &in.cl.c.t.budget
	return func() {
		if in.hold.CompareAndSwap(kept, ended) {
			b.release(in.cl)
		}
	}
}

// Handler receives messages. It runs on the connection's reader: while
// it runs, that connection is not read (backpressure on the sender), and
// the frame holds its length of the memory budget and of its host's
// share (WithMemoryBudget, WithHostMemoryBudget), beyond the handler's
// return if it calls Incoming.Hold.
type Handler func(*Incoming)

// Stats counts what the transport refused or dropped.
type Stats struct {
	Received, Sent uint64
	// BadSignatures counts signed messages whose CBJX trailer did not
	// verify (dropped, as JXSE drops them); Unsigned, messages without a
	// trailer while signatures are required (dropped, the connection
	// closed, as JXSE does).
	BadSignatures, Unsigned uint64
	// SignedIgnored counts messages that carried a CBJX signature while
	// the transport neither signs nor requires signatures (WithUnsigned),
	// which leaves it unchecked: each most likely comes from a peer that
	// signs, and such a peer, as JXSE by default, drops the unsigned
	// messages this transport sends it.
	SignedIgnored uint64
	// Spoofed counts messages whose source address or router source is
	// not their signer (dropped: "address spoofing" in JXSE).
	Spoofed uint64
	// Malformed counts frames that could not be decoded (their
	// connection closed) and messages without usable address elements
	// or router element (dropped).
	Malformed uint64
	// NotForUs counts routed messages whose destination is another peer
	// (this transport does not forward) or another peer group.
	NotForUs uint64
	// Refused counts connections refused because their host's share or
	// every slot was taken and none was idle long enough to close for
	// them (WithMaxConns), or closed for a bad welcome, a stalled or slow
	// frame or a frame over the limit.
	Refused uint64
	// Evicted counts idle connections closed to make room for a new one
	// (WithMaxConns); EvictedUnread, those of them closed with bytes of
	// a frame unread: a frame the peer sent as its connection was closed,
	// behind one that had begun to arrive (that one is read). It is lost,
	// as JXTA unicast has no acknowledgement.
	Evicted, EvictedUnread uint64
	// SlowFrames counts connections closed because a frame's body came
	// slower than MinFrameRate (also counted in Refused).
	SlowFrames uint64
	// Shed counts connections closed because their frame held memory
	// budget another frame was waiting for and would not have finished
	// within a frame timeout at its rate so far (also counted in
	// Refused; see WithMemoryBudget).
	Shed uint64
	// TooManySigners counts signed messages dropped because their
	// connection already carried messages of MaxSignersPerConn other
	// signers.
	TooManySigners uint64
	// BudgetWaits counts frames that waited for the memory budget or
	// their host's share before their body was read; RoomKept, those of
	// them that waited because their host would have held more than the
	// budget then left free (see WithMemoryBudget).
	BudgetWaits, RoomKept uint64
}

type options struct {
	public         string
	sign, requireS bool
	maxMessage     int64
	budget         int64
	hostBudget     int64
	frameTimeout   time.Duration
	welcomeTimeout time.Duration
	writeTimeout   time.Duration
	unsent         int
	maxConns       int
	evictIdle      time.Duration
	afterPeek      func(*conn) // tests: called when a frame's first byte has arrived, before it begins
	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Option configures a Transport.
type Option func(*options) error

// Defaults.
const (
	// DefaultMaxMessageSize bounds a received frame's body, as the libp2p
	// endpoint's default does.
	DefaultMaxMessageSize = 64 << 20
	// DefaultMemoryBudget bounds the bytes of frames being read and
	// handled on all connections together.
	DefaultMemoryBudget = 1 << 30
	// DefaultFrameTimeout is how long each 64 KiB of a frame may take to
	// arrive once the frame has begun.
	DefaultFrameTimeout = 20 * time.Second
	// MinFrameRate is the slowest a frame's body may arrive, in bytes per
	// second, once its first frame timeout has passed: the body of n
	// bytes must be in within the frame timeout plus n / MinFrameRate
	// seconds (a 64 MiB frame: 17 minutes). A frame holds its length of
	// the memory budget from its first byte, so without a floor a peer
	// that sends 64 KiB per frame timeout would hold it for hours and
	// starve every other peer; with it, a peer holds budget only as long
	// as it keeps sending, and all of it only while sending at the floor
	// on every connection it has. 64 KiB/s (half a megabit) is below the
	// links JXTA peers send large messages over.
	MinFrameRate = 64 << 10
	// WelcomeTimeout is how long a peer has to send its welcome, as in
	// JXSE.
	WelcomeTimeout = 5 * time.Second
	// DefaultMaxConns bounds the open connections: a JXTA peer keeps one
	// or two connections with each peer it talks to (JXSE sends on the
	// one it dialled and on the one it accepted), so 256 serve a hundred
	// peers or more, while the goroutines, buffers and sockets they cost
	// stay small.
	DefaultMaxConns = 256
	// MaxSignersPerConn bounds the peers one connection may carry signed
	// messages of, and so the peers jxta:// sends are routed to it for.
	// CBJX signs each hop with the sending peer's own key, so a JXTA
	// peer's connection carries one signer; the rest is room for a peer
	// that changes its identity on a long-lived connection. Without it,
	// one connection could make the transport remember a route for every
	// signer it made up.
	MaxSignersPerConn = 4
	// DefaultUnsentLimit bounds the bytes a connection's kernel holds
	// unsent (WithUnsentLimit). 128 KiB is what a Fast Ethernet link
	// (100 Mbit/s) sends in 10 ms, longer than a sender takes between
	// frames to build and sign the next (an RSA-2048 signature takes
	// about 2 ms), so links up to that speed are not left idle between
	// frames; on a 1 Mbit/s DSL uplink it is a second of sending, the
	// most a write returns ahead of its bytes leaving.
	DefaultUnsentLimit = 128 << 10
)

// WithPublicAddress sets the tcp://host:port address the welcome
// announces and AnnouncedAddrs lists first (default: the first listening
// address, or tcp://host:0 for a transport that does not listen): for a
// peer behind NAT or a port forward, the address others reach it at.
func WithPublicAddress(addr string) Option {
	return func(o *options) error {
		if proto, _, _, _, err := splitAddress(addr); err != nil || proto != "tcp" {
			return fmt.Errorf("%w: public address %q: want tcp://host:port (%w)", ErrBadOption, addr, ErrAddress)
		}
		o.public = addr
		return nil
	}
}

// WithUnsigned makes the transport neither sign its messages nor require
// signed ones: for JXSE peers started with CBJX disabled. By default it
// signs every message and drops unsigned ones, as JXSE 2.7 does; a signing
// peer also works with JXSE peers that have CBJX disabled.
func WithUnsigned() Option {
	return func(o *options) error {
		o.sign, o.requireS = false, false
		return nil
	}
}

// WithAcceptUnsigned keeps signing but accepts unsigned messages (their
// Source then is only what they claim).
func WithAcceptUnsigned() Option {
	return func(o *options) error {
		o.requireS = false
		return nil
	}
}

// WithMaxMessageSize bounds a message's frame body, received or sent
// (default DefaultMaxMessageSize; 4 KiB to 1 GiB).
func WithMaxMessageSize(n int64) Option {
	return func(o *options) error {
		if n < 4<<10 || n > 1<<30 {
			return fmt.Errorf("%w: max message size %d out of [4 KiB, 1 GiB]", ErrBadOption, n)
		}
		o.maxMessage = n
		return nil
	}
}

// WithMemoryBudget bounds the bytes of the frames being read and handled
// on all connections together (default DefaultMemoryBudget; at least the
// maximum message size). A frame claims its length before its body is
// read, until its handler returns (or, if the handler holds the message
// with Incoming.Hold, until it is released), on this budget and on its
// remote host's share of it (WithHostMemoryBudget); when either is full,
// the connection waits before reading more and its sender stalls
// (Stats.BudgetWaits), so a host whose messages wait in handlers or
// queues the application does not read stalls only itself.
//
// Room is kept for hosts holding little: while other hosts hold part of
// the budget, a host's claim is granted only if the host then holds no
// more than the budget then leaves free, else it waits (Stats.RoomKept).
// Shares alone let four hosts at their quarter hold the whole budget and
// keep every other host's frames unread, and hosts are cheap (four IPv4
// addresses, four IPv6 /64s); with the rule, each host that takes what
// it may leaves as much free, so the room left only halves with each
// further host: by default a host with a largest frame is still read
// beside four hosts at what they may hold, and keeping out a frame of a
// few KiB takes some twenty hosts holding their claims. A host alone in
// holding anything claims up to its share.
//
// While a frame waits, a claim older than the frame timeout that at its
// rate so far would not end within another frame timeout is cut, slowest
// first, until the waiting frame fits — any host's claim for a wait on
// this budget, only its own host's for a wait on a host's share, its
// own host's or those of hosts holding more than its host would for a
// wait on the room kept: its connection is closed and counted
// (Stats.Shed), so a peer holds budget others need only by sending fast.
// Nothing already read is dropped.
func WithMemoryBudget(n int64) Option {
	return func(o *options) error {
		if n < 4<<10 || n > 64<<30 {
			return fmt.Errorf("%w: memory budget %d out of [4 KiB, 64 GiB]", ErrBadOption, n)
		}
		o.budget = n
		return nil
	}
}

// WithHostMemoryBudget bounds the bytes of the frames being read and
// handled on the connections with one remote host (an IPv4 address, an
// IPv6 /64), as WithMemoryBudget does for all of them, messages its
// handler holds (Incoming.Hold) included: by default a quarter of the
// memory budget, and at least twice the maximum message size — a JXTA
// peer has at most two connections with this one (JXSE sends on the one
// it dialled and on the one it accepted), each reading one frame at a
// time. At least the maximum message size, at most the memory budget.
// While other hosts hold part of the budget, a host holds no more than
// the budget leaves free (see WithMemoryBudget), so a share above half
// the budget is reached only by a host alone in holding anything.
func WithHostMemoryBudget(n int64) Option {
	return func(o *options) error {
		if n < 4<<10 || n > 64<<30 {
			return fmt.Errorf("%w: host memory budget %d out of [4 KiB, 64 GiB]", ErrBadOption, n)
		}
		o.hostBudget = n
		return nil
	}
}

// WithFrameTimeout sets how long each 64 KiB of a frame may take once it
// has begun; a peer slower than that is disconnected (default
// DefaultFrameTimeout; 100 ms to 1 h). The whole body must also arrive
// within it plus its length at MinFrameRate.
func WithFrameTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond || d > time.Hour {
			return fmt.Errorf("%w: frame timeout %v out of [100ms, 1h]", ErrBadOption, d)
		}
		o.frameTimeout = d
		return nil
	}
}

// WithUnsentLimit bounds the bytes each connection's kernel holds unsent
// (TCP_NOTSENT_LOWAT; Linux only, elsewhere the option does nothing):
// default DefaultUnsentLimit, 16 KiB to 64 MiB, or 0 for no bound but the
// kernel's send buffer, which Linux grows to 4 MiB by default. A frame's
// write returns once all but at most this many of its bytes (give or
// take a segment) have been sent, so its deadline, and what waits on the
// write — a reliable block's retransmission timer, a JXTA socket's
// close — follow the bytes onto the wire at the peer's pace, and a peer
// that reads slowly holds no more than this of ours unsent per
// connection. Bytes sent and not yet acknowledged by TCP are not counted:
// the bound does not limit how much a link holds in flight.
func WithUnsentLimit(n int) Option {
	return func(o *options) error {
		if n != 0 && (n < 16<<10 || n > 64<<20) {
			return fmt.Errorf("%w: unsent limit %d out of [16 KiB, 64 MiB] (or 0)", ErrBadOption, n)
		}
		o.unsent = n
		return nil
	}
}

// WithMaxConns bounds the open connections, both directions (default
// DefaultMaxConns; 1 to 65536). One remote host (an IPv4 address, an
// IPv6 /64) opens at most a quarter of them, and peers' connections take
// at most three quarters: a quarter is left for this peer's own dials.
// When a new connection finds no slot, an idle connection — one that
// carried no frame for 30 s — is closed for it (Stats.Evicted): of its
// own host's when the host is at its share, else of the host holding the
// most; without one, a peer's connection is refused (Stats.Refused) and a
// dial fails (ErrTooManyConns). A frame arriving on the evicted
// connection as it is closed is still read. The evicted peer's next send
// dials again.
func WithMaxConns(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 1<<16 {
			return fmt.Errorf("%w: max connections %d out of [1, 65536]", ErrBadOption, n)
		}
		o.maxConns = n
		return nil
	}
}

// WithDialer makes the transport dial with dial, which must return a
// connection to addr or fail by the time ctx ends (default: net.Dialer's
// DialContext): to dial from a chosen source address of a multi-homed
// host, through a proxy, or over an emulated link. A connection's remote
// address is what its slots and memory budget are counted under.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(o *options) error {
		if dial == nil {
			return fmt.Errorf("%w: nil dialer", ErrBadOption)
		}
		o.dial = dial
		return nil
	}
}

// Transport is a JXTA peer's TCP message transport. It is safe for
// concurrent use.
type Transport struct {
	ident   *Identity
	opts    options
	handler Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	inner     atomic.Pointer[verifier] // UnmarshalSigned's last certificate
	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	conns     map[*conn]struct{}
	evicted   map[*conn]struct{} // closed to make room, their reader not done (slots.go)
	byPeer    map[id.ID]*conn
	byAddr    map[string]*conn
	dialing   map[string]*dialCall
	routes    map[id.ID]string // peers' addresses (routes.go)
	// Slots (slots.go): accepted connections open, in all and by host,
	// and dials started whose connection is not in conns yet.
	inbound      int
	hostConns    map[string]int
	pendingDials int

	budget budget
	stats  struct {
		received, sent, badSig, unsigned, spoofed, malformed, notForUs, refused, tooManySigners atomic.Uint64
		signedIgnored                                                                           atomic.Uint64
		slowFrames                                                                              atomic.Uint64
		shed                                                                                    atomic.Uint64
		evicted, evictedUnread                                                                  atomic.Uint64
	}
}

// New returns a transport signing as ident and handing received messages
// to h. It dials when asked to send; Listen makes it accept connections.
func New(ident *Identity, h Handler, opts ...Option) (*Transport, error) {
	if ident == nil || h == nil {
		return nil, fmt.Errorf("%w: New needs an identity and a handler", ErrBadOption)
	}
	o := options{sign: true, requireS: true, maxMessage: DefaultMaxMessageSize, budget: DefaultMemoryBudget,
		frameTimeout: DefaultFrameTimeout, welcomeTimeout: WelcomeTimeout, writeTimeout: 30 * time.Second, unsent: DefaultUnsentLimit, maxConns: DefaultMaxConns,
		evictIdle: evictIdle, dial: (&net.Dialer{}).DialContext}
	for _, f := range opts {
		if err := f(&o); err != nil {
			return nil, err
		}
	}
	if o.budget < o.maxMessage {
		return nil, fmt.Errorf("%w: memory budget %d below the max message size %d", ErrBadOption, o.budget, o.maxMessage)
	}
	if o.hostBudget == 0 {
		o.hostBudget = min(o.budget, max(2*o.maxMessage, o.budget/4))
	}
	if o.hostBudget < o.maxMessage || o.hostBudget > o.budget {
		return nil, fmt.Errorf("%w: host memory budget %d out of [max message size %d, memory budget %d]",
			ErrBadOption, o.hostBudget, o.maxMessage, o.budget)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{ident: ident, opts: o, handler: h, ctx: ctx, cancel: cancel,
		conns: map[*conn]struct{}{}, evicted: map[*conn]struct{}{}, byPeer: map[id.ID]*conn{}, byAddr: map[string]*conn{},
		dialing: map[string]*dialCall{}, routes: map[id.ID]string{}, hostConns: map[string]int{}}
	t.budget.limit = o.budget
	t.budget.hostLimit = o.hostBudget
	t.budget.hosts = make(map[string]int64)
	t.budget.timeout = o.frameTimeout
	t.budget.freed = make(chan struct{})
	t.budget.held = make(map[*claim]struct{})
	return t, nil
}

// ID returns the transport's JXTA peer ID.
func (t *Transport) ID() id.ID { return t.ident.id }

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	return Stats{Received: s.received.Load(), Sent: s.sent.Load(), BadSignatures: s.badSig.Load(), Unsigned: s.unsigned.Load(),
		SignedIgnored: s.signedIgnored.Load(), Spoofed: s.spoofed.Load(), Malformed: s.malformed.Load(), NotForUs: s.notForUs.Load(), Refused: s.refused.Load(),
		TooManySigners: s.tooManySigners.Load(), SlowFrames: s.slowFrames.Load(), Shed: s.shed.Load(),
		Evicted: s.evicted.Load(), EvictedUnread: s.evictedUnread.Load(), BudgetWaits: t.budget.waits.Load(), RoomKept: t.budget.roomWaits.Load()}
}

// Listen accepts connections at addr, tcp://host:port (port 0: any).
func (t *Transport) Listen(addr string) error {
	proto, hostport, _, _, err := splitAddress(addr)
	if err != nil || proto != "tcp" {
		return fmt.Errorf("%w: listen address %q: want tcp://host:port", ErrAddress, addr)
	}
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return fmt.Errorf("jxtatcp: %w", err)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	t.listeners = append(t.listeners, ln)
	t.wg.Add(1)
	t.mu.Unlock()
	go t.accept(ln)
	return nil
}

// Addrs returns the addresses the transport listens at, tcp://host:port.
// A listener at an unspecified address (0.0.0.0, ::), which names no host
// a peer could reach, is listed at each address of this host's
// interfaces, IPv4 first and loopback last (IPv6 link-local addresses,
// which need a zone, left out; 0.0.0.0 listens dual-stack in Go, so its
// IPv6 addresses too), as libp2p lists its own.
func (t *Transport) Addrs() []string {
	t.mu.Lock()
	var las []net.Addr
	for _, ln := range t.listeners {
		las = append(las, ln.Addr())
	}
	t.mu.Unlock()
	var out []string
	for _, la := range las {
		ta, ok := la.(*net.TCPAddr)
		if !ok || !ta.IP.IsUnspecified() {
			out = append(out, "tcp://"+la.String())
			continue
		}
		ips := interfaceIPs(ta.IP.To4() != nil)
		for _, ip := range ips {
			out = append(out, "tcp://"+net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port)))
		}
		if len(ips) == 0 {
			out = append(out, "tcp://"+la.String())
		}
	}
	return out
}

// AnnouncedAddrs returns the addresses other JXTA peers are told to reach
// this one at (the pipe resolver's answers carry them as its route):
// WithPublicAddress's first, then Addrs. A peer behind NAT or a port
// forward is reached at its public address, not at its listeners' private
// ones.
func (t *Transport) AnnouncedAddrs() []string {
	addrs := t.Addrs()
	if t.opts.public == "" {
		return addrs
	}
	return append([]string{t.opts.public}, slices.DeleteFunc(addrs, func(a string) bool { return a == t.opts.public })...)
}

// interfaceIPs returns this host's interface addresses that a peer can
// dial (no IPv6 link-local), only IPv4 if v4only: IPv4 before IPv6,
// loopback after the others.
func interfaceIPs(v4only bool) []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsUnspecified() || v4only && ipn.IP.To4() == nil {
			continue
		}
		ips = append(ips, ipn.IP)
	}
	rank := func(ip net.IP) int {
		r := 0
		if ip.To4() == nil {
			r++
		}
		if ip.IsLoopback() {
			r += 2
		}
		return r
	}
	slices.SortStableFunc(ips, func(a, b net.IP) int { return rank(a) - rank(b) })
	return ips
}

// public is the address the welcome on a connection whose local end is
// local announces: WithPublicAddress's, else the first listener's. A
// listener at an unspecified address (0.0.0.0, ::) names no host a peer
// could reach, so its port is announced at local's address, the one this
// peer reached us at. Without a listener, port 0 says there is none.
func (t *Transport) public(local net.Addr) string {
	if t.opts.public != "" {
		return t.opts.public
	}
	t.mu.Lock()
	var ln *net.TCPAddr
	if len(t.listeners) > 0 {
		ln, _ = t.listeners[0].Addr().(*net.TCPAddr)
	}
	t.mu.Unlock()
	ta, _ := local.(*net.TCPAddr)
	switch {
	case ln != nil && (!ln.IP.IsUnspecified() || ta == nil):
		return "tcp://" + ln.String()
	case ln != nil:
		return "tcp://" + net.JoinHostPort(ta.IP.String(), strconv.Itoa(ln.Port))
	case ta != nil:
		return "tcp://" + net.JoinHostPort(ta.IP.String(), "0")
	}
	return "tcp://127.0.0.1:0"
}

// Close closes the listeners and every connection, and waits for their
// readers.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	lns := t.listeners
	conns := make([]*conn, 0, len(t.conns)+len(t.evicted))
	for c := range t.conns {
		conns = append(conns, c)
	}
	for c := range t.evicted {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	t.cancel()
	for _, ln := range lns {
		ln.Close()
	}
	for _, c := range conns {
		c.close(ErrClosed)
	}
	t.wg.Wait()
	return nil
}

func (t *Transport) accept(ln net.Listener) {
	defer t.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		host := hostOf(nc.RemoteAddr())
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			nc.Close()
			continue
		}
		victim, ok := t.roomFor(true, host)
		if !ok {
			t.mu.Unlock()
			t.stats.refused.Add(1)
			nc.Close()
			continue
		}
		if victim != nil {
			t.evictLocked(victim)
		}
		c := newConn(t, nc, true)
		t.add(c)
		t.wg.Add(1)
		t.mu.Unlock()
		if victim != nil {
			victim.evict()
		}
		go func() {
			defer t.wg.Done()
			if err := c.handshake("tcp://" + nc.RemoteAddr().String()); err != nil {
				t.stats.refused.Add(1)
				c.close(err)
				return
			}
			if !t.opts.requireS {
				t.bindPeer(c, c.claimed)
			}
			c.read()
		}()
	}
}

// dialCall is a dial in progress, shared by the Sends that need it.
type dialCall struct {
	done chan struct{}
	c    *conn
	err  error
}

// connTo returns the open connection to hostport, dialling if needed.
func (t *Transport) connTo(ctx context.Context, hostport string) (*conn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	if c := t.byAddr[hostport]; c != nil {
		t.mu.Unlock()
		return c, nil
	}
	call := t.dialing[hostport]
	var victim *conn
	if call == nil {
		var ok bool
		if victim, ok = t.roomFor(false, ""); !ok {
			n := len(t.conns)
			t.mu.Unlock()
			return nil, fmt.Errorf("%w: %d open (WithMaxConns), none idle for %v", ErrTooManyConns, n, t.opts.evictIdle)
		}
		if victim != nil {
			t.evictLocked(victim)
		}
		call = &dialCall{done: make(chan struct{})}
		t.dialing[hostport] = call
		t.pendingDials++
		t.wg.Add(1)
		go t.dial(hostport, call)
	}
	t.mu.Unlock()
	if victim != nil {
		victim.evict()
	}
	select {
	case <-call.done:
		return call.c, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dial connects to hostport and exchanges welcomes; the connection it
// makes outlives the Send that asked for it.
func (t *Transport) dial(hostport string, call *dialCall) {
	defer t.wg.Done()
	finish := func(c *conn, err error) {
		t.mu.Lock()
		delete(t.dialing, hostport)
		if err == nil {
			if _, open := t.conns[c]; t.closed || !open {
				err = ErrClosed
			} else {
				t.byAddr[hostport] = c
			}
		}
		t.mu.Unlock()
		call.c, call.err = c, err
		close(call.done)
	}
	ctx, cancel := context.WithTimeout(t.ctx, WelcomeTimeout)
	nc, err := t.opts.dial(ctx, "tcp", hostport)
	cancel()
	t.mu.Lock()
	t.pendingDials--
	if err != nil {
		t.mu.Unlock()
		finish(nil, fmt.Errorf("jxtatcp: dialling %s: %w", hostport, err))
		return
	}
	c := newConn(t, nc, false)
	if t.closed {
		t.mu.Unlock()
		nc.Close()
		finish(nil, ErrClosed)
		return
	}
	c.hostport = hostport
	t.add(c)
	t.mu.Unlock()
	if err := c.handshake("tcp://" + hostport); err != nil {
		c.close(err)
		finish(nil, fmt.Errorf("jxtatcp: %s: %w", hostport, err))
		return
	}
	// A connection we dialled reaches the peer its welcome names, as far
	// as anything can tell before it signs a message.
	t.bindPeer(c, c.claimed)
	finish(c, nil)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		c.read()
	}()
}

// bindPeer notes that c carries p, and makes c the connection jxta://
// sends to p use unless another open connection serves it as well or
// better (rankLocked): a frame signed by p may be a replay (CBJX has no
// nonce) and a welcome is the peer's word, so p's traffic moves only to
// a connection whose welcome names p from one whose welcome did not, or
// to a connection dialled at p's route from one p's claimant opened. It
// reports false, binding nothing, when c already carries
// MaxSignersPerConn other peers.
func (t *Transport) bindPeer(c *conn, p id.ID) bool {
	if p.IsZero() {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bindPeerLocked(c, p)
}

// bindPeerLocked is bindPeer under t.mu.
func (t *Transport) bindPeerLocked(c *conn, p id.ID) bool {
	if _, open := t.conns[c]; !open {
		return true
	}
	if !slices.Contains(c.peers, p) {
		if len(c.peers) >= MaxSignersPerConn {
			return false
		}
		c.peers = append(c.peers, p)
	}
	if old := t.byPeer[p]; old != nil && old != c {
		if _, open := t.conns[old]; open && t.rankLocked(old, p) >= t.rankLocked(c, p) {
			return true
		}
	}
	t.byPeer[p] = c
	return true
}

// forget removes c from the tables; the peers it served are served by
// another open connection that carries them, if there is one.
func (t *Transport) forget(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.evicted, c)
	t.forgetLocked(c, false)
}

// forgetLocked is forget under t.mu. For a connection evicted that the
// application sent to by tcp://, the peer its welcome named gets a route
// to where it can be dialled again, if no other connection serves it and
// it has none: the eviction was this end's doing. Not the other peers
// that signed frames on it (one may be a replay), nor the peer of a
// connection only this transport asked for (a dial to a route, which a
// peer can have it make).
func (t *Transport) forgetLocked(c *conn, byEviction bool) {
	if _, open := t.conns[c]; !open {
		return
	}
	delete(t.conns, c)
	if c.inbound {
		t.inbound--
		if t.hostConns[c.host]--; t.hostConns[c.host] == 0 {
			delete(t.hostConns, c.host)
		}
	}
	for _, p := range c.peers {
		if t.byPeer[p] != c {
			continue
		}
		delete(t.byPeer, p)
		for o := range t.conns {
			if slices.Contains(o.peers, p) && (t.byPeer[p] == nil || t.rankLocked(o, p) > t.rankLocked(t.byPeer[p], p)) {
				t.byPeer[p] = o
			}
		}
		if _, routed := t.routes[p]; byEviction && t.byPeer[p] == nil && !routed && c.asked && c.claimed == p {
			t.setRouteLocked(p, c.hostport, false)
		}
	}
	if c.hostport != "" && t.byAddr[c.hostport] == c {
		delete(t.byAddr, c.hostport)
	}
}

// Send sends m to service/param (of the net peer group) at to: a peer's
// tcp://host:port address, or its jxta://cbid-… address when a connection
// to it is open or a route is known (AddRoute). It returns once the frame
// is written to the connection.
func (t *Transport) Send(ctx context.Context, to, service, param string, m *message.Message) error {
	proto, addr, _, _, err := splitAddress(to)
	if err != nil {
		return err
	}
	if service == "" {
		return fmt.Errorf("%w: no service", ErrAddress)
	}
	for retried := false; ; retried = true {
		c, err := t.connFor(ctx, proto, addr, to)
		if err != nil {
			return err
		}
		frame, err := t.frame(c, service, param, m)
		if err != nil {
			return err
		}
		err = c.write(ctx, frame)
		if errors.Is(err, errEvicted) && !retried {
			continue // nothing of it was written: once more, on another connection
		}
		if err != nil {
			return err
		}
		t.stats.sent.Add(1)
		return nil
	}
}

// connFor returns the connection to send to, dialling if needed: to is
// the address Send was given, proto and addr its parts.
func (t *Transport) connFor(ctx context.Context, proto, addr, to string) (*conn, error) {
	var c *conn
	var err error
	switch proto {
	case "tcp":
		if c, err = t.connTo(ctx, addr); err == nil {
			t.learnRoute(c)
		}
	case "jxta":
		var p id.ID
		if p, err = parsePeerAddress(to); err != nil {
			return nil, err
		}
		t.mu.Lock()
		c = t.byPeer[p]
		r, routed := t.routes[p]
		atRoute := c != nil && c.hostport == r
		t.mu.Unlock()
		switch {
		case routed && !atRoute:
			return t.connToRoute(ctx, p, r, to)
		case c != nil:
		default:
			return nil, fmt.Errorf("%w: %s", ErrNoRoute, to)
		}
	default:
		return nil, fmt.Errorf("%w: %q: want tcp:// or jxta://", ErrAddress, to)
	}
	return c, err
}

// frame builds the frame carrying m to service/param on c's peer.
func (t *Transport) frame(c *conn, service, param string, m *message.Message) ([]byte, error) {
	ms, mp := mangle(service, param)
	dst := c.remote.Dest + "/" + ms + "/" + mp
	elems := make([]message.Element, 0, m.Len()+2)
	for _, e := range m.Elements() {
		if e.Namespace == message.JXTANamespace && (e.Name == SourceElement || e.Name == DestinationElement) {
			continue
		}
		elems = append(elems, e)
	}
	elems = append(elems, message.Text(message.JXTANamespace, SourceElement, peerAddress(t.ident.id)),
		message.Text(message.JXTANamespace, DestinationElement, dst))
	b := make([]byte, frameHeaderSize, 4096)
	b, err := wire.Append(b, message.FromElements(elems))
	if err != nil {
		return nil, fmt.Errorf("jxtatcp: %w", err)
	}
	if t.opts.sign {
		if b, err = t.ident.appendTrailer(b, b[frameHeaderSize:]); err != nil {
			return nil, err
		}
	}
	n := len(b) - frameHeaderSize
	if int64(n) > t.opts.maxMessage {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, n, t.opts.maxMessage)
	}
	appendFrameHeader(b[:0], n)
	return b, nil
}

// conn is one TCP connection to a JXTA peer.
type conn struct {
	t  *Transport
	nc net.Conn
	br *bufio.Reader
	// hostport is the address it was dialled at, "" for an accepted
	// connection; asked says an application's send to tcp://hostport
	// went over it (learnRoute). Both under t.mu.
	hostport string
	asked    bool
	remote   Welcome
	claimed  id.ID // the welcome's peer ID, if it parses
	// peers are the peers bound to it (bindPeer), at most
	// MaxSignersPerConn (under t.mu).
	peers []id.ID
	ver   verifier
	// host is what its slots and budget are counted under (hostOf);
	// inbound is true for a connection accepted.
	host    string
	inbound bool
	// frames counts the frames under way on it (read and handled, or
	// written), 1 during the welcome, evicted once it is closed to make
	// room; last is when the last one ended (UnixNano). See slots.go.
	frames atomic.Int32
	last   atomic.Int64
	lost   atomic.Bool // an unread frame lost to its eviction was counted

	// wlock (capacity 1) is the writer's token: whoever holds it writes a
	// frame. Unlike a mutex, waiting for it honours the Send's ctx: behind
	// a write stalled by a peer that stopped reading, a Send waits until
	// its own ctx ends, not for the stalled write's timeout.
	wlock chan struct{}
	once  sync.Once
	// why is the error close was first called with: what closed the
	// connection, for a write it cut short to say (cutShort).
	why atomic.Pointer[error]
}

func newConn(t *Transport, nc net.Conn, inbound bool) *conn {
	limitUnsent(nc, t.opts.unsent)
	c := &conn{t: t, nc: nc, br: bufio.NewReaderSize(newConnReader(nc), 64<<10), wlock: make(chan struct{}, 1),
		host: hostOf(nc.RemoteAddr()), inbound: inbound}
	c.frames.Store(1) // the welcome
	return c
}

// handshake sends this end's welcome and reads the other's; dest is what
// this end's welcome says it reached.
func (c *conn) handshake(dest string) error {
	w := Welcome{Dest: dest, Public: c.t.public(c.nc.LocalAddr()), Peer: c.t.ident.id.String(), Version: welcomeVersion}
	c.nc.SetDeadline(time.Now().Add(c.t.opts.welcomeTimeout))
	if _, err := c.nc.Write(w.Append(nil)); err != nil {
		return fmt.Errorf("jxtatcp: writing the welcome: %w", err)
	}
	rw, err := readWelcome(c.br)
	if err != nil {
		return err
	}
	c.nc.SetDeadline(time.Time{})
	c.remote = rw
	if p, err := id.Parse(rw.Peer); err == nil && p.Kind() == id.KindPeer {
		c.claimed = p
	}
	c.end() // the welcome
	return nil
}

// close closes the connection once. err is why; the reader's caller
// has counted it where it is worth counting.
func (c *conn) close(err error) {
	c.once.Do(func() {
		c.why.Store(&err)
		c.nc.Close()
		c.t.forget(c)
	})
}

// write writes a frame, within ctx's deadline or the write timeout (plus
// the frame's length at MinFrameRate). It returns once all but the
// unsent limit of the frame has been sent (WithUnsentLimit), so the
// deadline bounds how long the frame, and the unsent bytes of the
// frames before it, take to leave at the peer's pace. If
// ctx ends while it waits for another write, it fails and nothing of the
// frame was written.
func (c *conn) write(ctx context.Context, frame []byte) error {
	select {
	case c.wlock <- struct{}{}: // uncontended: no wait on ctx to set up
	default:
		select {
		case c.wlock <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("jxtatcp: writing to %s: %w (not sent)", c.nc.RemoteAddr(), ctx.Err())
		}
	}
	defer func() { <-c.wlock }()
	if !c.begin() {
		return fmt.Errorf("jxtatcp: writing to %s: %w (not sent)", c.nc.RemoteAddr(), errEvicted)
	}
	defer c.end()
	// The write timeout, plus the frame's length at MinFrameRate: the
	// pace a receiver of ours allows a frame's body, so that a large
	// message to a slow but steady reader is not cut (30 s alone failed
	// a 60 MiB message to a peer reading 1.3 MB/s).
	dl := time.Now().Add(c.t.opts.writeTimeout + time.Duration(len(frame))*time.Second/MinFrameRate)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.nc.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { c.nc.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := c.nc.Write(frame)
	stop()
	if err != nil {
		// A frame cut short leaves the stream unframed: the connection
		// goes, and the next Send dials again.
		c.close(err)
		if ctx.Err() != nil {
			return fmt.Errorf("jxtatcp: writing to %s: %w", c.nc.RemoteAddr(), ctx.Err())
		}
		return fmt.Errorf("jxtatcp: writing to %s: %w", c.nc.RemoteAddr(), c.cutShort(err))
	}
	return nil
}

// cutShort is err, a write's error, saying why the connection was closed
// when it was closed under the write: err alone then says only "use of
// closed network connection", as if this end had misused it, when the
// reader closed it because the peer ended the connection or broke its
// framing, or an eviction or the transport's Close did. It still
// matches err; never io.EOF, which a writer must not take for a clean
// end.
func (c *conn) cutShort(err error) error {
	why := c.why.Load()
	if why == nil || !errors.Is(err, net.ErrClosed) || errors.Is(*why, net.ErrClosed) {
		return err
	}
	if errors.Is(*why, io.EOF) {
		return fmt.Errorf("the peer closed the connection (%w)", err)
	}
	return fmt.Errorf("the connection was closed: %w (%w)", *why, err)
}

// read reads frames until the connection ends.
func (c *conn) read() {
	t := c.t
	for {
		last, err := c.next()
		if err != nil {
			c.close(err)
			return
		}
		c.nc.SetReadDeadline(time.Now().Add(t.opts.frameTimeout))
		n, err := readFrameHeader(c.br, t.opts.maxMessage)
		if err != nil {
			t.stats.refused.Add(1)
			c.close(err)
			return
		}
		cl := &claim{c: c, host: c.host, n: n}
		if err := t.budget.acquire(t.ctx, cl); err != nil {
			c.close(err)
			return
		}
		// The rate is the peer's from here: waiting for the budget was
		// this end's stall.
		body, err := c.readBody(cl)
		if err != nil {
			// Counted before the budget frees, so that whoever it lets
			// through sees the refusal in Stats.
			if t.budget.wasShed(cl) {
				t.stats.shed.Add(1)
			}
			t.stats.refused.Add(1)
			t.budget.release(cl)
			c.close(err)
			return
		}
		keep := c.handle(body, cl)
		if !cl.kept.Load() {
			t.budget.release(cl)
		}
		if last {
			if keep {
				c.closeEvicted()
			}
			return
		}
		c.end()
		if !keep {
			return
		}
	}
}

// next waits for a frame's first byte and begins the frame. On a
// connection closed to make room meanwhile (evict), it reports last: a
// frame whose first byte is there was sent before the peer could learn
// of the close, and JXTA unicast has no acknowledgement, so it is read,
// and the connection closed after it. err when there is no frame to read
// (errEvicted on a connection evicted while idle).
func (c *conn) next() (last bool, err error) {
	// Idle between frames: JXSE sends no keep-alives, so no deadline
	// until a frame begins; but evict's wake-up may have come before the
	// deadline was cleared.
	c.nc.SetReadDeadline(time.Time{})
	if c.frames.Load() == evicted {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	_, err = c.br.Peek(1)
	if err == nil {
		if c.t.opts.afterPeek != nil {
			c.t.opts.afterPeek(c)
		}
		if c.begin() {
			return false, nil
		}
		return true, nil // evicted as the frame arrived
	}
	if c.frames.Load() != evicted {
		return false, err
	}
	if !unreadBytes(c.nc) {
		return false, errEvicted
	}
	// Arrived as evict woke the reader: its deadline kept it unread.
	c.nc.SetReadDeadline(time.Now().Add(c.t.opts.frameTimeout))
	if _, err := c.br.Peek(1); err != nil {
		return false, err
	}
	return true, nil
}

// readBody reads n bytes, as they arrive: a length that lies costs only
// what was sent. Each 64 KiB must come within the frame timeout, and the
// body at MinFrameRate at least after the frame timeout from start.
func (c *conn) readBody(cl *claim) ([]byte, error) {
	const chunk = 64 << 10
	n, start := cl.n, cl.start
	timeout := c.t.opts.frameTimeout
	body := make([]byte, 0, min(n, chunk))
	for int64(len(body)) < n {
		cl.got.Store(int64(len(body)))
		k := int(min(n-int64(len(body)), chunk))
		dl := time.Now().Add(timeout)
		floor := start.Add(timeout + time.Duration(int64(len(body)+k))*time.Second/MinFrameRate)
		slow := floor.Before(dl)
		if slow {
			dl = floor
		}
		c.nc.SetReadDeadline(dl)
		body = slices.Grow(body, k)
		if _, err := io.ReadFull(c.br, body[len(body):len(body)+k]); err != nil {
			var te interface{ Timeout() bool }
			if slow && errors.As(err, &te) && te.Timeout() {
				c.t.stats.slowFrames.Add(1)
				return nil, fmt.Errorf("%w: body of %d bytes arriving slower than %d bytes/s", ErrFrame, n, MinFrameRate)
			}
			if c.t.budget.wasShed(cl) {
				return nil, fmt.Errorf("%w: body of %d bytes too slow for the memory budget others wait for", ErrFrame, n)
			}
			return nil, fmt.Errorf("%w: body: %w", ErrFrame, unexpected(err))
		}
		body = body[:len(body)+k]
	}
	cl.got.Store(n) // read: nothing left to shed it for
	return body, nil
}

// handle decodes, checks and delivers one frame's body; false when the
// connection was closed for it.
func (c *conn) handle(body []byte, cl *claim) bool {
	t := c.t
	r := bytes.NewReader(body)
	m, err := wire.Decode(r, wire.WithMaxMessageSize(t.opts.maxMessage))
	if err != nil {
		t.stats.malformed.Add(1)
		c.close(fmt.Errorf("%w: %w", ErrFrame, err))
		return false
	}
	msgLen := len(body) - r.Len()
	var signer id.ID
	signed := false
	if rest := body[msgLen:]; len(rest) > 0 && (t.opts.requireS || t.opts.sign) {
		tr, err := parseTrailer(rest)
		if err != nil {
			if t.opts.requireS {
				t.stats.badSig.Add(1)
				c.close(err) // the framing cannot be trusted, as JXSE judges it
				return false
			}
		} else if signer, err = c.ver.verify(body[:msgLen], tr); err != nil {
			t.stats.badSig.Add(1)
			return true
		} else {
			signed = true
		}
	} else if len(rest) == 0 && t.opts.requireS {
		t.stats.unsigned.Add(1)
		c.close(fmt.Errorf("%w: unsigned message", ErrSignature))
		return false
	} else if len(rest) > 0 {
		t.stats.signedIgnored.Add(1)
	}
	src, ok1 := textOf(m, SourceElement)
	dst, ok2 := textOf(m, DestinationElement)
	if !ok1 || !ok2 {
		t.stats.malformed.Add(1)
		return true
	}
	claimed, err := parsePeerAddress(src)
	if err != nil {
		t.stats.malformed.Add(1)
		return true
	}
	if signed && claimed != signer {
		t.stats.spoofed.Add(1)
		return true
	}
	m.Remove(message.JXTANamespace, SourceElement)
	m.Remove(message.JXTANamespace, DestinationElement)
	_, _, service, param, err := splitAddress(dst)
	if err != nil {
		t.stats.malformed.Add(1)
		return true
	}
	service, param, ok := unmangle(service, param)
	if !ok {
		t.stats.notForUs.Add(1)
		return true
	}
	source := claimed
	if service == RouterService && param == "" {
		el, ok := m.Get(message.JXTANamespace, RouterElement)
		if !ok {
			t.stats.malformed.Add(1)
			return true
		}
		r, err := parseERM(el.Data)
		if err != nil {
			t.stats.malformed.Add(1)
			return true
		}
		if r.destPeer != t.ident.id || r.src == t.ident.id {
			t.stats.notForUs.Add(1)
			return true
		}
		// The router source must be a verified address: the signer, or
		// the peer a valid fingerprint proves.
		verified := signed && r.src == signer
		if fp, ok := m.Get(message.JXTANamespace, FingerprintElement); ok {
			p, err := verifyFingerprint(fp.Data)
			if err != nil || p != r.src {
				t.stats.spoofed.Add(1)
				return true
			}
			verified = true
		}
		if signed && !verified {
			t.stats.spoofed.Add(1)
			return true
		}
		m.Remove(message.JXTANamespace, RouterElement)
		m.Remove(message.JXTANamespace, FingerprintElement)
		service, param, source = r.service, r.param, r.src
	}
	if signed && !t.bindPeer(c, signer) {
		t.stats.tooManySigners.Add(1)
		return true
	}
	t.stats.received.Add(1)
	in := &Incoming{Message: m, Source: source, Signed: signed, Service: service, Param: param,
		Remote: c.nc.RemoteAddr().String(), Size: int64(len(body)), cl: cl}
	t.handler(in)
	if !in.hold.CompareAndSwap(handling, ended) && cl != nil { // else a later Hold holds nothing
		cl.kept.Store(true)
	}
	return true
}

// Signs reports whether the transport signs its messages and requires
// signed ones (the default; not with WithUnsigned or WithAcceptUnsigned).
func (t *Transport) Signs() bool { return t.opts.sign && t.opts.requireS }
