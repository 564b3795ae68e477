package jxse_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestJXSEPair runs JxsePeer's bidi and socket commands between two live
// JXSE 2.7 peers, signing as JXSE does by default: the reference that the
// Go implementation's JxtaBiDiPipe and JxtaSocket interop is held to. It
// logs the JXSE↔JXSE round trips and socket throughput.
func TestJXSEPair(t *testing.T) {
	a := jxse.StartPeer(t, jxse.PeerOptions{})
	b := jxse.StartPeer(t, jxse.PeerOptions{})
	for _, r := range [][2]*jxse.Peer{{a, b}, {b, a}} {
		if err := r[0].Command("route " + r[1].ID + " " + r[1].Addr()); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("bidi", func(t *testing.T) {
		// JXSE's worker threads call a bidi pipe's listener concurrently, so
		// back-to-back messages may reach it out of order, both at B and at A.
		const want = "m1,m2,m3"
		p := pipeID(t, "pair-bidi")
		if err := b.Command("bidilisten " + p); err != nil {
			t.Fatal(err)
		}
		got, err := a.Query("bidiconnect " + p + " " + b.ID + " 3")
		if err != nil || sorted(got) != want {
			t.Fatalf("bidiconnect = %q, %v; want %s in any order", got, err, want)
		}
		if got != want {
			t.Logf("JXSE delivered the answers as %s", got)
		}
		var texts []string
		if r := await(t, b, p, "BIDI-OPEN", "BIDI", "BIDI-CLOSED"); r.Kind != "BIDI-OPEN" || r.Source != a.ID {
			t.Fatalf("B's first event %+v, want BIDI-OPEN from %s", r, a.ID)
		}
		for r := await(t, b, p, "BIDI", "BIDI-CLOSED"); r.Kind == "BIDI"; r = await(t, b, p, "BIDI", "BIDI-CLOSED") {
			texts = append(texts, r.Text)
		}
		if seen := strings.Join(texts, ","); sorted(seen) != want {
			t.Errorf("B saw %q between BIDI-OPEN and BIDI-CLOSED, want %s in any order", seen, want)
		}
	})

	t.Run("socket-send", func(t *testing.T) {
		p := pipeID(t, "pair-sink")
		if err := b.Command("socklisten " + p + " sink"); err != nil {
			t.Fatal(err)
		}
		sum, err := a.Query("sockconnect " + p + " " + b.ID + " 300000 send")
		if err != nil {
			t.Fatal(err)
		}
		if want := sha(jxse.Pattern(300000)); sum != want {
			t.Errorf("A sent sha256 %s, want %s", sum, want)
		}
		if r := await(t, b, p, "SOCK"); r.Text != "300000 "+sum {
			t.Errorf("B's sink got %q, want %q", r.Text, "300000 "+sum)
		}
	})

	t.Run("socket-recv", func(t *testing.T) {
		p := pipeID(t, "pair-send")
		if err := b.Command("socklisten " + p + " send:300000"); err != nil {
			t.Fatal(err)
		}
		got, err := a.Query("sockconnect " + p + " " + b.ID + " 0 recv")
		if err != nil {
			t.Fatal(err)
		}
		if want := "300000 " + sha(jxse.Pattern(300000)); got != want {
			t.Errorf("A received %q, want %q", got, want)
		}
		if r := await(t, b, p, "SOCK-SENT"); r.Text != "300000" {
			t.Errorf("SOCK-SENT %q, want 300000", r.Text)
		}
	})

	t.Run("socket-echo", func(t *testing.T) {
		p := pipeID(t, "pair-echo")
		if err := b.Command("socklisten " + p + " echo"); err != nil {
			t.Fatal(err)
		}
		if ns := median(t, a, "sockping "+p+" "+b.ID+" 20"); ns <= 0 {
			t.Errorf("sockping median %d ns", ns)
		}
	})

	t.Run("figures", func(t *testing.T) {
		bidi, echo, sink := pipeID(t, "pair-fig-bidi"), pipeID(t, "pair-fig-echo"), pipeID(t, "pair-fig-sink")
		for _, c := range []string{"bidilisten " + bidi, "socklisten " + echo + " echo", "socklisten " + sink + " sink"} {
			if err := b.Command(c); err != nil {
				t.Fatal(err)
			}
		}
		biDi := median(t, a, "bidiping "+bidi+" "+b.ID+" 50")
		sock := median(t, a, "sockping "+echo+" "+b.ID+" 50")
		const n = 20 << 20
		ns := median(t, a, "socksendrate "+sink+" "+b.ID+" "+strconv.Itoa(n))
		if r := await(t, b, sink, "SOCK"); r.Text != strconv.Itoa(n)+" "+sha(jxse.Pattern(n)) {
			t.Errorf("B's sink got %q, want %d bytes of the pattern", r.Text, n)
		}
		t.Logf("JXSE↔JXSE: bidi round trip p50 %v, socket 1-byte round trip p50 %v (n=50); socket send 20 MiB in %v: %.1f MB/s",
			time.Duration(biDi), time.Duration(sock), time.Duration(ns), float64(n)/time.Duration(ns).Seconds()/1e6)
	})
}

// pipeID is a net-group unicast pipe ID, a fresh one per test run.
func pipeID(t *testing.T, seed string) string {
	t.Helper()
	p, err := id.PipeIDFromSeed(id.NetPeerGroupID, []byte(seed+" "+strconv.FormatInt(time.Now().UnixNano(), 10)))
	if err != nil {
		t.Fatal(err)
	}
	return p.String()
}

// await returns the next event of one of kinds on pipe pid that p
// reports, skipping others (left over from earlier subtests).
func await(t *testing.T, p *jxse.Peer, pid string, kinds ...string) jxse.Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		r, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %v on %s: %v", kinds, pid, err)
		}
		for _, k := range kinds {
			if r.Kind == k && r.Param == pid {
				return r
			}
		}
	}
}

// median runs a command that answers "OK <ns>".
func median(t *testing.T, p *jxse.Peer, cmd string) int64 {
	t.Helper()
	got, err := p.Query(cmd)
	if err != nil {
		t.Fatalf("%s: %v (log: %s)", cmd, err, p.Log())
	}
	ns, err := strconv.ParseInt(got, 10, 64)
	if err != nil {
		t.Fatalf("%s answered %q", cmd, got)
	}
	return ns
}

// sorted sorts a comma-separated list.
func sorted(list string) string {
	f := strings.Split(list, ",")
	sort.Strings(f)
	return strings.Join(f, ",")
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
