package lab

import (
	"context"
	"errors"
	"fmt"
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
	res, err := RunSwarm(ctx, SwarmConfig{Peers: 8, Publishers: 2, Rate: 40, Duration: 1500 * time.Millisecond, Targets: 2, Relays: 1, RelayFraction: 0.25, ChurnFraction: 0.25, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(SwarmCases) {
		t.Fatalf("%d results, want %d", len(res), len(SwarmCases))
	}
	var md, svg strings.Builder
	if err := WriteSwarmMarkdown(&md, res); err != nil || strings.Count(md.String(), "\n| ") < 2*len(res)-1 {
		t.Errorf("Markdown (%v):\n%s", err, md.String())
	}
	if err := WriteSwarmChart(&svg, res); err != nil || !strings.Contains(svg.String(), "<svg") || !strings.Contains(svg.String(), "churn (8 peers)") {
		t.Errorf("chart: %v", err)
	}
	for _, r := range res {
		if err := r.Complete(); err != nil {
			t.Error(err)
		}
		if r.Peers != 8 || r.GoroutinesPerPeer <= 0 || r.ConnsPerPeer <= 0 {
			t.Errorf("%s: cost not measured: %s", r.Case, brief(r))
		}
		if r.Case == SwarmIdle {
			continue
		}
		if r.Expected == 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 || len(r.Latencies) != r.Delivered {
			t.Errorf("%s: figures: %s (%d latencies)", r.Case, brief(r), len(r.Latencies))
		}
		switch r.Case {
		case SwarmResolve:
			if r.ResolveP50 <= 0 {
				t.Errorf("resolve: resolution not timed")
			}
		case SwarmRelay:
			if r.RelayCircuits == 0 {
				t.Errorf("relay: no relayed connection")
			}
		case SwarmChurn:
			if r.Accepted == 0 || r.UnicastDelivered+r.Reported < r.Accepted || r.ResolveP50 <= 0 {
				t.Errorf("churn: unicast accounting %s", brief(r))
			}
		}
	}
}

func TestSwarmConfigRefused(t *testing.T) {
	for _, c := range []SwarmConfig{
		{Cases: []string{"stampede"}},
		{Peers: 2},
		{Peers: 5, Publishers: 6},
		{Peers: 5, Targets: 5},
		{Size: 4},
		{Peers: 4, Relays: 3},
	} {
		if _, err := RunSwarm(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := RunSwarm(context.Background(), SwarmConfig{Cases: []string{"stampede"}}); !errors.Is(err, ErrUnknownCase) {
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

func brief(r SwarmResult) string {
	r.Latencies = nil
	return fmt.Sprintf("%+v", r)
}

// runPeers runs a swarm of RunSwarmPeer peers in this process, meeting
// through an in-memory coordinator, and returns peer 1's result.
func runPeers(ctx context.Context, cfg SwarmConfig) (*SwarmResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hub := newMemHub(cfg.Peers)
	var (
		mu    sync.Mutex
		first *SwarmResult
		errs  []error
		wg    sync.WaitGroup
	)
	for seq := 1; seq <= cfg.Peers; seq++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := RunSwarmPeer(ctx, cfg, hub.coordinator(seq), "/ip4/127.0.0.1/tcp/0")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("peer %d: %w", seq, err))
				cancel() // the others would wait for it at the next rendezvous
			}
			if seq == 1 {
				first = r
			}
		}()
	}
	wg.Wait()
	return first, errors.Join(errs...)
}

// TestSwarmPeers runs the per-process engine's cases with its peers in
// this process.
func TestSwarmPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("a swarm of real nodes")
	}
	for _, c := range SwarmPeerCases {
		t.Run(c, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			r, err := runPeers(ctx, SwarmConfig{Peers: 8, Cases: []string{c}, Publishers: 2, Rate: 40, Duration: 1500 * time.Millisecond, Targets: 2, Relays: 1, RelayFraction: 0.25, ChurnFraction: 0.34, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				t.Fatal("peer 1 returned no result")
			}
			if err := r.Complete(); err != nil || r.Expected == 0 || r.P50 <= 0 || r.Peers != 8 {
				t.Errorf("%v: %s", err, brief(*r))
			}
			if c == SwarmRelay && r.RelayCircuits == 0 {
				t.Errorf("relay: no relayed connection: %s", brief(*r))
			}
			if c == SwarmChurn && (r.Accepted == 0 || r.UnicastDelivered+r.Reported < r.Accepted || r.ResolveP50 <= 0) {
				t.Errorf("churn: unicast accounting: %s", brief(*r))
			}
			// 60 messages (40 a second for 1.5 s) to every member: all 8,
			// or in churn the 4 peers neither leaving nor joining.
			if want := map[string]int{SwarmPropagate: 480, SwarmChurn: 240}[c]; want > 0 && r.Expected != want {
				t.Errorf("%s: %d deliveries expected, want %d: %s", c, r.Expected, want, brief(*r))
			}
			t.Log(brief(*r))
		})
	}
}
