// Package node is a p2pmsg peer: a libp2p host with the identity, transports,
// security, limits, relaying and discovery p2pmsg needs, and the JXTA peer ID
// derived from its key.
//
// It sits directly on go-libp2p, below the endpoint layer, which carries
// JXTA messages over the node's streams.
//
// # Defaults and why
//
// Transports: TCP and QUIC, both listened on. When a peer advertises both,
// go-libp2p's dial ranker tries QUIC first. On loopback QUIC is the slower
// of the two: over several lab rtt runs on a raw stream (2-core EPYC,
// Go 1.26, a busy machine) a 1-byte round trip took 46–52 µs over QUIC and
// 17–44 µs over TCP, and 1 MiB round trips moved 155–270 MB/s over QUIC
// against 545–1,050 MB/s over TCP. A node that wants bulk throughput on a
// LAN should listen on TCP only, or dial a peer's TCP address.
//
// TCP dials from an ephemeral port, not from the listening port as
// go-libp2p does by default (SO_REUSEPORT). Dialling from the listening
// port gives every pair of nodes one possible 4-tuple, so when two nodes
// dial each other at the same moment (two nodes that find each other by
// mDNS, or peers a DHT lookup tells of each other), their SYNs can meet
// in a TCP simultaneous open: one connection on which both sides start
// the security handshake as its initiator, which fails, and each side
// then backs off dialling the other for at least 5 s. Between two
// go-libp2p hosts with its defaults dialling each other on loopback, that
// happened to 8 to 17 of 300 pairs in three runs; TestSimultaneousDials
// checks that it does not happen to p2pmsg nodes. The listening port
// matters only for hole punching over TCP; DCUtR also punches over QUIC,
// whose one UDP socket serves listening and dialling alike, so that is
// unaffected. WithTCPPortReuse restores go-libp2p's way for a node that
// needs TCP hole punching.
//
// Security on TCP: TLS 1.3 first, then Noise (DefaultSecurity; change it
// with WithSecurity). Measured side by side with BenchmarkSecurity (a raw
// stream echo between two loopback nodes offering only one of them, median
// of six runs): a 1-byte round trip takes 19.1 µs over TLS and 18.3 µs
// over Noise, the same within the noise of a shared machine, while 1 MiB
// round trips move 919 MB/s over TLS against 482 MB/s over Noise (AES-GCM
// with hardware support against ChaCha20-Poly1305; TLS also writes 16 KiB
// records). So TLS is offered first; Noise stays for peers that only speak
// it. QUIC brings its own TLS 1.3.
//
// Muxer on TCP and WebSocket: yamux, its small frames coalesced into
// fuller TLS records and system calls, with no timer (coalesce.go), so
// that a stream written a small message at a time, or a queue of small
// frames behind a write, costs a system call per batch rather than per
// frame (BenchmarkStreamWrites; docs/performance.md). The bytes on the
// wire are yamux's; muxers given with WithLibp2pOptions replace it.
//
// # Limits
//
// Resource manager: go-libp2p's default limits scaled to the machine
// (rcmgr.DefaultLimits.AutoScale, from an eighth of its memory and half
// its file descriptors), with go-libp2p's default service limits, as its
// own default setup has them, and a share of streams for every peer
// (limits.go). On a 24 GiB machine that is, for the whole node, 504
// connections (252 inbound, all of which may be handshaking), 28,229
// streams (24,192 inbound: MaxInboundStreamsPerPeer for each inbound
// connection, so that inbound peers cannot take one another's) and
// 3.1 GiB; per peer, 8 connections, 96 inbound streams and 441 MiB,
// which bound the flow-control windows yamux grows (each stream's up to
// 16 MiB, reserved in its peer's scope); per connection 32 MiB (QUIC's
// windows); per peer and protocol, the Max…StreamsPerPeer constants.
// Every yamux stream reserves its first receive window, 256 KiB, against
// its peer's memory and the node's, so that a peer holding its whole
// share of streams reserves 24 MiB, and 131 such peers reach the node's
// memory limit before its stream limits; a refused reservation is
// counted (GateStats.MemoryRefused, which says what each does).
// A remote host has at most MaxHandshakesPerHost connections handshaking
// at once, and when no slot is left a new connection displaces a
// handshake, a silent one first, of the host with the most; go-libp2p's
// rate limit of new connections per address is charged once per
// connection (connRate); relayed connections come only through relays
// the node holds a reservation with (Reserve). GateStats counts what is
// refused.
// Connection manager: once ConnHighWater (40) connections are open, close
// all but ConnLowWater (10) of the unprotected ones, sparing connections
// younger than ConnGrace (20 s) and those the DHT, gossipsub and open
// pipes protect (see the constants for why). The endpoint layer adds its own per-message and
// per-peer limits (package endpoint).
// Peerstore: MaxAddrsPerPeer addresses per peer, and the addresses of
// the last MaxDepartedPeers peers to disconnect (see PeerstoreStats).
// DHT answers name DHTMaxAddrsPerPeer addresses per peer.
// Peers found by mDNS (WithMDNS): MaxMDNSDials dials at once,
// MaxMDNSWaitingPerHost waiting per announced host, MaxMDNSWaiting in
// all, hosts served in turn, MDNSDialsPerSecond; the mDNS service rebuilt
// MDNSRebuildAfterSkip after skips and every MDNSRefreshEvery, failed
// dials not retried for MDNSRetryFailedAfter (see MDNSStats).
//
// Circuit relay v2 client and hole punching are on: connections are
// relayed to the node by the relays it reserves a slot on with Reserve;
// acting as a relay for others is off unless WithRelayService is given.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	libp2pwebrtc "github.com/libp2p/go-libp2p/p2p/transport/webrtc"
	ws "github.com/libp2p/go-libp2p/p2p/transport/websocket"
	webtransport "github.com/libp2p/go-libp2p/p2p/transport/webtransport"
	"github.com/libp2p/go-libp2p/x/rate"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/p2pmsg/p2pmsg/internal/filekind"
	"github.com/p2pmsg/p2pmsg/internal/joinerr"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// Errors.
var (
	ErrBadOption = errors.New("node: invalid option")
	ErrKeyFile   = errors.New("node: unusable key file")
	// ErrAddrInUse: a listen address names a TCP port another socket
	// holds.
	ErrAddrInUse = errors.New("node: listen address in use")
)

// Connection manager limits. A p2pmsg node keeps the connections its
// protocols protect: the DHT's two widest buckets (kad-dht protects up to
// twice its bucket size, 40 peers), each propagate pipe's gossipsub mesh
// (up to 12 peers per pipe) and the peers its output pipes and
// bidirectional pipes are open to (package pipe protects them), and the
// relays it holds a reservation with (Reserve). Every
// other connection was opened for a lookup, a resolution or a dial, and
// costs goroutines and buffers for as long as it stays open (at least
// four goroutines in go-libp2p and yamux, seven with gossipsub). The
// connection manager never closes protected connections: it counts all
// connections against ConnHighWater, and a trim closes unprotected ones,
// least valued first, until ConnLowWater unprotected ones are left.
const (
	// ConnHighWater is where trimming starts: the most the DHT protects
	// (2 × its bucket size of 20), so that a node holding more has
	// connections no protocol asked for.
	ConnHighWater = 40
	// ConnLowWater is how many unprotected connections a trim keeps,
	// the most valued (peers sending on this node's pipes, which the pipe
	// service tags, then the DHT's other routing-table peers): as many
	// as a DHT lookup queries at once (kad-dht's concurrency, 10), so
	// that a lookup's first round mostly finds its peers connected.
	ConnLowWater = 10
	// ConnGrace spares new connections from trimming: twice the pipe
	// service's default resolve timeout (10 s), so that a connection
	// opened to resolve a pipe lives until the output pipe sending on it
	// protects it (Kubo uses the same 20 s).
	ConnGrace = 20 * time.Second
)

// DefaultListenAddrs are used when WithListenAddrs is not given.
var DefaultListenAddrs = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}

// MDNSServiceName is the mDNS service p2pmsg nodes announce on a LAN.
const MDNSServiceName = "p2pmsg"

type config struct {
	keyFile      string
	ephemeral    bool
	listen       []string
	bootstrap    []peer.AddrInfo
	mdns         bool
	relayService bool
	relayPerIP   int // reservations per IP address; 0: RelayMaxReservationsPerIP
	tcpReuse     bool
	security     []string
	dht          bool
	dhtMode      DHTMode
	group        id.ID
	extra        []libp2p.Option
	// socketStreams is the socket streams one peer may hold on the node
	// (WithSocketStreamsPerPeer).
	socketStreams int
	// limitLoopback applies MaxHandshakesPerHost to loopback hosts too
	// (tests only).
	limitLoopback bool
	// loopbackRate, if not 0, rate-limits connections from each loopback
	// address to that many (loopbackConnRate; tests only).
	loopbackRate int
	// peerMemory, if not 0, is every peer's memory limit in bytes
	// (tests only).
	peerMemory int64
	// nodeMemory, if not 0, is the node's memory limit in bytes, all
	// peers together (tests only).
	nodeMemory int64
	// noConnGrace sets the connection manager's grace period to 0, so
	// that a test can trim at once (tests only).
	noConnGrace bool
}

// Option configures a Node.
type Option func(*config) error

// WithKeyFile keeps the node's Ed25519 identity in path: created (0600) on
// first use, loaded afterwards. Without it (or WithEphemeralKey) the node
// gets a fresh identity each time.
func WithKeyFile(path string) Option {
	return func(c *config) error {
		if path == "" {
			return fmt.Errorf("%w: empty key file path", ErrBadOption)
		}
		c.keyFile = path
		return nil
	}
}

// WithEphemeralKey gives the node a new identity that is never stored.
func WithEphemeralKey() Option {
	return func(c *config) error { c.ephemeral = true; return nil }
}

// WithListenAddrs sets the multiaddrs to listen on (default
// DefaultListenAddrs). Tests and experiments pass loopback addresses.
func WithListenAddrs(addrs ...string) Option {
	return func(c *config) error {
		for _, a := range addrs {
			if _, err := ma.NewMultiaddr(a); err != nil {
				return fmt.Errorf("%w: listen address %q: %v", ErrBadOption, a, err)
			}
		}
		c.listen = addrs
		return nil
	}
}

// WithBootstrapPeers connects to these peers when the node starts.
func WithBootstrapPeers(peers ...peer.AddrInfo) Option {
	return func(c *config) error { c.bootstrap = append(c.bootstrap, peers...); return nil }
}

// WithMDNS announces the node and connects to peers found on the LAN:
// MaxMDNSDials dials at once, starting at MDNSDialsPerSecond after the
// first ConnHighWater; the peers waiting meanwhile are grouped by the
// host they are announced at, MaxMDNSWaitingPerHost per host and
// MaxMDNSWaiting in all, and the hosts served in turn; others are not
// dialled, counted (MDNSStats), and found again when the node rebuilds
// its mDNS service, at most MDNSRebuildAfterSkip after it skipped them;
// a peer connected, being dialled or waiting is not dialled again, nor
// one whose dial at the same addresses failed within
// MDNSRetryFailedAfter. So a LAN host announcing made-up peers by
// the thousand costs the node at most MaxMDNSDials dials at a time, makes
// it dial another host named in them ConnHighWater times, then no faster
// than MDNSDialsPerSecond, and keeps no peer announced at another address
// from being dialled after the dials in progress. Each dial ends after
// 10 s or when the node closes.
// Any host on the LAN can announce peers at any address: the node dials
// what it is told, within these bounds.
func WithMDNS() Option { return func(c *config) error { c.mdns = true; return nil } }

// Limits of each connection a p2pmsg relay carries for others, far above
// go-libp2p's defaults (2 minutes, 128 KiB each way), which would cut a
// socket or a large pipe message short. A connection through another
// implementation's relay gets that relay's limits.
const (
	RelayMaxDuration = time.Hour
	RelayMaxData     = 1 << 30 // bytes each way
)

// WithRelayService makes the node a circuit relay v2 for other peers,
// within RelayMaxDuration and RelayMaxData per relayed connection, and
// RelayMaxReservationsPerIP reservations per IP address (see
// WithRelayReservationsPerIP); in all, as many reservations as the
// resource manager admits inbound connections.
func WithRelayService() Option { return func(c *config) error { c.relayService = true; return nil } }

// WithRelayReservationsPerIP sets how many reservations the relay service
// (WithRelayService) grants peers connecting from one IP address, 1 to
// 4,096 (default RelayMaxReservationsPerIP): more for a relay that serves
// many peers behind one NAT, or on one machine, as a lab swarm on
// loopback is. Each IP address can then hold that many of the relay's
// reservations, whose total the resource manager bounds.
func WithRelayReservationsPerIP(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 4096 {
			return fmt.Errorf("%w: %d relay reservations per IP address: want 1 to 4,096", ErrBadOption, n)
		}
		c.relayPerIP = n
		return nil
	}
}

// WithGroup sets the peer group of the node's JXTA peer ID (default the Net
// peer group).
func WithGroup(g id.ID) Option {
	return func(c *config) error {
		if g.Kind() != id.KindPeerGroup {
			return fmt.Errorf("%w: %v is not a peer group ID", ErrBadOption, g)
		}
		c.group = g
		return nil
	}
}

// WithTCPPortReuse dials TCP from the listening port (SO_REUSEPORT), as
// go-libp2p does by default, so that hole punching (DCUtR) can work over
// TCP as well as over QUIC. Two nodes dialling each other at the same
// moment may then fail to connect, each backing off from the other for
// at least 5 s (see the package doc).
func WithTCPPortReuse() Option { return func(c *config) error { c.tcpReuse = true; return nil } }

// WithLibp2pOptions appends raw go-libp2p options, applied after the
// node's own (for example a transport that emulates a link, or a
// force-reachability option). Transports given here replace the node's
// default ones, and muxers its yamux with coalesced writes (a
// libp2p.Muxer of go-libp2p's yamux transport gives its stock writes). The node has a connection gater and a resource manager
// of its own (see Limits in the package doc), so libp2p.ConnectionGater
// or libp2p.ResourceManager here fails New.
func WithLibp2pOptions(opts ...libp2p.Option) Option {
	return func(c *config) error { c.extra = append(c.extra, opts...); return nil }
}

// maxSocketStreams bounds WithSocketStreamsPerPeer: 4,096 streams reserve
// 1 GiB of yamux receive windows (256 KiB each), more than go-libp2p's
// scaling gives one peer's memory on a machine under 64 GiB, so that
// past it the memory limit, not this bound, would decide; a value
// beyond it is more likely a mistake (a zero too many) than a pool.
const maxSocketStreams = 4096

// WithSocketStreamsPerPeer sets how many socket streams one peer may
// hold open on the node, and the node on one peer (default
// MaxSocketStreamsPerPeer; 1 to 4,096), for a server whose clients keep
// larger pools of sockets, or a client keeping one. A socket connection
// is one stream for its life, waiting for Accept or accepted. Beyond
// the bound a dial is refused (socket.ErrRefused) and counted
// (GateStats.StreamsRefused).
//
// A peer's share of the node's inbound streams (MaxInboundStreamsPerPeer)
// grows by as much as n exceeds the default, and so do the node's
// inbound streams, for each of its inbound connections, so that the
// peers it lets in still cannot take one another's share. The trade:
// each stream costs the node a yamux receive window, 256 KiB reserved
// against the peer's and the node's memory limits, and whatever the
// application spends on the connection it accepted (its goroutine and
// buffers). At n = 256 a peer's share is 288 streams, reserving up to
// 72 MiB, and on a 24 GiB machine (252 inbound connections, 441 MiB per
// peer, 3.1 GiB for the node) the node's inbound streams rise to 72,576;
// the memory limits still bound the total: a peer's admits 1,762
// streams, the node's 12,564, so that 44 peers each holding their whole
// share reach it (131 at the default), and every peer's new streams are
// then refused until theirs close.
func WithSocketStreamsPerPeer(n int) Option {
	return func(c *config) error {
		if n < 1 || n > maxSocketStreams {
			return fmt.Errorf("%w: %d socket streams per peer out of [1, %d]", ErrBadOption, n, maxSocketStreams)
		}
		c.socketStreams = n
		return nil
	}
}

// Node is a running p2pmsg peer.
type Node struct {
	host   host.Host
	jxtaID id.ID
	group  id.ID
	// mdns runs go-libp2p's mDNS service and dials the peers it finds
	// (see MDNSStats).
	mdns *mdnsRunner
	dht  *dht.IpfsDHT
	// providers holds the DHT's records, routing counts its routing
	// table's places by host (see DHTStats).
	providers *providerStore
	routing   *routingHosts
	// gate refuses relayed connections from strangers and counts what
	// the node refuses (see GateStats).
	gate *gate
}

// New starts a node.
func New(ctx context.Context, opts ...Option) (*Node, error) {
	c := config{listen: DefaultListenAddrs, group: id.NetPeerGroupID, security: DefaultSecurity,
		socketStreams: MaxSocketStreamsPerPeer}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.ephemeral && c.keyFile != "" {
		return nil, fmt.Errorf("%w: WithKeyFile and WithEphemeralKey together", ErrBadOption)
	}
	if err := checkPortsFree(c.listen); err != nil {
		return nil, err
	}
	var key crypto.PrivKey
	var err error
	if c.keyFile != "" {
		key, err = LoadOrCreateKey(c.keyFile)
	} else {
		key, _, err = crypto.GenerateEd25519Key(nil)
	}
	if err != nil {
		return nil, err
	}
	g := newGate()
	lc := limits(c.socketStreams)
	if c.peerMemory > 0 || c.nodeMemory > 0 {
		pl := lc.ToPartialLimitConfig()
		if c.peerMemory > 0 {
			pl.PeerDefault.Memory = rcmgr.LimitVal64(c.peerMemory)
		}
		if c.nodeMemory > 0 {
			pl.System.Memory = rcmgr.LimitVal64(c.nodeMemory)
		}
		lc = pl.Build(rcmgr.ConcreteLimitConfig{})
	}
	limiter := rcmgr.NewFixedLimiter(lc)
	// The node charges each connection's address itself (connRate).
	inner, err := rcmgr.NewResourceManager(limiter, rcmgr.WithMetrics(&g.refusals),
		rcmgr.WithConnRateLimiters(&rate.Limiter{}))
	if err != nil {
		return nil, fmt.Errorf("node: resource manager: %w", err)
	}
	cr := connRate()
	if c.loopbackRate > 0 {
		cr = loopbackConnRate(c.loopbackRate)
	}
	rm := newHandshakeLimiter(&memoryCounter{ResourceManager: inner, refused: &g.memoryRefused}, cr, c.limitLoopback, g)
	g.accepted = rm.accept
	grace := ConnGrace
	if c.noConnGrace {
		grace = 0
	}
	cm, err := connmgr.NewConnManager(ConnLowWater, ConnHighWater, connmgr.WithGracePeriod(grace))
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("node: connection manager: %w", err)
	}
	lopts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(c.listen...),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionGater(g),
		libp2p.ConnectionManager(cm),
		libp2p.EnableRelay(),
		libp2p.EnableHolePunching(),
	}
	lopts = append(lopts, securityOptions(c.security)...)
	if c.relayService {
		lopts = append(lopts, libp2p.EnableRelayService(relay.WithResources(relayResources(limiter, c.relayPerIP))))
	}
	lopts = append(lopts, c.extra...)
	lopts = append(lopts, defaultTransports(c.tcpReuse), defaultMuxer(&g.yamuxSpans, &g.framesReset), peerstoreOption())
	h, err := libp2p.New(lopts...)
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("node: starting libp2p: %w", err)
	}
	jid, err := id.PeerIDFromPublicKey(c.group, key.GetPublic())
	if err != nil {
		h.Close()
		return nil, err
	}
	n := &Node{host: h, jxtaID: jid, group: c.group, gate: g}
	g.mu.Lock()
	g.cm = h.ConnManager()
	g.mu.Unlock()
	h.Network().Notify(&network.NotifyBundle{DisconnectedF: func(nw network.Network, c network.Conn) {
		if nw.Connectedness(c.RemotePeer()) != network.Connected {
			g.disconnected(c.RemotePeer())
		}
	}})
	if err := connectAll(ctx, h, c.bootstrap); err != nil {
		n.Close()
		return nil, err
	}
	if c.dht {
		n.providers, n.routing = newProviderStore(), newRoutingHosts(h.Network(), MaxRoutingPeersPerHost)
		if n.dht, err = startDHT(ctx, h, c.dhtMode, c.bootstrap, n.providers, n.routing); err != nil {
			n.Close()
			return nil, err
		}
	}
	if c.mdns {
		if n.mdns, err = startMDNS(h); err != nil {
			n.Close()
			return nil, fmt.Errorf("node: mDNS: %w", err)
		}
	}
	return n, nil
}

// defaultTransports is go-libp2p's default transports (its private-network
// set with a pre-shared key), TCP dialling from an ephemeral port unless
// reuse, for a node whose options chose no transports of their own.
func defaultTransports(reuse bool) libp2p.Option {
	return func(cfg *libp2p.Config) error {
		if len(cfg.Transports) > 0 {
			return nil
		}
		var topts []any
		if !reuse {
			topts = append(topts, tcp.DisableReuseport())
		}
		if cfg.PSK != nil {
			return cfg.Apply(libp2p.Transport(tcp.NewTCPTransport, topts...), libp2p.Transport(ws.New))
		}
		return cfg.Apply(libp2p.Transport(tcp.NewTCPTransport, topts...), libp2p.Transport(quic.NewTransport),
			libp2p.Transport(ws.New), libp2p.Transport(webtransport.New), libp2p.Transport(libp2pwebrtc.New))
	}
}

// connectAll connects to every peer at once, so that a node starts as
// fast as its slowest bootstrap peer answers rather than after all of
// them in turn; it fails with the first peer's error.
func connectAll(ctx context.Context, h host.Host, peers []peer.AddrInfo) error {
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Connect(ctx, p); err != nil {
				errs[i] = fmt.Errorf("node: bootstrap peer %s: %w", p.ID, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Host returns the underlying libp2p host.
func (n *Node) Host() host.Host { return n.host }

// ID returns the libp2p peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// ForgetDialFailures lets the next dial of p go out at once. libp2p backs
// off from a peer whose dial failed: 5 s after the first failure and
// longer after each that follows (5 s + 1 s × failures², up to 5
// minutes), so a peer that restarted after an outage stayed unreachable
// from a node that had kept trying it for as long again (16 s after a
// 40 s outage). A dial the application asks for, naming the peer, should
// not wait for that; the pipe service calls this before dialling peers a
// resolution is given (pipe.ToPeers).
func (n *Node) ForgetDialFailures(p peer.ID) {
	if s, ok := n.host.Network().(*swarm.Swarm); ok {
		s.Backoff().Clear(p)
	}
}

// JXTAPeerID returns the node's JXTA peer ID, derived from its key.
func (n *Node) JXTAPeerID() id.ID { return n.jxtaID }

// Group returns the peer group of the node's JXTA peer ID.
func (n *Node) Group() id.ID { return n.group }

// AddrInfo returns the node's peer ID and listen addresses.
func (n *Node) AddrInfo() peer.AddrInfo {
	return peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()}
}

// Addrs returns the node's full multiaddrs, each ending in /p2p/<id>.
func (n *Node) Addrs() []ma.Multiaddr {
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()})
	if err != nil {
		return nil
	}
	return addrs
}

// Connect dials a peer.
func (n *Node) Connect(ctx context.Context, p peer.AddrInfo) error {
	return n.host.Connect(ctx, p)
}

// Close stops the node.
func (n *Node) Close() error {
	var errs []error
	if n.mdns != nil {
		errs = append(errs, n.mdns.close())
	}
	if n.dht != nil {
		errs = append(errs, n.dht.Close())
	}
	n.gate.close()
	errs = append(errs, n.host.Close())
	return joinerr.Join(errs...)
}

// checkPortsFree fails when a TCP listen address with a fixed port names
// a port another socket holds. With WithTCPPortReuse libp2p listens on
// TCP with SO_REUSEPORT (so that it can dial from its listening port),
// and the kernel then lets a second process doing the same share the
// port, splitting the incoming connections between the two without a
// word. A plain bind, without SO_REUSEPORT, fails on a port in use
// whoever holds it, and says so before libp2p's own error would.
func checkPortsFree(listen []string) error {
	for _, s := range listen {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			continue // reported by libp2p
		}
		port, err := a.ValueForProtocol(ma.P_TCP)
		if err != nil || port == "0" {
			continue
		}
		na, err := manet.ToNetAddr(a)
		if err != nil {
			continue // a TCP address libp2p listens on differently (e.g. /ws)
		}
		ln, err := net.Listen("tcp", na.String())
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%w: %s", ErrAddrInUse, s)
			}
			continue // not ours to judge: libp2p reports it
		}
		ln.Close()
	}
	return nil
}

// LoadOrCreateKey reads an Ed25519 private key from path, or creates one
// there (mode 0600) if the file does not exist; its directory must exist
// (a mistyped path is an error, not a new directory tree). A
// key file readable by others, a file that is not a regular file (a
// device, a FIFO, a directory: the error says which) and one larger than
// 4 KiB are refused before anything is read from them: the file's type is
// checked once it is open, and opening it does not wait for a FIFO's
// writer (filekind.OpenRegular), so a path swapped after any check of it
// cannot hold the caller.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	f, st, err := filekind.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	b, err := readKeyFile(f, st, path)
	if err != nil {
		return nil, err
	}
	key, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyFile, path, err)
	}
	return key, nil
}

// maxKeyFile bounds a key file: a marshalled Ed25519 key is 68 bytes, an
// RSA-4096 one about 2.4 KiB.
const maxKeyFile = 4096

// readKeyFile reads an opened regular key file, st its FileInfo, after
// checking that it is at most maxKeyFile bytes and that only its owner
// can read it; a file that grows after the check is still read only up
// to the bound.
func readKeyFile(f *os.File, st fs.FileInfo, path string) ([]byte, error) {
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is accessible by others (mode %v); chmod 600 it", ErrKeyFile, path, st.Mode().Perm())
	}
	if st.Size() > maxKeyFile {
		return nil, fmt.Errorf("%w: %s is %d bytes, not a key", ErrKeyFile, path, st.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%w: %s is over %d bytes, not a key", ErrKeyFile, path, maxKeyFile)
	}
	return b, nil
}

// createKey makes a new Ed25519 key and stores it in path (mode 0600).
func createKey(path string) (crypto.PrivKey, error) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	raw, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	return key, nil
}
