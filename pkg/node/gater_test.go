package node_test

import (
	"context"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/util"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// within is how long a test waits for the node to act on what a peer
// sent; it times nothing.
func within(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func transientInbound(n *node.Node) int {
	var c int
	n.Host().Network().ResourceManager().ViewTransient(func(s network.ResourceScope) error {
		c = s.Stat().NumConnsInbound
		return nil
	})
	return c
}

// sendStop plays a relay on one stream: it asks n to accept a connection
// from a made-up peer (circuit relay v2 STOP CONNECT) and waits for n's
// answer: OK, or (once the node refuses the connection) a reset. The
// stream stays open, as a relay's does for the connection it carries.
func sendStop(t *testing.T, h host.Host, n *node.Node) {
	t.Helper()
	s, err := h.NewStream(context.Background(), n.ID(), proto.ProtoIDv2Stop)
	if err != nil {
		t.Fatalf("STOP stream: %v", err)
	}
	t.Cleanup(func() { s.Reset() })
	_, pub, _ := crypto.GenerateEd25519Key(nil)
	fake, _ := peer.IDFromPublicKey(pub)
	msg := &pbv2.StopMessage{Type: pbv2.StopMessage_CONNECT.Enum(), Peer: util.PeerInfoToPeerV2(peer.AddrInfo{ID: fake})}
	if err := util.NewDelimitedWriter(s).WriteMsg(msg); err != nil {
		t.Fatalf("STOP: %v", err)
	}
	var resp pbv2.StopMessage
	util.NewDelimitedReader(s, 4096).ReadMsg(&resp)
}

// TestRelayStopFromStranger: a peer with no reservation relation plays a
// relay and asks the node to accept connections from made-up peers, then
// says nothing on them. The node refuses each one as the relay client
// hands it over, before the resource manager counts it as a handshake in
// progress; a relay the node reserved a slot on still relays to it.
func TestRelayStopFromStranger(t *testing.T) {
	n := testutil.NewNode(t)
	h := rawHost(t, "", nil)
	if err := h.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	const stops = 20
	for range stops {
		sendStop(t, h, n)
	}
	// Each relayed connection is refused or waits in the transient scope
	// for a handshake that never comes.
	waitFor(within(t), func() bool { return n.GateStats().RelayedRefused+uint64(transientInbound(n)) >= stops })
	if got, c := n.GateStats().RelayedRefused, transientInbound(n); got != stops || c != 0 {
		t.Fatalf("%d STOPs from a stranger: %d refused, the transient scope holds %d inbound connections", stops, got, c)
	}

	t.Run("reserved relay", func(t *testing.T) {
		r := testutil.NewNode(t, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
		b := testutil.NewNode(t, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
		a := testutil.NewNode(t)
		if err := b.Connect(context.Background(), r.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Reserve(context.Background(), r.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		circuit := ma.StringCast(r.Addrs()[0].String() + "/p2p-circuit")
		if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
			t.Fatalf("through the reserved relay: %v", err)
		}
		if got := b.GateStats().RelayedRefused; got != 0 {
			t.Fatalf("%d relayed connections refused", got)
		}
	})
}

// TestStreamsPerPeer: a connected peer opens more idle streams than its
// share on each protocol and holds them. The node keeps each protocol's
// per-peer bound (and the peer's share of all its inbound streams), so
// that a few identities cannot hold every stream of the node, and counts
// the streams it resets.
func TestStreamsPerPeer(t *testing.T) {
	n := testutil.NewNode(t)
	hold := func(s network.Stream) { io.Copy(io.Discard, s); s.Reset() }
	for _, p := range []protocol.ID{"/p2pmsg/endpoint/1.2.0", "/p2pmsg/socket/1.0.0", "/p2pmsg/pipe-resolver/1.0.0",
		"/p2pmsg/pipe-binding/1.0.0", "/test/other/1.0.0", "/test/other/2.0.0"} {
		n.Host().SetStreamHandler(p, hold)
	}
	const share = node.MaxInboundStreamsPerPeer
	for _, tc := range []struct {
		name   string
		protos []protocol.ID // opened in turn
		want   int
	}{
		{"ping", []protocol.ID{ping.ID}, 2}, // go-libp2p's default service limits
		{"relay STOP", []protocol.ID{proto.ProtoIDv2Stop}, node.MaxRelayStopStreamsPerPeer},
		{"endpoint", []protocol.ID{"/p2pmsg/endpoint/1.2.0"}, node.MaxEndpointStreamsPerPeer},
		{"socket", []protocol.ID{"/p2pmsg/socket/1.0.0"}, node.MaxSocketStreamsPerPeer},
		{"pipe resolver", []protocol.ID{"/p2pmsg/pipe-resolver/1.0.0"}, node.MaxPipeQueryStreamsPerPeer},
		{"pipe binding", []protocol.ID{"/p2pmsg/pipe-binding/1.0.0"}, node.MaxPipeQueryStreamsPerPeer},
		// Each under go-libp2p's default bound of one protocol, together
		// over the peer's share.
		{"the share", []protocol.ID{"/test/other/1.0.0", "/test/other/2.0.0"}, share},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdStreams(t, n, tc.protos, share+8, tc.want)
		})
	}
}

// TestSocketStreamsPerPeerRaised: on a node whose socket bound is
// raised (WithSocketStreamsPerPeer) above a peer's default share of all
// its inbound streams, a connected peer holds that many idle socket
// streams, as the share grows with the bound; more are reset, counted.
func TestSocketStreamsPerPeerRaised(t *testing.T) {
	const raised = node.MaxInboundStreamsPerPeer + 8
	n := testutil.NewNode(t, node.WithSocketStreamsPerPeer(raised))
	n.Host().SetStreamHandler("/p2pmsg/socket/1.0.0", func(s network.Stream) { io.Copy(io.Discard, s); s.Reset() })
	holdStreams(t, n, []protocol.ID{"/p2pmsg/socket/1.0.0"}, raised+8, raised)
}

// holdStreams has a new peer open opened idle streams on n, of protos
// in turn, and hold them: each ends refused or held, and the peer holds
// want of them, no more and no fewer.
func holdStreams(t *testing.T, n *node.Node, protos []protocol.ID, opened, want int) {
	t.Helper()
	h := rawHost(t, "", nil)
	if err := h.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	refused := n.GateStats().StreamsRefused
	for i := range opened {
		s, err := h.NewStream(context.Background(), n.ID(), protos[i%len(protos)])
		if err != nil {
			t.Fatal(err)
		}
		s.Write(nil) // sends the protocol header, then nothing
	}
	held := func() int { return inboundStreams(n, h.ID()) }
	// Each stream ends refused or held; one being refused is held until
	// it is reset.
	most := 0
	if !waitFor(within(t), func() bool {
		h := held()
		most = max(most, h)
		return n.GateStats().StreamsRefused-refused+uint64(h) >= uint64(opened) && h == want
	}) {
		t.Fatalf("%d streams opened: the peer held up to %d at once, %d at the end (want %d), %d refused",
			opened, most, held(), want, n.GateStats().StreamsRefused-refused)
	}
}

// TestProtocolIDs checks that the protocol IDs the node sizes limits
// for are the layers' own.
func TestProtocolIDs(t *testing.T) {
	for _, id := range []protocol.ID{endpoint.ProtocolID, socket.Protocol, pipe.ResolverProtocol, pipe.BindingProtocol} {
		if !slices.Contains(node.LimitedProtocols(), id) {
			t.Errorf("%s has no limits of its own in package node", id)
		}
	}
}

// TestHandshakesPerHost: one host opens raw TCP connections to the node
// and sends nothing on them (no identity, no handshake). Past
// MaxHandshakesPerHost in progress the node closes them at once,
// counted; other hosts still connect, and finished handshakes free their
// host's slots.
func TestHandshakesPerHost(t *testing.T) {
	n := testutil.NewNode(t, node.WithLoopbackHandshakeLimit())
	na, err := manet.ToNetAddr(n.Host().Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	const dialled = 5 * node.MaxHandshakesPerHost
	for range dialled {
		c, err := d.Dial("tcp", na.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	want := uint64(dialled - node.MaxHandshakesPerHost)
	// Each socket is refused or waits in the transient scope.
	waitFor(within(t), func() bool { return n.GateStats().HandshakesRefused+uint64(transientInbound(n)) >= dialled })
	if n.GateStats().HandshakesRefused != want || transientInbound(n) > node.MaxHandshakesPerHost {
		t.Fatalf("%d silent sockets from one host: %d refused (want %d), the transient scope holds %d inbound connections",
			dialled, n.GateStats().HandshakesRefused, want, transientInbound(n))
	}
	// Honest peers from another host (127.0.0.1), more of them one after
	// another than the bound: each finished handshake frees its slot.
	for i := range node.MaxHandshakesPerHost + 2 {
		if err := rawHost(t, "", nil).Connect(context.Background(), n.AddrInfo()); err != nil {
			t.Fatalf("honest peer %d: %v", i, err)
		}
	}
	if got := n.GateStats().HandshakesRefused; got != want {
		t.Fatalf("%d refused after honest peers connected, want %d", got, want)
	}
}

// TestHandshakeSlotsFromManyHosts: hosts 127.0.0.2, .3, … open raw
// TCP sockets to the node, each up to MaxHandshakesPerHost, until they
// hold every handshake slot (ten hosts for 79 slots), and send nothing.
// An honest peer from another host then connects: its connection
// displaces one of their handshakes, counted, while they keep the
// other slots.
func TestHandshakeSlotsFromManyHosts(t *testing.T) {
	n := testutil.NewNode(t, node.WithLoopbackHandshakeLimit())
	na, err := manet.ToNetAddr(n.Host().Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	slots := node.HandshakeSlots()
	for i := range slots {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i/node.MaxHandshakesPerHost))}}
		c, err := d.Dial("tcp", na.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	hosts := (slots + node.MaxHandshakesPerHost - 1) / node.MaxHandshakesPerHost
	if !waitFor(within(t), func() bool { return transientInbound(n) == slots }) {
		t.Fatalf("%d silent sockets from %d hosts: the transient scope holds %d inbound connections, want %d",
			slots, hosts, transientInbound(n), slots)
	}
	start := time.Now()
	err = rawHost(t, "", nil).Connect(within(t), n.AddrInfo())
	t.Logf("honest dial: %v after %v", err, time.Since(start))
	if err != nil {
		t.Fatalf("an honest peer's dial while %d silent sockets from %d hosts hold the handshake slots: %v", slots, hosts, err)
	}
	st := n.GateStats()
	if st.HandshakesDisplaced != 1 || st.HandshakesRefused != 0 || st.ConnsRefused != 0 {
		t.Fatalf("after the honest peer connected: %+v, want 1 handshake displaced, none refused", st)
	}
	if got := transientInbound(n); got != slots-1 {
		t.Fatalf("the silent sockets hold %d handshake slots, want %d (one displaced)", got, slots-1)
	}
}

// TestHandshakeDisplacesFullestHost: a lone silent socket from one host
// takes a handshake slot, then silent sockets from hosts holding
// MaxHandshakesPerHost each take the others; then 16 more hosts open
// one each. Every displaced handshake is one of the full hosts': the
// lone one stays, though it is the oldest.
func TestHandshakeDisplacesFullestHost(t *testing.T) {
	n := testutil.NewNode(t, node.WithLoopbackHandshakeLimit())
	// The sockets the node closed: the lone one, of the full hosts,
	// of the hosts that come last.
	var lone, full, last atomic.Int64
	silent(t, n, net.IPv4(127, 0, 1, 1), &lone)
	if !waitFor(within(t), func() bool { return transientInbound(n) == 1 }) {
		t.Fatal("the lone socket holds no handshake slot")
	}
	slots := node.HandshakeSlots()
	for i := range slots - 1 {
		silent(t, n, net.IPv4(127, 0, 0, byte(2+i/node.MaxHandshakesPerHost)), &full)
	}
	if !waitFor(within(t), func() bool { return transientInbound(n) == slots }) {
		t.Fatalf("the transient scope holds %d inbound connections, want %d", transientInbound(n), slots)
	}
	const more = 16
	for i := range more {
		silent(t, n, net.IPv4(127, 0, 2, byte(1+i)), &last)
	}
	// Each of the last displaces one handshake; the lone one's would
	// leave one of the full hosts' fewer closed. The wait ends before
	// the node's handshake timeout (15 s) closes every silent socket.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !waitFor(ctx, func() bool { return full.Load() == more }) || lone.Load() != 0 || last.Load() != 0 {
		t.Fatalf("%d sockets opened with every slot taken (%d displacements counted): closed %d of the full hosts', %d of the last, the lone one: %v",
			more, n.GateStats().HandshakesDisplaced, full.Load(), last.Load(), lone.Load() != 0)
	}
	if got := n.GateStats().HandshakesDisplaced; got != more {
		t.Fatalf("%d handshakes displaced, want %d", got, more)
	}
}

// TestConnsPerPeer: one identity connects to the node from more hosts
// (go-libp2p hosts sharing its key) than a peer may hold connections.
// The node refuses those beyond the peer's limit when their handshake
// names the peer, and counts them (GateStats.ConnsRefused).
func TestConnsPerPeer(t *testing.T) {
	n := testutil.NewNode(t)
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	var id peer.ID
	perPeer := node.ConnsInboundPerPeer()
	dialled := perPeer + 4
	for range dialled {
		h, err := libp2p.New(libp2p.Identity(key), libp2p.Transport(tcp.NewTCPTransport), libp2p.NoListenAddrs,
			libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableRelay(), libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		id = h.ID()
		h.Connect(context.Background(), n.AddrInfo()) // refused or not, as the node's limits decide
	}
	held := func() int { return len(n.Host().Network().ConnsToPeer(id)) }
	if !waitFor(within(t), func() bool { return n.GateStats().ConnsRefused == uint64(dialled-perPeer) && held() == perPeer }) {
		t.Fatalf("%d connections of one peer: %d held, %d refused (want %d and %d)", dialled, held(), n.GateStats().ConnsRefused,
			perPeer, dialled-perPeer)
	}
}

// TestRelayReservationSurvivesTrim: a node behind a relay holds a
// reservation, then has more connections than its connection manager
// keeps, all valued above the relay's. A trim must not close the
// connection to the relay: the relay would drop the reservation, and
// peers could no longer reach the node through it.
func TestRelayReservationSurvivesTrim(t *testing.T) {
	r := testutil.NewNode(t, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
	b := testutil.NewNode(t, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs), node.WithoutConnGrace())
	if err := b.Connect(context.Background(), r.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(context.Background(), r.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	// Peers the node values more than the relay (a pipe service tags
	// the peers sending on its pipes alike), past the high water mark.
	cm := b.Host().ConnManager()
	for range node.ConnHighWater {
		h := rawHost(t, "/ip4/127.0.0.1/tcp/0", nil)
		if err := b.Connect(context.Background(), peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
			t.Fatal(err)
		}
		cm.TagPeer(h.ID(), "test", 10)
	}
	cm.TrimOpenConns(context.Background())
	if got := len(b.Host().Network().ConnsToPeer(r.ID())); got == 0 {
		t.Fatalf("the trim closed the connection to the relay holding the node's reservation")
	}
	if n := len(b.Host().Network().Peers()); n > node.ConnLowWater+1 {
		t.Fatalf("after the trim the node is connected to %d peers, want at most %d", n, node.ConnLowWater+1)
	}
	a := testutil.NewNode(t)
	circuit := ma.StringCast(r.Addrs()[0].String() + "/p2p-circuit")
	if err := a.Connect(within(t), peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("through the reserved relay after the trim: %v", err)
	}
}

// TestRelayProtectionBounded: a relay that grants a reservation for a
// hundred years gets its connection protected from trims for an hour per
// Reserve at most, and not at all once it has closed the connection (it
// dropped the reservation with it).
func TestRelayProtectionBounded(t *testing.T) {
	rh := rawHost(t, "/ip4/127.0.0.1/tcp/0", nil)
	rc := relayv2.DefaultResources()
	rc.ReservationTTL = 100 * 365 * 24 * time.Hour
	rel, err := relayv2.New(rh, relayv2.WithResources(rc))
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	b := testutil.NewNode(t)
	ai := peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}
	if err := b.Connect(context.Background(), ai); err != nil {
		t.Fatal(err)
	}
	r, err := b.Reserve(context.Background(), ai)
	if err != nil {
		t.Fatal(err)
	}
	until := node.RelayProtectedUntil(b, rh.ID())
	if !until.After(time.Now()) || until.After(time.Now().Add(time.Hour)) {
		t.Fatalf("a reservation until %v protects the relay's connection until %v, want within the hour", r.Expiration, until)
	}
	cm := b.Host().ConnManager()
	if !cm.IsProtected(rh.ID(), node.RelayReservationTag) {
		t.Fatal("the relay's connection is not protected")
	}
	rh.Network().ClosePeer(b.ID())
	if !waitFor(within(t), func() bool { return !cm.IsProtected(rh.ID(), node.RelayReservationTag) }) {
		t.Fatal("the relay closed the connection (and dropped the reservation): still protected")
	}
}

// TestMemoryRefused: a connected peer opens more streams, and writes on
// them, than its memory limit on the node holds receive windows for
// (yamux reserves each stream's first window, 256 KiB, in its peer's
// scope). The node refuses the windows beyond the limit, counted
// (GateStats.MemoryRefused), and resets those streams only: the peer
// keeps its connection and the streams that fit.
func TestMemoryRefused(t *testing.T) {
	const windows = 4
	n := testutil.NewNode(t, node.WithPeerMemoryLimit(windows*256<<10))
	n.Host().SetStreamHandler("/test/hold/1.0.0", func(s network.Stream) { io.Copy(io.Discard, s); s.Reset() })
	h := rawHost(t, "", nil)
	if err := h.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ctx := network.WithNoDial(within(t), "test")
	const opened = 4 * windows
	for i := range opened {
		s, err := h.NewStream(ctx, n.ID(), "/test/hold/1.0.0")
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		t.Cleanup(func() { s.Reset() })
		s.Write([]byte("held")) // refused or not, as the node decides
	}
	held := func() int { return inboundStreams(n, h.ID()) }
	// Each stream ends refused or held (identify's streams take windows
	// too, and may be refused alike).
	if !waitFor(within(t), func() bool { return n.GateStats().MemoryRefused+uint64(held()) >= opened }) || held() == 0 {
		t.Fatalf("a peer opened %d streams of 256 KiB windows within a limit of %d: %d reservations refused, %d streams held",
			opened, windows, n.GateStats().MemoryRefused, held())
	}
	if c := n.Host().Network().Connectedness(h.ID()); c != network.Connected {
		t.Fatalf("refused stream windows ended the peer's connection (%v)", c)
	}
	// Every memory span the peer's streams took, and every window
	// reserved ahead of yamux, ends with the connection.
	h.Network().ClosePeer(n.ID())
	if !waitFor(within(t), func() bool { return node.LiveYamuxSpans(n) == 0 }) {
		t.Fatalf("%d yamux memory spans still live after the connection ended", node.LiveYamuxSpans(n))
	}
}

// inboundStreams is how many inbound streams of p the node's resource
// manager holds.
func inboundStreams(n *node.Node, p peer.ID) int {
	var c int
	n.Host().Network().ResourceManager().ViewPeer(p, func(s network.PeerScope) error {
		c = s.Stat().NumStreamsInbound
		return nil
	})
	return c
}
