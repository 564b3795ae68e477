package lab_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/lab"
)

// The swarm's bandwidth counters (libp2p's go-flow-metrics) share one
// process-wide sweeper goroutine, which outlives every test by design; it
// is the only goroutine allowed to stay.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/libp2p/go-flow-metrics.(*sweeper).run"))
}

func TestRunRTTBaselines(t *testing.T) {
	for _, transport := range []string{lab.TransportTCP, lab.TransportQUIC} {
		res, err := lab.RunRTT(context.Background(), lab.RTTConfig{
			Layers:    []lab.Layer{lab.TCPLayer{}, lab.StreamLayer{}, lab.StreamLayer{NewHost: lab.NodeHost}, lab.EndpointLayer{}},
			Sizes:     []int{1, 100 << 10},
			Transport: transport,
			Warmup:    10, Runs: 3, Pairs: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 8 {
			t.Fatalf("%d results, want 8", len(res))
		}
		for _, r := range res {
			if r.Layer == "endpoint" {
				if r.Size == 1 && (r.WireBytes < 20 || r.WireBytes > 64) {
					t.Errorf("endpoint wire bytes %d for 1 B", r.WireBytes)
				}
				r.WireBytes = 4
			}
			want := transport
			if r.Layer == "tcp" { // raw TCP whatever the study's transport
				want = lab.TransportTCP
			}
			if r.RTT <= 0 || r.Latency != r.RTT/2 || r.Bandwidth <= 0 || r.WireBytes != 4 || r.Transport != want {
				t.Errorf("implausible result %+v", r)
			}
			// The schedule, and no baseline: none was given.
			if r.Warmup != 10 || r.Runs != 3 || r.Pairs != 5 || r.Baseline != "" || r.Ratio != 0 {
				t.Errorf("%s: warm-up %d, runs %d, pairs %d, baseline %q (%v)", r.Layer, r.Warmup, r.Runs, r.Pairs, r.Baseline, r.Ratio)
			}
		}
	}
}

// TestRunRTTStackLayers runs the endpoint, pipe and socket layers in one
// study, where they share their nodes, beside the stream baseline; then
// each on nodes of its own, as Open makes them.
func TestRunRTTStackLayers(t *testing.T) {
	layers := []lab.Layer{lab.StreamLayer{NewHost: lab.NodeHost}, lab.EndpointLayer{}, lab.PipeLayer{}, lab.SocketLayer{}}
	res, err := lab.RunRTT(context.Background(), lab.RTTConfig{
		Layers: layers, Sizes: []int{1, 100 << 10}, Warmup: 10, Runs: 3, Pairs: 5, Baseline: "endpoint",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 8 {
		t.Fatalf("%d results, want 8", len(res))
	}
	wantWire := map[string][2]int{"stream": {4, 4}, "endpoint": {20, 64}, "pipe": {20, 96}, "socket": {0, 0}}
	for _, r := range res {
		w := wantWire[r.Layer]
		if r.RTT <= 0 || r.Ratio <= 0 || r.WireBytes < w[0] || r.WireBytes > w[1] {
			t.Errorf("implausible result %+v", r)
		}
	}
	for _, l := range layers[1:] {
		p, err := l.Open(context.Background(), lab.TransportTCP)
		if err != nil {
			t.Fatalf("%s: %v", l.Name(), err)
		}
		for _, size := range []int{1, 100 << 10} {
			if err := p.RoundTrip(context.Background(), make([]byte, size)); err != nil {
				t.Errorf("%s: %d bytes: %v", l.Name(), size, err)
			}
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s: close: %v", l.Name(), err)
		}
	}
}

func TestRunRTTLayerTwice(t *testing.T) {
	_, err := lab.RunRTT(context.Background(), lab.RTTConfig{
		Layers: []lab.Layer{lab.PipeLayer{}, lab.EndpointLayer{}, lab.PipeLayer{}}, Sizes: []int{1}, Runs: 1, Pairs: 1,
	})
	if err == nil || !strings.Contains(err.Error(), "layer pipe given twice") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}

// logLayer records the runs RunRTT makes on it: a layer of the lab's
// plug-in interface that moves no bytes, to check the schedule.
type logLayer struct {
	name string
	log  *[]string
	fail int // fail the n-th round trip (1-based), 0: never
}

func (l logLayer) Name() string { return l.name }

func (l logLayer) Open(context.Context, string) (lab.Pair, error) {
	return &logPair{l: l}, nil
}

type logPair struct {
	l     logLayer
	trips int
}

func (p *logPair) RoundTrips(_ context.Context, payload []byte, n int) error {
	p.trips += n
	if p.l.fail > 0 && p.trips >= p.l.fail {
		return errors.New("echo lost")
	}
	*p.l.log = append(*p.l.log, fmt.Sprintf("%s/%d×%d", p.l.name, len(payload), n))
	return nil
}

func (p *logPair) RoundTrip(ctx context.Context, payload []byte) error {
	return p.RoundTrips(ctx, payload, 1)
}
func (p *logPair) WireBytes(int) int { return 0 }
func (p *logPair) Close() error {
	*p.l.log = append(*p.l.log, p.l.name+" closed")
	return nil
}

// TestRunRTTInterleaves checks the schedule: warm-ups first, then per
// size rounds in which every layer runs once, in an order that varies
// from round to round; every pair closed; results layer by layer.
func TestRunRTTInterleaves(t *testing.T) {
	var log []string
	res, err := lab.RunRTT(context.Background(), lab.RTTConfig{
		Layers: []lab.Layer{logLayer{"a", &log, 0}, logLayer{"b", &log, 0}, logLayer{"c", &log, 0}},
		Sizes:  []int{1, 8}, Warmup: 2, Runs: 6, Pairs: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(log[:3], " "); got != "a/1×2 b/1×2 c/1×2" {
		t.Errorf("warm-ups %s", got)
	}
	if got := strings.Join(log[len(log)-3:], " "); got != "a closed b closed c closed" {
		t.Errorf("closing %s", got)
	}
	runs := log[3 : len(log)-3]
	if len(runs) != 2*6*3 {
		t.Fatalf("%d runs, want 36: %v", len(runs), runs)
	}
	orders := map[string]bool{}
	for r := 0; r < len(runs); r += 3 {
		round := slices.Clone(runs[r : r+3])
		size := "/1×4"
		if r >= 18 {
			size = "/8×4"
		}
		orders[strings.Join(round, " ")] = true
		slices.Sort(round)
		if got := strings.Join(round, " "); got != "a"+size+" b"+size+" c"+size {
			t.Errorf("round %d ran %s: want every layer once at size %s", r/3, got, size)
		}
	}
	if len(orders) < 3 {
		t.Errorf("rounds in only %d orders: %v", len(orders), orders)
	}
	var order []string
	for _, r := range res {
		order = append(order, fmt.Sprintf("%s/%d", r.Layer, r.Size))
	}
	if got := strings.Join(order, " "); got != "a/1 a/8 b/1 b/8 c/1 c/8" {
		t.Errorf("results in order %s", got)
	}
}

func TestRunRTTUnknownBaseline(t *testing.T) {
	var log []string
	_, err := lab.RunRTT(context.Background(), lab.RTTConfig{
		Layers: []lab.Layer{logLayer{"a", &log, 0}}, Baseline: "b", Sizes: []int{1}, Runs: 1, Pairs: 1,
	})
	if !errors.Is(err, lab.ErrUnknownLayer) || len(log) != 0 {
		t.Fatalf("err = %v after %v, want ErrUnknownLayer before any run", err, log)
	}
}

func TestRunRTTLayerFails(t *testing.T) {
	var log []string
	_, err := lab.RunRTT(context.Background(), lab.RTTConfig{
		Layers: []lab.Layer{logLayer{"a", &log, 0}, logLayer{"b", &log, 7}},
		Sizes:  []int{1}, Warmup: -1, Runs: 3, Pairs: 4,
	})
	if err == nil || !strings.Contains(err.Error(), "layer b") || !strings.Contains(err.Error(), "echo lost") {
		t.Fatalf("err = %v, want layer b's failure", err)
	}
	if all := strings.Join(log, " "); !strings.HasSuffix(all, "a closed b closed") || strings.Count(all, "b/1×4") != 1 {
		t.Errorf("log %s: want b's one good run and both pairs closed after its second failed", strings.Join(log, " "))
	}
}

func TestParseSizes(t *testing.T) {
	got, err := lab.ParseSizes("1,64, 1K,16M")
	if err != nil || len(got) != 4 || got[2] != 1024 || got[3] != 16<<20 {
		t.Fatalf("ParseSizes = %v, %v", got, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "lab: no sizes given"},
		{"x", `lab: size "x": want a whole number of bytes`},
		{"0", `lab: size "0": want 1 to 2147483647 bytes`},
		{"-1", `lab: size "-1": want 1 to`},
		{"3G", `lab: size "3G": want 1 to`}, // named as given, not "3"
		{"1,2.5K", `lab: size "2.5K": want a whole number`},
	} {
		if _, err := lab.ParseSizes(tc.in); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseSizes(%q): %v, want an error beginning %q", tc.in, err, tc.want)
		}
	}
	if s := lab.FormatSize(4 << 20); s != "4M" {
		t.Errorf("FormatSize = %s", s)
	}
}

func TestUnknownTransport(t *testing.T) {
	if _, err := (lab.StreamLayer{}).Open(context.Background(), "carrier-pigeon"); err == nil {
		t.Fatal("unknown transport accepted")
	}
}
