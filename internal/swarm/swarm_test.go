package swarm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSwarm runs every case on a small swarm of real nodes and checks
// that each delivered everything, lost nothing, and measured what it
// reports.
func TestSwarm(t *testing.T) {
	if testing.Short() {
		t.Skip("a swarm of real nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Peers: 8, Publishers: 2, Rate: 40, Duration: 1500 * time.Millisecond, Targets: 2, Relays: 1, RelayFraction: 0.25, ChurnFraction: 0.25, Settle: time.Second, Seed: 1})
	// 60 messages (40 a second for 1.5 s) to every member: all 8, or in
	// churn the 6 peers present throughout (2 of the 8 leave; 2 join).
	for _, r := range res {
		if want := map[string]int{Propagate: 480, Churn: 360}[r.Case]; want > 0 && r.Expected != want {
			t.Errorf("%s: %d deliveries expected, want %d", r.Case, r.Expected, want)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(Cases) {
		t.Fatalf("%d results, want %d", len(res), len(Cases))
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, res); err != nil || strings.Count(md.String(), "\n| ") < 2*len(res)-1 {
		t.Errorf("Markdown (%v):\n%s", err, md.String())
	}
	for _, r := range res {
		if err := r.Complete(); err != nil {
			t.Error(err)
		}
		if r.Peers != 8 || r.GoroutinesPerPeer <= 0 || r.ConnsPerPeer <= 0 {
			t.Errorf("%s: cost not measured: %s", r.Case, brief(r))
		}
		if r.Case == Idle {
			continue
		}
		if r.Expected == 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 || len(r.Latencies) != r.Delivered {
			t.Errorf("%s: figures: %s (%d latencies)", r.Case, brief(r), len(r.Latencies))
		}
		switch r.Case {
		case Resolve:
			if r.ResolveP50 <= 0 {
				t.Errorf("resolve: resolution not timed")
			}
		case Relay:
			if r.RelayCircuits == 0 {
				t.Errorf("relay: no relayed connection")
			}
		case Churn:
			if r.Accepted == 0 || r.UnicastDelivered+r.Reported+r.Lost != r.Accepted || r.ResolveP50 <= 0 {
				t.Errorf("churn: unicast accounting %s", brief(r))
			}
		}
	}
}

func TestSwarmConfigRefused(t *testing.T) {
	for _, c := range []Config{
		{Cases: []string{"stampede"}},
		{Peers: 2},
		{Peers: 5, Publishers: 6},
		{Peers: 5, Targets: 5},
		{Size: 4},
		{Peers: 4, Relays: 3},
		// NaN passed "<= 0 || >= 1" (every comparison with it is false)
		{ChurnFraction: math.NaN()},
		{RelayFraction: math.NaN()},
		{Rate: math.NaN()},
		{Rate: math.Inf(1)},
	} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := Run(context.Background(), Config{Cases: []string{"stampede"}}); !errors.Is(err, ErrUnknownCase) {
		t.Errorf("unknown case: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	v := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {1, 10}} {
		if got := quantileD(v, c.q); got != c.want {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	if quantileD(nil, 0.5) != 0 {
		t.Error("empty")
	}
}

func brief(r Result) string {
	r.Latencies = nil
	return fmt.Sprintf("%+v", r)
}

// TestProcKB reads the /proc lines the per-peer cost comes from.
func TestProcKB(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/smaps_rollup"
	if err := os.WriteFile(f, []byte("557168512000-7fff03175000 ---p 00000000 00:00 0  [rollup]\nRss:                1700 kB\nPss:                 824 kB\nPss_Anon:            112 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, key string
		want      int64
	}{
		{f, "Pss:", 824 << 10},
		{f, "Rss:", 1700 << 10},
		{f, "Swap:", 0},
		{dir + "/none", "Pss:", 0},
	} {
		if got := procKB(tc.path, tc.key); got != tc.want {
			t.Errorf("procKB(%s, %q) = %d, want %d", tc.path, tc.key, got, tc.want)
		}
	}
	if _, err := os.Stat("/proc/self/smaps_rollup"); err == nil {
		if p, r := pssBytes(), rssBytes(); p <= 0 || p > 2*r {
			t.Errorf("this process: PSS %d, RSS %d", p, r)
		}
	}
}

// The report and the shortfall count in good English whatever the
// number: one of a thing read "1 message copies", "1 failures".
func TestReportCountsOne(t *testing.T) {
	res := []Result{
		{Case: Propagate, Peers: 4, GossipDropped: 1},
		{Case: Relay, Peers: 4, RelayCircuits: 1, RelayMaxCircuits: 1},
		{Case: Churn, Peers: 4, Refused: 1, Accepted: 1, UnicastDelivered: 1},
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dropped and counted 1 message copy (", "relay: 1 relayed connection to", "unicast: 1 message accepted: 1 delivered,", "; 1 Send refused."} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	err := Result{Case: Propagate, Peers: 4, Failures: 1, Lost: 1}.Complete()
	if err == nil || !strings.Contains(err.Error(), "1 failure, 1 message lost without an error") {
		t.Errorf("Complete() = %v", err)
	}
}

// A swarm too large for the process's open files is refused before it
// starts building (before, --peers 1000000 began building a million
// peers), and the most it can have is named.
func TestSwarmFitsProcess(t *testing.T) {
	for _, c := range []struct {
		peers, limit int
		ok           bool
	}{
		{20, 0, true},           // limit unknown
		{137, 20000, true},      // 137 × 145 = 19,865
		{138, 20000, false},     // 138 × 146 = 20,148
		{1 << 62, 20000, false}, // no overflow past the check
		{1000, 1 << 20, true},
	} {
		err := Config{Peers: c.peers}.fitsProcess(c.limit)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%d peers, limit %d: %v", c.peers, c.limit, err)
		}
		if err != nil && !strings.Contains(err.Error(), "use at most 137 peers") {
			t.Errorf("%d peers, limit %d: %v, want the most it can have (137)", c.peers, c.limit, err)
		}
	}
}

// A member that did not get everything says which messages it missed
// and what its router counted, and Complete and the report pass that on:
// a count alone cannot tell a member cut off for a while from copies
// dropped here and there.
func TestShortfallNamesWhatWasMissed(t *testing.T) {
	s := newSwarm(Config{}.withDefaults())
	defer s.close()
	s.next = 4 // peer 5
	p, err := s.joinVia(context.Background(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var want []swarmMsg
	for seq := range 6 {
		want = append(want, swarmMsg{kind: kindData, from: 0, seq: seq}, swarmMsg{kind: kindData, from: 1, seq: seq})
	}
	for _, m := range want {
		if m.from == 1 || m.seq == 0 || m.seq == 4 { // peer 1's #1–#3 and #5 missing
			s.rec.deliver(p.idx, swarmPayload(64, m.from, m.seq, m.kind))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing more is coming: no drain
	var pt peerTally
	s.tallyMember(ctx, p, &pt, kindData, want)
	const wantShort = "peer 5 got 8 of 12, missing peer 1's #1–#3, #5; 0 connections; its router counted 0 undelivered, 0 dropped inbound, 0 dropped outbound, 0 replays, 0 rejected"
	if pt.Expected != 12 || pt.Delivered != 8 || pt.Shortfall != wantShort {
		t.Fatalf("tally %d of %d, shortfall %q\nwant 8 of 12, %q", pt.Delivered, pt.Expected, pt.Shortfall, wantShort)
	}
	err = Result{Case: Propagate, Peers: 8, Expected: 12, Delivered: 8, Shortfall: pt.Shortfall}.Complete()
	if err == nil || !strings.Contains(err.Error(), "8 of 12 delivered (first short: "+wantShort+")") {
		t.Errorf("Complete() = %v", err)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, []Result{{Case: Propagate, Peers: 8, Expected: 12, Delivered: 8, Shortfall: pt.Shortfall}}); err != nil || !strings.Contains(md.String(), "\npropagate: the first member short: "+wantShort+".\n") {
		t.Errorf("report (%v):\n%s", err, md.String())
	}
	unicast := []swarmMsg{{kind: kindUnicast, from: 2, seq: p.idx}, {kind: kindUnicast, from: 6, seq: p.idx}, {kind: kindUnicast, from: 7, seq: p.idx}}
	s.rec.deliver(p.idx, swarmPayload(64, 6, p.idx, kindUnicast))
	pt = peerTally{}
	s.tallyMember(ctx, p, &pt, kindUnicast, unicast)
	if want := "peer 5 got 1 of 3, missing messages from peer 3, peer 8; 0 connections"; pt.Shortfall != want {
		t.Errorf("unicast shortfall %q, want %q", pt.Shortfall, want)
	}
	pt = peerTally{}
	s.tallyMember(ctx, p, &pt, kindData, want[1:2]) // everything it expected
	if pt.Shortfall != "" || pt.Delivered != 1 {
		t.Errorf("complete member: %d delivered, shortfall %q", pt.Delivered, pt.Shortfall)
	}
}

// The swarm plan runs RunPeer with Config.Peers its instance count, the
// joiners included: its churn result reports the peers present, as lab
// swarm's does for the same swarm. Before, ci-churn (10 instances, 8
// present) reported "peers":10 where `lab swarm --peers 8 --case churn
// --churn 0.25` reported 8.
func TestRunPeerChurnReportsPeersPresent(t *testing.T) {
	if testing.Short() {
		t.Skip("a swarm of real nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// 6 instances: 5 present, 1 of them leaving and 1 joining.
	cfg := Config{Peers: 6, Cases: []string{Churn}, Publishers: 1, Rate: 20, Duration: time.Second, Targets: 1, ChurnFraction: 0.2, Seed: 1}
	hub := newMemHub(cfg.Peers)
	results := make([]*Result, cfg.Peers)
	errs := make([]error, cfg.Peers)
	var wg sync.WaitGroup
	for seq := 1; seq <= cfg.Peers; seq++ {
		wg.Go(func() {
			results[seq-1], errs[seq-1] = RunPeer(ctx, cfg, hub.coordinator(seq), "/ip4/127.0.0.1/tcp/0")
			if errs[seq-1] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r == nil {
		t.Fatal("instance 1 returned no result")
	}
	if r.Case != Churn || r.Peers != 5 {
		t.Errorf("%s: %d peers, want 5 present (6 instances, 1 joining)", r.Case, r.Peers)
	}
}
