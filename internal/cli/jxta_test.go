package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
)

func advID(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := adv.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID.String()
}

// TestJXSESendRecv: `send --peer tcp://…` sends on a pipe a live JXSE 2.7
// peer binds, and `recv --jxta tcp://…` receives on a pipe what the JXSE
// peer sends, both as JXSE applications would see another JXSE peer.
func TestJXSESendRecv(t *testing.T) {
	peer := jxse.StartPeer(t, jxse.PeerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	toJXSE := newPipeAdv(t, "unicast")
	if err := peer.Command("pipelisten " + advID(t, toJXSE)); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "send", "--pipe", toJXSE, "--peer", peer.Addr(), "--ns", "study", "--elem", "text=hello from the cli")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if got, err := peer.Next(ctx); err != nil || got.Text != "hello from the cli" {
		t.Fatalf("JXSE got %+v, %v", got, err)
	}

	toCLI := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", toCLI, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0", "--count", "1")
	addr, pid := recv.jxtaAddr()
	if addr == "" || !strings.HasPrefix(pid, "urn:jxta:cbid-") {
		t.Fatalf("recv announced %q, want a jxta tcp:// address and peer ID", recv.addrs)
	}
	// Tell JXSE where the peer is, as a JXSE application must for a peer
	// that has not connected to it.
	if err := peer.Command("route " + pid + " " + addr); err != nil {
		t.Fatal(err)
	}
	if err := peer.Command("pipesend " + advID(t, toCLI) + " " + pid + " hello from jxse"); err != nil {
		t.Fatal(err)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
	out := recv.stdout.String()
	if !strings.Contains(out, "hello from jxse") || !strings.Contains(out, "from "+peer.ID+" (jxta)") {
		t.Fatalf("recv printed %q", out)
	}
}

// TestJXSEBridge: `p2pmsg bridge` relays one pipe between a live JXSE
// peer and a p2pmsg peer that speaks only libp2p, both ways, with JXSE's
// default signing and with CBJX disabled (--jxta-unsigned).
func TestJXSEBridge(t *testing.T) {
	for _, unsigned := range []bool{false, true} {
		name := "signed"
		if unsigned {
			name = "unsigned"
		}
		t.Run(name, func(t *testing.T) { testJXSEBridge(t, unsigned) })
	}
}

func testJXSEBridge(t *testing.T, unsigned bool) {
	peer := jxse.StartPeer(t, jxse.PeerOptions{Unsigned: unsigned})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := newPipeAdv(t, "unicast")
	pid := advID(t, p)
	if err := peer.Command("pipelisten " + pid); err != nil {
		t.Fatal(err)
	}
	recv := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--count", "1")
	args := []string{"bridge", "--pipe", p, "--jxta", "tcp://127.0.0.1:0", "--listen", loopback,
		"--p2p-peer", recv.addrs[0], "--jxse-peer", peer.Addr(), "--count", "2"}
	if unsigned {
		args = append(args, "--jxta-unsigned")
	}
	bridge := start(t, nil, args...)
	bridgeP2P := bridge.p2pAddr()
	bridgeJXTA, bridgeID := bridge.jxtaAddr()
	if bridgeJXTA == "" || bridgeP2P == "" {
		t.Fatalf("bridge announced %q", bridge.addrs)
	}

	// JXSE → bridge → libp2p-only peer.
	if err := peer.Command("route " + bridgeID + " " + bridgeJXTA); err != nil {
		t.Fatal(err)
	}
	if err := peer.Command("pipesend " + pid + " " + bridgeID + " from jxse"); err != nil {
		t.Fatal(err)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
	if out := recv.stdout.String(); !strings.Contains(out, "from jxse") {
		t.Fatalf("recv printed %q", out)
	}

	// libp2p peer → bridge → JXSE.
	r := run(t, nil, "send", "--pipe", p, "--peer", bridgeP2P, "--ns", "study", "--elem", "text=from libp2p")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if got, err := peer.Next(ctx); err != nil || got.Text != "from libp2p" || got.Param != pid {
		t.Fatalf("JXSE got %+v, %v", got, err)
	}
	if code := bridge.wait(t); code != 0 {
		t.Fatalf("bridge exit %d: %s", code, bridge.stderr)
	}
	if out := bridge.stdout.String(); strings.Count(out, "forwarded message") != 2 {
		t.Fatalf("bridge printed %q", out)
	}
}

// TestJXSESockets: `send --socket --peer tcp://…` streams stdin to a live
// JXSE 2.7 peer's JxtaServerSocket, and `recv --socket --jxta tcp://…`
// accepts a JXSE JxtaSocket and copies it to stdout, byte for byte.
func TestJXSESockets(t *testing.T) {
	peer := jxse.StartPeer(t, jxse.PeerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 1 << 20
	data := jxse.Pattern(n)
	sum := sha256.Sum256(data)

	toJXSE := newPipeAdv(t, "unicast")
	if err := peer.Command("socklisten " + advID(t, toJXSE) + " sink"); err != nil {
		t.Fatal(err)
	}
	r := run(t, data, "send", "--socket", "--pipe", toJXSE, "--peer", peer.Addr())
	if r.code != 0 {
		t.Fatalf("send --socket: exit %d: %s", r.code, r.stderr)
	}
	for {
		got, err := peer.Next(ctx)
		if err != nil {
			t.Fatalf("JXSE read nothing: %v", err)
		}
		if got.Kind == "SOCK" {
			if want := fmt.Sprintf("%d %x", n, sum); got.Text != want {
				t.Fatalf("JXSE read %q, want %q", got.Text, want)
			}
			break
		}
	}

	toCLI := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--socket", "--pipe", toCLI, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0")
	addr, pid := recv.jxtaAddr()
	if err := peer.Command("route " + pid + " " + addr); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Query(fmt.Sprintf("sockconnect %s %s %d send", advID(t, toCLI), pid, n)); err != nil {
		t.Fatal(err)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv --socket exit %d: %s", code, recv.stderr)
	}
	if out := recv.stdout.Bytes(); !bytes.Equal(out, data) {
		t.Fatalf("recv --socket wrote %d bytes, not the %d JXSE sent", len(out), n)
	}
}

// TestJXTAUsageErrors: the JXTA flags refuse what cannot work, at once,
// as usage errors.
func TestJXTAUsageErrors(t *testing.T) {
	a, secure := newPipeAdv(t, "unicast"), newPipeAdv(t, "secure")
	for _, args := range [][]string{
		{"recv", "--pipe", a, "--jxta", "udp://127.0.0.1:1"},
		{"recv", "--pipe", secure, "--jxta", "tcp://127.0.0.1:0"},
		{"send", "--pipe", a, "--peer", "tcp://127.0.0.1:1", "--elem", "x=y", "--encode", "zstd"},
		{"send", "--pipe", secure, "--peer", "tcp://127.0.0.1:1", "--elem", "x=y"},
		{"send", "--pipe", a, "--peer", "tcp://127.0.0.1:1", "--elem", "x=y", "--verbose"},
		{"bridge", "--pipe", a, "--jxta", "tcp://127.0.0.1:0"},
		{"bridge", "--pipe", a, "--jxta", "nowhere", "--jxse-peer", "tcp://127.0.0.1:1"},
		{"bridge", "--pipe", a, "--jxta", "tcp://127.0.0.1:0", "--jxse-peer", "udp://x:1"},
		{"bridge", "--pipe", a, "--jxta", "tcp://127.0.0.1:0", "--p2p-peer", "/ip4/127.0.0.1/tcp/1"},
		// JXTA-only flags without --jxta were ignored in silence.
		{"recv", "--pipe", a, "--jxta-unsigned"},
		{"send", "--pipe", a, "--peer", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWPYRajNizwwqjizjMSmfSQsyRoRzSfgF5yZfbs2TyZTZu", "--elem", "x=y", "--jxta-unsigned"},
		{"recv", "--pipe", a, "--jxta-public", "tcp://192.0.2.1:9711"},
		{"recv", "--pipe", a, "--jxta", "tcp://127.0.0.1:0", "--jxta-public", "tcp://:9711"},       // no host
		{"recv", "--pipe", a, "--jxta", "tcp://127.0.0.1:0", "--jxta-public", "tcp://192.0.2.1:0"}, // no port
		{"bridge", "--pipe", a, "--jxta", "tcp://127.0.0.1:0", "--jxse-peer", "tcp://127.0.0.1:1", "--jxta-public", "/ip4/192.0.2.1/tcp/1"},
	} {
		r := run(t, nil, args...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage): %s", args, r.code, r.stderr)
		}
	}
}

// TestLabRTTJXTA: `lab rtt` measures p2pmsg with a live JXSE 2.7 peer at
// every JXTA layer, beside JXSE against itself, in one study.
func TestLabRTTJXTA(t *testing.T) {
	jxse.Require(t)
	layers := "jxta-endpoint,jxse-endpoint,jxta-pipe,jxse-pipe,jxta-socket,jxse-socket"
	r := run(t, nil, "lab", "rtt", "--layer", layers, "--sizes", "1,1K", "--warmup", "5", "--runs", "3", "--pairs", "2",
		"--baseline", "jxse-endpoint", "--json")
	if r.code != 0 {
		t.Fatalf("lab rtt: exit %d: %s", r.code, r.stderr)
	}
	seen := map[string]int{}
	for _, row := range jsonRows(t, r.stdout, 12, "layer", "size", "rtt_ns", "ratio_to_baseline") {
		if row["rtt_ns"].(float64) <= 0 {
			t.Errorf("row %v: no round trip time", row)
		}
		seen[row["layer"].(string)]++
	}
	for _, l := range strings.Split(layers, ",") {
		if seen[l] != 2 {
			t.Errorf("layer %s: %d rows, want 2", l, seen[l])
		}
	}
}

// TestBridgeCountRefusesTheRest: a libp2p peer sends 3 messages to
// `bridge --count 1`, whose other side is a p2pmsg JXTA peer. The bridge
// forwards one and stops; the others are refused or never read, so send
// fails — a bridge that queued them acknowledged all three and dropped
// two in silence. Those it refused it counts (exit 1).
func TestBridgeCountRefusesTheRest(t *testing.T) {
	p := newPipeAdv(t, "unicast")
	sink := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0")
	sinkJXTA, _ := sink.jxtaAddr()
	bridge := start(t, nil, "bridge", "--pipe", p, "--jxta", "tcp://127.0.0.1:0", "--listen", loopback,
		"--jxse-peer", sinkJXTA, "--count", "1")
	bridgeP2P := bridge.p2pAddr()
	r := run(t, nil, "send", "--pipe", p, "--peer", bridgeP2P, "--count", "3", "--elem", "text=hi")
	code := bridge.wait(t)
	fwd := strings.Count(bridge.stdout.String(), "forwarded message")
	t.Logf("send: exit %d %q; bridge: exit %d, %d forwarded, stderr %q", r.code, r.stderr, code, fwd, bridge.stderr)
	// A message the bridge's handler took after the loop's last is
	// refused, reported and counted (exit 1); whether one came in time
	// is the scheduler's.
	if fwd != 1 || code != 0 && code != 1 {
		t.Fatalf("bridge --count 1: exit %d, %d forwarded", code, fwd)
	}
	checkBridgeCount(t, bridge.stderr, "p2pmsg: ")
	if r.code == 0 {
		t.Fatal("send exited 0: the bridge acknowledged three messages and forwarded one")
	}
}

// TestBridgeCountsUnforwarded: a bridge given no JXSE peer cannot forward
// what libp2p peers send it; it refuses each message back, so each send
// exits 1 naming why (a bridge that acknowledged first had send exit 0),
// and the bridge, interrupted, exits 130 counting them ("4 messages"). Its
// lines about them are one per sender every 10 s, the others counted: the
// four of one sender take two lines (before, one each).
func TestBridgeCountsUnforwarded(t *testing.T) {
	p := newPipeAdv(t, "unicast")
	peer := "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY" // never reached
	bridge := start(t, nil, "bridge", "--pipe", p, "--jxta", "tcp://127.0.0.1:0", "--listen", loopback, "--p2p-peer", peer)
	bridgeP2P := bridge.p2pAddr()
	key := filepath.Join(t.TempDir(), "sender.key") // one identity for the four
	// The loop fails a message with no peer for its direction at once,
	// and the bridge refuses it back: each send learns it went nowhere.
	for range 4 {
		r := run(t, nil, "send", "--pipe", p, "--peer", bridgeP2P, "--key", key, "--elem", "text=hi")
		if want := "the bridge could not forward it: no peer given for this direction"; r.code != 1 || !strings.Contains(string(r.stderr), want) {
			t.Fatalf("send: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
		}
	}
	if err := bridge.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code := bridge.wait(t)
	want := "p2pmsg: interrupted by SIGINT: bridge: 4 messages could not be forwarded (see above)"
	if code != 130 || !slices.Contains(bridge.stderr, want) {
		t.Fatalf("bridge: exit %d, stderr %q; want 130 and %q", code, bridge.stderr, want)
	}
	checkFourCollapsed(t, bridge.stderr, " not forwarded: ")
	checkBridgeCount(t, bridge.stderr, "p2pmsg: interrupted by SIGINT: ")
}

// TestBridgeNamesUnverifiedSender: a bridge taking unsigned JXTA
// messages (--jxta-unsigned) says, of a message it forwards, that its
// JXTA sender is unverified, as recv does: its peer ID is only what the
// sender claims. Before, the line named the claimed ID as the sender's.
func TestBridgeNamesUnverifiedSender(t *testing.T) {
	t.Parallel()
	p := newPipeAdv(t, "unicast")
	sink := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--count", "1")
	bridge := start(t, nil, "bridge", "--pipe", p, "--jxta", "tcp://127.0.0.1:0", "--jxta-unsigned", "--listen", loopback,
		"--p2p-peer", sink.addrs[0], "--count", "1")
	bridgeJXTA, _ := bridge.jxtaAddr()
	if r := run(t, nil, "send", "--pipe", p, "--peer", bridgeJXTA, "--elem", "text=hi", "--jxta-unsigned"); r.code != 0 {
		t.Fatalf("send --jxta-unsigned to the bridge: exit %d, stderr %q", r.code, r.stderr)
	}
	if code := bridge.wait(t); code != 0 {
		t.Fatalf("bridge: exit %d, stderr %q", code, bridge.stderr)
	}
	sink.wait(t)
	if out := bridge.stdout.String(); !strings.Contains(out, " (unsigned: unverified) to p2p ") {
		t.Fatalf("bridge printed %q; want the sender named unverified", out)
	}
}

// TestBridgeRefusalLeadsWithCause: a libp2p peer's message the bridge
// cannot forward to its JXTA peer (gone: its port refuses connections)
// is refused back with the cause first. The reason was the forward's
// whole chain ("pipe urn:jxta:…: endpoint: no known peer has that …"),
// which the sender cuts to a line before the cause.
func TestBridgeRefusalLeadsWithCause(t *testing.T) {
	p := newPipeAdv(t, "unicast")
	sink := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0")
	sinkJXTA, _ := sink.jxtaAddr()
	bridge := start(t, nil, "bridge", "--pipe", p, "--jxta", "tcp://127.0.0.1:0", "--listen", loopback,
		"--jxse-peer", sinkJXTA)
	bridgeP2P := bridge.p2pAddr()
	if r := run(t, nil, "send", "--pipe", p, "--peer", bridgeP2P, "--elem", "text=hi"); r.code != 0 {
		t.Fatalf("send through the bridge: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := sink.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sink.wait(t)
	r := run(t, nil, "send", "--pipe", p, "--peer", bridgeP2P, "--elem", "text=hi")
	want := "refused by the receiver: the bridge could not forward it: connection refused: "
	if r.code != 1 || !strings.Contains(string(r.stderr), want) {
		t.Fatalf("send to a bridge whose JXTA peer is gone: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	if err := bridge.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	bridge.wait(t)
}

// TestSendNamesUnsignedJXTAPeer: `send --peer tcp://…` (signing, as
// JXSE does by default) to a JXTA peer that neither signs nor requires
// signatures (CBJX disabled; here recv --jxta-unsigned) fails, its
// answers being dropped unsigned; the error says so and names
// --jxta-unsigned. It said only "no peer has the pipe bound", of a peer
// that had it bound.
func TestSendNamesUnsignedJXTAPeer(t *testing.T) {
	p := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0", "--jxta-unsigned", "--count", "1")
	addr, _ := recv.jxtaAddr()
	r := run(t, nil, "send", "--pipe", p, "--peer", addr, "--elem", "text=hi")
	want := "the JXTA peer sent unsigned messages, which were dropped (a JXSE peer with CBJX disabled? then use --jxta-unsigned): no peer found with the pipe bound"
	if r.code != 1 || !strings.Contains(string(r.stderr), want) {
		t.Fatalf("send: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	// Unsigned on both sides, it is delivered, and recv says that
	// nothing proves who sent it.
	if r := run(t, nil, "send", "--pipe", p, "--peer", addr, "--elem", "text=hi", "--jxta-unsigned"); r.code != 0 {
		t.Fatalf("send --jxta-unsigned: exit %d, stderr %q", r.code, r.stderr)
	}
	if code := recv.wait(t); code != 0 || !strings.Contains(recv.stdout.String(), " (jxta, unsigned: unverified)") {
		t.Fatalf("recv: exit %d, printed %q; want 0 and the sender unverified", code, recv.stdout.String())
	}
}

// TestRecvReportsUnsignedJXTA: recv --jxta says on stderr what a signing
// mismatch with its JXTA peers costs, naming --jxta-unsigned. Signing
// (JXSE's default), sent to by a peer with CBJX disabled (here send
// --jxta-unsigned), it dropped unsigned messages; with --jxta-unsigned,
// sent to by a peer that signs (here send), it got signed messages and
// its unsigned answers were dropped there. Before, it printed nothing in
// either case: the sender's resolution failed and the receiver never said
// why.
func TestRecvReportsUnsignedJXTA(t *testing.T) {
	for _, c := range []struct {
		name       string
		recv, send []string
		want       []string
	}{
		{"signing receiver", nil, []string{"--jxta-unsigned"}, []string{"unsigned message", "from JXTA peers dropped", "then use --jxta-unsigned"}},
		{"unsigned receiver", []string{"--jxta-unsigned"}, nil, []string{"signed message", "received from JXTA peers", "leave out --jxta-unsigned"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPipeAdv(t, "unicast")
			recv := start(t, nil, append([]string{"recv", "--pipe", p, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0"}, c.recv...)...)
			addr, _ := recv.jxtaAddr()
			if r := run(t, nil, append([]string{"send", "--pipe", p, "--peer", addr, "--elem", "text=hi"}, c.send...)...); r.code != 1 {
				t.Fatalf("send %v to recv %v: exit %d, stderr %q; want 1", c.send, c.recv, r.code, r.stderr)
			}
			if err := recv.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if code := recv.wait(t); code != 0 {
				t.Fatalf("recv: exit %d, stderr %q", code, recv.stderr)
			}
			stderr := strings.Join(recv.stderr, "\n")
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Fatalf("recv's stderr %q does not say %q", stderr, w)
				}
			}
		})
	}
}

// TestRecvJXTAPublic: recv --jxta-public (a peer behind NAT or a port
// forward) says the address it announces ("announcing jxta ADDR ID"), and
// its welcome gives that address to a JXTA peer that connects, as JXSE
// records it for the route back. There was no such flag: the welcome
// gave the listener's own address, a private one behind NAT.
func TestRecvJXTAPublic(t *testing.T) {
	t.Parallel()
	const public = "tcp://127.0.0.9:9711"
	p := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0", "--jxta-public", public)
	addr, self := recv.jxtaAddr()
	other, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	w := jxtatcp.Welcome{Dest: addr, Public: "tcp://127.0.0.1:0", Peer: other.ID().String(), Version: "1.1"}
	if _, err := c.Write(w.Append(nil)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	got, err := jxtatcp.ParseWelcome(strings.TrimSuffix(line, "\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Public != public {
		t.Errorf("recv's welcome announces %q, want %q", got.Public, public)
	}
	c.Close()
	if err := recv.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv: exit %d, stderr %q", code, recv.stderr)
	}
	if want := "announcing jxta " + public + " " + self; !slices.Contains(recv.stderr, want) {
		t.Errorf("recv's stderr %q has no line %q", recv.stderr, want)
	}
}
