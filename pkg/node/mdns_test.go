package node_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/zeroconf/v2"
	"github.com/miekg/dns"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"
	"golang.org/x/net/ipv4"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// netnsEnv marks a test binary run again inside a network namespace of its
// own (runInNetns).
const netnsEnv = "P2PMSG_TEST_NETNS"

// runInNetns runs t again in a child test binary inside a user and network
// namespace of its own (unshare -rn), whose only interface is loopback, up
// and flagged multicast, so that go-libp2p's mDNS can run there and reaches
// nothing outside. It returns true in the child, where the caller runs the
// scenario, and false in the parent once the child has passed; it skips t
// when no such namespace can be made here.
func runInNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) != "" {
		ifaces, err := net.Interfaces()
		if err != nil {
			t.Fatal(err)
		}
		if len(ifaces) != 1 || ifaces[0].Flags&net.FlagLoopback == 0 || ifaces[0].Flags&net.FlagMulticast == 0 {
			t.Fatalf("the namespace has interfaces %v, want only a multicast loopback", ifaces)
		}
		return true
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("no ip command to set up a network namespace: %v", err)
	}
	if out, err := exec.Command("unshare", "-rn", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a user and network namespace of its own (unshare -rn): %v %s", err, out)
	}
	args := []string{"-rn", "sh", "-c", `ip link set lo up && ip link set lo multicast on && exec "$0" "$@"`,
		os.Args[0], "-test.run=^" + t.Name() + "$", "-test.count=1", "-test.v"}
	if f := flag.Lookup("test.timeout"); f != nil {
		args = append(args, "-test.timeout="+f.Value.String())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("failed in its network namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatal("the test did not run in its network namespace")
	}
	return false
}

// silentListener accepts TCP connections on loopback and never answers:
// each accepted socket is held until its dialler closes it.
type silentListener struct {
	ln        net.Listener
	mu        sync.Mutex
	open, max int
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

func newSilentListener(t *testing.T) *silentListener { return newSilentListenerAt(t, "127.0.0.1") }

// newSilentListenerAt is newSilentListener on loopback address ip, a host
// of its own to the node's bounds by host.
func newSilentListenerAt(t *testing.T, ip string) *silentListener {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &silentListener{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.open++
			s.max = max(s.max, s.open)
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				var b [4096]byte
				for {
					if _, err := c.Read(b[:]); err != nil {
						break
					}
				}
				c.Close()
				s.mu.Lock()
				s.open--
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *silentListener) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// counts returns the sockets open now and the most open at once so far.
func (s *silentListener) counts() (open, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open, s.max
}

// hangUp closes one of the sockets accepted, failing its dial.
func (s *silentListener) hangUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
		return
	}
}

func (s *silentListener) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// closingListener accepts TCP connections on loopback and closes them at
// once, as a LAN host that is no p2pmsg node would refuse them.
type closingListener struct {
	ln       net.Listener
	accepted atomic.Int64
	done     chan struct{}
}

func newClosingListener(t *testing.T) *closingListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &closingListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-l.done })
	return l
}

// announce announces, as one LAN host would, count made-up peers at
// ip:port over mDNS, perAnnouncement peers in each announcement.
func announce(t *testing.T, ip string, port, count, perAnnouncement int) {
	for i := 0; i*perAnnouncement < count; i++ {
		ids := make([]peer.ID, min(perAnnouncement, count-i*perAnnouncement))
		for j := range ids {
			ids[j] = testutil.FreshPeerID(t)
		}
		announcePeers(t, fmt.Sprintf("hostile-%d-%d", port, i), ip, port, ids...)
	}
}

// announcePeers announces over mDNS, as go-libp2p's mDNS formats an
// announcement, the peers ids at ip:port, under the instance name name,
// until the test ends or the announcer is shut down.
func announcePeers(t *testing.T, name, ip string, port int, ids ...peer.ID) *zeroconf.Server {
	txts := make([]string, len(ids))
	for i, id := range ids {
		txts[i] = fmt.Sprintf("dnsaddr=/ip4/%s/tcp/%d/p2p/%s", ip, port, id)
	}
	srv, err := zeroconf.RegisterProxy(name, node.MDNSServiceName, "local", 4001, name, []string{"127.0.0.1"}, txts, nil)
	if err != nil {
		t.Fatalf("announcing: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// waitUntil polls cond until it holds; the deadline only keeps a broken
// node from hanging the test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after 2 minutes for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMDNSHostileAnnouncer: a LAN host announces 300 made-up peers over
// mDNS (10 announcements of 30 peers each, as go-libp2p's mDNS formats
// them), all at a loopback address that accepts TCP and never answers. The
// node dials MaxMDNSDials of them at once, has MaxMDNSWaitingPerHost wait and
// counts the others skipped (it started a goroutine and a dial for every
// one of them); its Close ends the dials and leaves no goroutine behind.
// It runs in a network namespace of its own (see runInNetns): go-libp2p's
// mDNS needs a multicast interface, and this machine's loopback may have
// none.
func TestMDNSHostileAnnouncer(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	const announcements, perAnnouncement = 10, 30
	const peers = announcements * perAnnouncement
	// Dials to silent listeners last until the node closes, so that
	// every socket open is a dial in progress.
	defer node.SetMDNSDialTimeout(time.Hour)()
	silent := newSilentListener(t)
	announce(t, "127.0.0.1", silent.port(), peers, perAnnouncement)
	ignore := goleak.IgnoreCurrent()

	n, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"),
		node.WithMDNS(), node.WithLibp2pOptions(libp2p.SwarmOpts(swarm.WithDialTimeout(time.Hour), swarm.WithDialTimeoutLocal(time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	// Every peer announced is dialled, waits or is skipped; no dial ends
	// before Close.
	waitUntil(t, "the announcements", func() bool {
		st := n.MDNSStats()
		return st.Dialled+st.Skipped+uint64(st.Waiting) == peers
	})
	st := n.MDNSStats()
	waitUntil(t, "the dials to reach the silent listener", func() bool {
		open, _ := silent.counts()
		return open >= min(int(st.Dialled), node.MaxMDNSDials)
	})
	open, most := silent.counts()
	t.Logf("%d peers announced: %d dialled, %d waiting, %d skipped; %d sockets open at the silent listener, at most %d at once",
		peers, st.Dialled, st.Waiting, st.Skipped, open, most)
	if st.Dialled > node.MaxMDNSDials || most > node.MaxMDNSDials {
		t.Errorf("%d dials started, %d at once at the silent listener; want at most %d", st.Dialled, most, node.MaxMDNSDials)
	}
	if want := uint64(peers - node.MaxMDNSDials - node.MaxMDNSWaitingPerHost); st.Skipped != want || st.Waiting != node.MaxMDNSWaitingPerHost {
		t.Errorf("%d announcements counted skipped, %d waiting; want %d, %d", st.Skipped, st.Waiting, want, node.MaxMDNSWaitingPerHost)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	waitUntil(t, "the dials to end at Close", func() bool {
		open, _ := silent.counts()
		return open == 0
	})
	goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// slowMDNSDialer is a new node's mDNS handler, without mDNS itself
// (found, stats, and closeNotifee, which ends its dials), whose dials
// last an hour, until closed, and a silent listener to announce made-up
// peers at.
func slowMDNSDialer(t *testing.T) (n *node.Node, silent *silentListener, found func(peer.AddrInfo), stats func() node.MDNSStats, closeNotifee func()) {
	t.Helper()
	defer node.SetMDNSDialTimeout(time.Hour)() // read when the handler is made
	silent = newSilentListener(t)
	n = testutil.NewNode(t, node.WithLibp2pOptions(libp2p.SwarmOpts(swarm.WithDialTimeout(time.Hour), swarm.WithDialTimeoutLocal(time.Hour))))
	found, stats, closeNotifee = node.NewMDNSNotifee(n)
	return n, silent, found, stats, closeNotifee
}

// TestMDNSDialsWaitAndDuplicates hands the node's mDNS handler peers as
// go-libp2p's mDNS would: made-up peers at a silent listener hold the
// MaxMDNSDials dial slots, MaxMDNSWaitingPerHost more of that host wait,
// the next is skipped, and one announced at another host waits; a peer
// announced again while connected, being dialled or waiting is not
// dialled again nor counted; as slots free (silent sockets hang up), the
// hosts are served in turn: the first waiting peer of the first host (an
// honest one), then the one of the other host, before the others of the
// first.
func TestMDNSDialsWaitAndDuplicates(t *testing.T) {
	n, silent, found, stats, closeNotifee := slowMDNSDialer(t)
	var wg sync.WaitGroup
	defer wg.Wait() // after closeNotifee ends the dials
	closed := false
	defer func() {
		if !closed {
			closeNotifee()
		}
	}()
	silentAddr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", silent.port()))
	if err != nil {
		t.Fatal(err)
	}
	silentPeer := func() peer.AddrInfo {
		return peer.AddrInfo{ID: testutil.FreshPeerID(t), Addrs: []ma.Multiaddr{silentAddr}}
	}

	dialling := make([]peer.AddrInfo, node.MaxMDNSDials)
	for i := range dialling {
		dialling[i] = silentPeer()
		wg.Add(1)
		go func() { defer wg.Done(); found(dialling[i]) }()
	}
	waitUntil(t, "the silent dials", func() bool {
		open, _ := silent.counts()
		return open == node.MaxMDNSDials
	})
	honest := testutil.NewNode(t)
	waiting := []peer.AddrInfo{honest.AddrInfo()}
	for len(waiting) < node.MaxMDNSWaitingPerHost {
		waiting = append(waiting, silentPeer())
	}
	for _, p := range waiting {
		found(p) // no slot: returns at once
	}
	found(dialling[0])
	found(waiting[1])
	if st := stats(); st != (node.MDNSStats{Dialled: node.MaxMDNSDials, Waiting: node.MaxMDNSWaitingPerHost}) {
		t.Fatalf("with %d dials in progress and %d waiting: %+v, want %d dials, none skipped",
			node.MaxMDNSDials, node.MaxMDNSWaitingPerHost, st, node.MaxMDNSDials)
	}
	found(silentPeer())
	if st := stats(); st.Skipped != 1 {
		t.Fatalf("one peer found beyond the waiting ones of its host: %+v, want 1 skipped", st)
	}
	other := newSilentListenerAt(t, "127.0.0.2")
	otherAddr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/127.0.0.2/tcp/%d", other.port()))
	if err != nil {
		t.Fatal(err)
	}
	found(peer.AddrInfo{ID: testutil.FreshPeerID(t), Addrs: []ma.Multiaddr{otherAddr}})
	if st := stats(); st.Skipped != 1 || st.Waiting != node.MaxMDNSWaitingPerHost+1 {
		t.Fatalf("one peer found at another host: %+v, want it waiting", st)
	}

	silent.hangUp()
	waitUntil(t, "the first waiting peer to be dialled", func() bool {
		return n.Host().Network().Connectedness(honest.ID()) == network.Connected
	})
	waitUntil(t, "the other host's peer to be dialled", func() bool {
		open, _ := other.counts()
		return open == 1
	})
	if st := stats(); st.Dialled != node.MaxMDNSDials+2 {
		t.Errorf("%+v: want %d dials, the honest peer's and the other host's after the silent ones", st, node.MaxMDNSDials+2)
	}
	found(honest.AddrInfo())
	if _, most := silent.counts(); most > node.MaxMDNSDials {
		t.Errorf("%d dials at once at the silent listener, want at most %d", most, node.MaxMDNSDials)
	}
	closeNotifee()
	closed = true
	waitUntil(t, "the dials to end", func() bool {
		open, _ := silent.counts()
		return open == 0
	})
	if st := stats(); st != (node.MDNSStats{Dialled: node.MaxMDNSDials + 2, Skipped: 1}) {
		t.Errorf("%+v: want %d dials (the silent ones, the honest peer, the other host's, not the honest peer again), 1 skipped",
			st, node.MaxMDNSDials+2)
	}
}

// TestMDNSAnnouncedVictim: a LAN host announces 300 made-up peers over
// mDNS at the address of another host, which is no p2pmsg node and closes
// every connection at once, so that each dial fails at once and frees its
// slot. The node dials ConnHighWater of them at once, then
// MDNSDialsPerSecond, has at most MaxMDNSWaitingPerHost wait meanwhile and
// counts the others skipped (it connected to the other host once for each
// of them, as fast as they came).
func TestMDNSAnnouncedVictim(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	const peers = 300
	victim := newClosingListener(t)
	announce(t, "127.0.0.1", int(victim.ln.Addr().(*net.TCPAddr).Port), peers, 30)
	start := time.Now()
	n, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"), node.WithMDNS())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitUntil(t, "the announcements", func() bool {
		st := n.MDNSStats()
		return st.Dialled+st.Skipped+uint64(st.Waiting) == peers
	})
	elapsed := time.Since(start)
	st := n.MDNSStats()
	accepted := victim.accepted.Load()
	t.Logf("%d peers announced at another host, in %v: %+v; the other host accepted %d connections", peers, elapsed, st, accepted)
	// Dials start at the rate from the start of the node on, and one dial
	// connects once to the peer's one address.
	most := node.ConnHighWater + int(elapsed.Seconds()*node.MDNSDialsPerSecond) + 1
	if int(st.Dialled) > most || int(accepted) > most {
		t.Errorf("%d dials, %d connections at the other host in %v; want at most %d", st.Dialled, accepted, elapsed, most)
	}
	// Waiting: for a slot, at most a host's share; for the rate, at most
	// one peer a slot.
	if st.Waiting > node.MaxMDNSWaitingPerHost+node.MaxMDNSDials {
		t.Errorf("%d peers of one host waiting, want at most %d", st.Waiting, node.MaxMDNSWaitingPerHost+node.MaxMDNSDials)
	}
}

// TestMDNSFloodHidesNoHonestPeer: a LAN host announces 300 made-up peers
// over mDNS at its address (a loopback one of its own), where TCP is
// accepted and never answered; node A starts and hears them all, then
// node B starts on another host. go-libp2p's mDNS tells A of B once (and
// again only when B's announcement expires, after 3,200 s), while the
// flood holds every dial slot: A keeps B waiting as the first peer of
// its host and dials it as soon as a slot frees, and A and B connect
// (they never did while the flood took all waiting places). It runs in a
// network namespace of its own (see runInNetns).
func TestMDNSFloodHidesNoHonestPeer(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	const peers = 300
	silent := newSilentListenerAt(t, "127.0.0.2")
	announce(t, "127.0.0.2", silent.port(), peers, 30)
	ignore := goleak.IgnoreCurrent()

	start := func() *node.Node {
		n, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"), node.WithMDNS())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := start()
	defer a.Close()
	waitUntil(t, "A to hear the made-up peers", func() bool {
		st := a.MDNSStats()
		return st.Dialled+st.Skipped+uint64(st.Waiting) == peers
	})
	flooded := a.MDNSStats()
	b := start()
	defer b.Close()
	waitUntil(t, "A and B to connect", func() bool {
		return a.Host().Network().Connectedness(b.ID()) == network.Connected
	})
	open, _ := silent.counts()
	t.Logf("A, with the flood in: %+v; A, B connected: %+v, %+v; silent listener: %d sockets open",
		flooded, a.MDNSStats(), b.MDNSStats(), open)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestMDNSWaitingShared hands the node's mDNS handler, its dial slots
// held by made-up peers at a silent listener, MaxMDNSWaitingPerHost
// peers of each of MaxMDNSWaiting / MaxMDNSWaitingPerHost hosts: all
// places are taken. A peer of a host with none waiting takes the place of
// the latest peer of a host with the most, counted skipped; a peer of a
// host with the most waiting is skipped.
func TestMDNSWaitingShared(t *testing.T) {
	_, silent, found, stats, closeNotifee := slowMDNSDialer(t)
	var wg sync.WaitGroup
	defer wg.Wait() // after closeNotifee ends the dials
	defer closeNotifee()
	at := func(addr string) peer.AddrInfo {
		return peer.AddrInfo{ID: testutil.FreshPeerID(t), Addrs: []ma.Multiaddr{ma.StringCast(addr)}}
	}
	for range node.MaxMDNSDials {
		p := at(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", silent.port()))
		wg.Add(1)
		go func() { defer wg.Done(); found(p) }()
	}
	waitUntil(t, "the silent dials", func() bool {
		open, _ := silent.counts()
		return open == node.MaxMDNSDials
	})
	// Addresses nobody listens at: the peers only wait.
	for h := range node.MaxMDNSWaiting / node.MaxMDNSWaitingPerHost {
		for range node.MaxMDNSWaitingPerHost {
			found(at(fmt.Sprintf("/ip4/127.0.1.%d/tcp/1", h)))
		}
	}
	if st := stats(); st != (node.MDNSStats{Dialled: node.MaxMDNSDials, Waiting: node.MaxMDNSWaiting}) {
		t.Fatalf("%+v, want %d dials, %d waiting", st, node.MaxMDNSDials, node.MaxMDNSWaiting)
	}
	found(at("/ip4/127.0.2.1/tcp/1"))
	if st := stats(); st != (node.MDNSStats{Dialled: node.MaxMDNSDials, Skipped: 1, Waiting: node.MaxMDNSWaiting}) {
		t.Fatalf("a peer of a host with none waiting: %+v, want it waiting in another's place, 1 skipped", st)
	}
	found(at("/ip4/127.0.1.1/tcp/1"))
	if st := stats(); st.Skipped != 2 || st.Waiting != node.MaxMDNSWaiting {
		t.Fatalf("a peer of a host with the most waiting: %+v, want it skipped", st)
	}
}

// TestMDNSSkippedPeerFoundAgain: a LAN host announces 60 made-up peers
// over mDNS at a listener of B's host (127.0.0.3) that accepts TCP and
// does not answer; node A hears them, dials 8, has 32 of B's host wait
// and skips 20. Honest peer B, listening at another port of that host,
// announces itself while they still hold A's dials and waiting places: A
// skips it too, and go-libp2p's mDNS would not tell A of B again before
// B's announcement expires (3,200 s). Then the silent listener closes
// (the made-up peers' dials fail): A rebuilds its mDNS service after the
// skips, is told of every peer again, dials none of those whose dial
// failed, and connects to B. B listens from the start, so that no dial to
// it can fail (one that did would keep A from dialling it at those
// addresses for MDNSRetryFailedAfter). It runs in a network namespace of
// its own (see runInNetns).
func TestMDNSSkippedPeerFoundAgain(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	const peers = 60
	// Dials to the silent listener last until it closes, so that A's
	// waiting places for B's host stay taken until then; rebuilds a
	// second after a skip rather than a minute.
	defer node.SetMDNSDialTimeout(time.Hour)()
	defer node.SetMDNSRebuild(time.Second, time.Hour)()
	b, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.3/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bPort, err := b.Host().Addrs()[0].ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	silent := newSilentListenerAt(t, "127.0.0.3")
	announce(t, "127.0.0.3", silent.port(), peers, 30)
	ignore := goleak.IgnoreCurrent()

	a, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"),
		node.WithMDNS(), node.WithLibp2pOptions(libp2p.SwarmOpts(swarm.WithDialTimeout(time.Hour), swarm.WithDialTimeoutLocal(time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	waitUntil(t, "A to hear the made-up peers", func() bool {
		st := a.MDNSStats()
		return st.Dialled+st.Skipped+uint64(st.Waiting) >= peers
	})
	flooded := a.MDNSStats()
	port, err := strconv.Atoi(bPort)
	if err != nil {
		t.Fatal(err)
	}
	bAnnouncer := announcePeers(t, "honest-b", "127.0.0.3", port, b.ID())
	// Without rebuilds, a skip more is B's.
	waitUntil(t, "A to skip B or rebuild", func() bool {
		return a.MDNSStats().Skipped > peers-node.MaxMDNSDials-node.MaxMDNSWaitingPerHost
	})
	skipped := a.MDNSStats()
	silent.close()
	waitUntil(t, "A to dial B", func() bool {
		return a.Host().Network().Connectedness(b.ID()) == network.Connected
	})
	t.Logf("A, the flood heard: %+v; B announced: %+v; A and B connected: %+v", flooded, skipped, a.MDNSStats())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	bAnnouncer.Shutdown()
	goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestMDNSFailedNotRedialled hands the node's mDNS handler honest peer
// B announced at an address where its dial fails (a listener that closes
// every connection at once): told of B there again, the node does not
// dial it (a rebuild of the mDNS service tells of every peer again);
// told of B at its own address, the node dials it there and connects.
func TestMDNSFailedNotRedialled(t *testing.T) {
	n := testutil.NewNode(t)
	found, stats, closeNotifee := node.NewMDNSNotifee(n)
	defer closeNotifee()
	closing := newClosingListener(t)
	b := testutil.NewNode(t)
	elsewhere := peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", closing.ln.Addr().(*net.TCPAddr).Port))}}
	found(elsewhere) // dials in this goroutine: returns when the dial has failed
	if n.Host().Network().Connectedness(b.ID()) == network.Connected {
		t.Fatal("connected to B at an address that closes every connection")
	}
	found(elsewhere)
	if st := stats(); st.Dialled != 1 {
		t.Fatalf("told of B again at the address where its dial failed: %+v, want 1 dial", st)
	}
	found(b.AddrInfo())
	if n.Host().Network().Connectedness(b.ID()) != network.Connected {
		t.Fatal("not connected to B told of at its own address")
	}
	if st := stats(); st.Dialled != 2 || st.Skipped != 0 {
		t.Errorf("%+v, want 2 dials, none skipped", st)
	}
}

// floodRecords sends, as a LAN host would without running an announcer,
// unsolicited mDNS answers naming count services of the node's mDNS
// service type (perPacket in each), under fresh instance names, each
// with a TTL of 136 years (the most a record can name) and no peer in its
// TXT record.
func floodRecords(t *testing.T, prefix string, count, perPacket int) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	conn := ipv4.NewPacketConn(c)
	if err := conn.SetMulticastInterface(lo); err != nil {
		t.Fatal(err)
	}
	group := &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}
	const ttl = math.MaxUint32
	service := node.MDNSServiceName + ".local."
	for i := 0; i < count; i += perPacket {
		m := new(dns.Msg)
		m.Response = true
		m.Compress = true
		for j := i; j < min(count, i+perPacket); j++ {
			instance := fmt.Sprintf("%s-%d.%s", prefix, j, service)
			target := fmt.Sprintf("%s-%d.local.", prefix, j)
			m.Answer = append(m.Answer,
				&dns.PTR{Hdr: dns.RR_Header{Name: service, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: instance},
				&dns.SRV{Hdr: dns.RR_Header{Name: instance, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl}, Port: 4001, Target: target},
				&dns.TXT{Hdr: dns.RR_Header{Name: instance, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: []string{"nopeer=" + strings.Repeat("x", 200)}},
				&dns.A{Hdr: dns.RR_Header{Name: target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IPv4(127, 0, 0, 9)})
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteTo(b, nil, group); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the receivers' socket buffers are not flooded
	}
}

// TestMDNSRecordFloodForgotten: a LAN host sends unsolicited mDNS
// answers naming 20,000 services, each with a 136-year TTL and no peer,
// then stops. go-libp2p's mDNS (zeroconf) keeps every record for the TTL
// the announcer named; the node drops them when it rebuilds its mDNS
// service (every MDNSRefreshEvery; the test shortens it), and its live
// heap comes back to within 2 MiB of what it was (the records cost 11). A browser of the test's own tells when the records have
// arrived. It runs in a network namespace of its own (see runInNetns).
func TestMDNSRecordFloodForgotten(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	const records = 20000
	defer node.SetMDNSRebuild(time.Hour, 2*time.Second)()
	n := testutil.NewNode(t, node.WithMDNS())
	base := testutil.LiveHeap()

	ctx, cancel := context.WithCancel(context.Background())
	entries := make(chan *zeroconf.ServiceEntry, 100)
	browsed := make(chan error, 1)
	go func() { browsed <- zeroconf.Browse(ctx, node.MDNSServiceName, "local", entries) }()
	var heard atomic.Int64
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		seen := map[string]bool{}
		for e := range entries {
			if !seen[e.Instance] {
				seen[e.Instance] = true
				heard.Add(1)
			}
		}
	}()
	// Again for the packets lost, until the browser heard them all.
	for round := 0; heard.Load() < records; round++ {
		if round == 10 {
			t.Fatalf("the test's browser heard %d of %d records", heard.Load(), records)
		}
		floodRecords(t, "flood", records, 50)
		time.Sleep(time.Second)
	}
	cancel()
	<-drained
	if err := <-browsed; err != nil {
		t.Fatal(err)
	}
	// 20,000 records held cost some 11 MiB; the first rebuild after the
	// flood drops them.
	heap := testutil.LiveHeap() - base
	for deadline := time.Now().Add(2 * time.Minute); heap > 2<<20; heap = testutil.LiveHeap() - base {
		if time.Now().After(deadline) {
			t.Fatalf("live heap +%d KiB 2 minutes after the flood (%+v), want the records dropped (under 2 MiB)", heap>>10, n.MDNSStats())
		}
		time.Sleep(time.Second)
	}
	t.Logf("%d records of 136-year TTL heard: live heap +%d KiB (%+v)", records, heap>>10, n.MDNSStats())
}
