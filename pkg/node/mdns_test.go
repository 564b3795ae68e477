package node_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
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
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/goleak"

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

func newSilentListener(t *testing.T) *silentListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
// 127.0.0.1:port over mDNS, perAnnouncement peers in each announcement.
func announce(t *testing.T, port, count, perAnnouncement int) {
	for i := 0; i*perAnnouncement < count; i++ {
		txts := make([]string, min(perAnnouncement, count-i*perAnnouncement))
		for j := range txts {
			txts[j] = fmt.Sprintf("dnsaddr=/ip4/127.0.0.1/tcp/%d/p2p/%s", port, testutil.FreshPeerID(t))
		}
		name := fmt.Sprintf("hostile-%d-%d", port, i)
		srv, err := zeroconf.RegisterProxy(name, node.MDNSServiceName, "local", 4001, name, []string{"127.0.0.1"}, txts, nil)
		if err != nil {
			t.Fatalf("announcing: %v", err)
		}
		t.Cleanup(srv.Shutdown)
	}
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
// node dials MaxMDNSDials of them at once, has MaxMDNSWaiting wait and
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
	announce(t, silent.port(), peers, perAnnouncement)
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
		return st.Dialled+st.Skipped+st.OverRate >= peers-node.MaxMDNSWaiting
	})
	st := n.MDNSStats()
	waitUntil(t, "the dials to reach the silent listener", func() bool {
		open, _ := silent.counts()
		return open >= min(int(st.Dialled), node.MaxMDNSDials)
	})
	open, most := silent.counts()
	t.Logf("%d peers announced: %d dialled, %d skipped; %d sockets open at the silent listener, at most %d at once",
		peers, st.Dialled, st.Skipped, open, most)
	if st.Dialled > node.MaxMDNSDials || most > node.MaxMDNSDials {
		t.Errorf("%d dials started, %d at once at the silent listener; want at most %d", st.Dialled, most, node.MaxMDNSDials)
	}
	if want := uint64(peers - node.MaxMDNSDials - node.MaxMDNSWaiting); st.Skipped != want {
		t.Errorf("%d announcements counted skipped, want %d", st.Skipped, want)
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

// TestMDNSDialsWaitAndDuplicates hands the node's mDNS handler peers as
// go-libp2p's mDNS would: made-up peers at a silent listener hold the
// MaxMDNSDials dial slots, MaxMDNSWaiting more wait, the next is skipped;
// a peer announced again while connected, being dialled or waiting is not
// dialled again nor counted; an honest peer waiting is dialled as soon as
// a slot frees (a silent socket hangs up).
func TestMDNSDialsWaitAndDuplicates(t *testing.T) {
	defer node.SetMDNSDialTimeout(time.Hour)()
	silent := newSilentListener(t)
	n := testutil.NewNode(t, node.WithLibp2pOptions(libp2p.SwarmOpts(swarm.WithDialTimeout(time.Hour), swarm.WithDialTimeoutLocal(time.Hour))))
	found, stats, closeNotifee := node.NewMDNSNotifee(n)
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
	var wg sync.WaitGroup
	for i := range dialling {
		dialling[i] = silentPeer()
		wg.Add(1)
		go func() { defer wg.Done(); found(dialling[i]) }()
	}
	defer wg.Wait()
	waitUntil(t, "the silent dials", func() bool {
		open, _ := silent.counts()
		return open == node.MaxMDNSDials
	})
	honest := testutil.NewNode(t)
	waiting := []peer.AddrInfo{honest.AddrInfo()}
	for len(waiting) < node.MaxMDNSWaiting {
		waiting = append(waiting, silentPeer())
	}
	for _, p := range waiting {
		found(p) // no slot: returns at once
	}
	found(dialling[0])
	found(waiting[1])
	if st := stats(); st != (node.MDNSStats{Dialled: node.MaxMDNSDials}) {
		t.Fatalf("with %d dials in progress and %d waiting: %+v, want %d dials, none skipped",
			node.MaxMDNSDials, node.MaxMDNSWaiting, st, node.MaxMDNSDials)
	}
	found(silentPeer())
	if st := stats(); st.Skipped != 1 {
		t.Fatalf("one peer found beyond the waiting ones: %+v, want 1 skipped", st)
	}

	silent.hangUp()
	waitUntil(t, "the first waiting peer to be dialled", func() bool {
		return n.Host().Network().Connectedness(honest.ID()) == network.Connected
	})
	waitUntil(t, "the next waiting peer to be dialled", func() bool {
		return stats().Dialled == node.MaxMDNSDials+2
	})
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
		t.Errorf("%+v: want %d dials (the silent ones, then the first two waiting, not the honest peer again), 1 skipped",
			st, node.MaxMDNSDials+2)
	}
}

// TestMDNSAnnouncedVictim: a LAN host announces 300 made-up peers over
// mDNS at the address of another host, which is no p2pmsg node and closes
// every connection at once, so that each dial fails at once and frees its
// slot. The node takes in MaxMDNSDials + MaxMDNSWaiting of them, then
// MDNSDialsPerSecond, and counts the others, over the rate or skipped
// while the dial slots and waiting places were full (it connected to the
// other host once for each of them, as fast as they came).
func TestMDNSAnnouncedVictim(t *testing.T) {
	if !runInNetns(t) {
		return
	}
	const peers = 300
	victim := newClosingListener(t)
	announce(t, int(victim.ln.Addr().(*net.TCPAddr).Port), peers, 30)
	start := time.Now()
	n, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"), node.WithMDNS())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitUntil(t, "the announcements", func() bool {
		st := n.MDNSStats()
		return st.Dialled+st.Skipped+st.OverRate == peers
	})
	elapsed := time.Since(start)
	st := n.MDNSStats()
	accepted := victim.accepted.Load()
	t.Logf("%d peers announced at another host, in %v: %+v; the other host accepted %d connections", peers, elapsed, st, accepted)
	// Peers are taken in at the rate from the start of the node on, and
	// one dial connects once to the peer's one address.
	most := node.MaxMDNSDials + node.MaxMDNSWaiting + int(elapsed.Seconds()*node.MDNSDialsPerSecond) + 1
	if int(st.Dialled) > most || int(accepted) > most {
		t.Errorf("%d dials, %d connections at the other host in %v; want at most %d", st.Dialled, accepted, elapsed, most)
	}
}
