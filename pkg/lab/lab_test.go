package lab_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/pkg/lab"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
			if r.RTT <= 0 || r.Latency != r.RTT/2 || r.Bandwidth <= 0 || r.WireBytes != 4 || r.Transport != transport {
				t.Errorf("implausible result %+v", r)
			}
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := lab.ParseSizes("1,64, 1K,16M")
	if err != nil || len(got) != 4 || got[2] != 1024 || got[3] != 16<<20 {
		t.Fatalf("ParseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "0", "-1", "3G"} {
		if _, err := lab.ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
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
