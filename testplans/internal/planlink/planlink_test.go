package planlink_test

import (
	"testing"
	"time"

	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/testplans/internal/planlink"
)

func runEnv(params map[string]string) *runtime.RunEnv {
	return &runtime.RunEnv{RunParams: runtime.RunParams{TestInstanceParams: params, TestInstanceCount: 2}}
}

func TestLinkParams(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		label  string
		up     int64
		rtt    time.Duration
	}{
		{map[string]string{"profile": "dsl", "up": "-1", "down": "-1", "rtt_ms": "-1", "jitter_ms": "-1"}, "dsl", 80_000, 60 * time.Millisecond},
		{map[string]string{"profile": "dsl", "up": "1000000"}, "dsl*", 125_000, 60 * time.Millisecond},
		{map[string]string{"profile": "lan", "rtt_ms": "2.5"}, "lan*", 12_500_000, 2500 * time.Microsecond},
		{map[string]string{"profile": "custom", "up": "8000", "rtt_ms": "10"}, "custom", 1000, 10 * time.Millisecond},
	} {
		label, link, err := planlink.Link(runEnv(c.params))
		if err != nil || label != c.label || link.Up.Bandwidth != c.up || link.RTT() != c.rtt {
			t.Errorf("%v: %s %+v %v", c.params, label, link, err)
		}
	}
	// loss_pct: the probability that a segment is lost, each way.
	if label, link, err := planlink.Link(runEnv(map[string]string{"profile": "dsl", "loss_pct": "1.5"})); err != nil || label != "dsl*" || link.Up.Loss != 0.015 || link.Down.Loss != 0.015 {
		t.Errorf("loss_pct 1.5: %s %+v %v", label, link, err)
	}
	if _, link, err := planlink.Link(runEnv(map[string]string{"profile": "dsl", "loss_pct": "-1"})); err != nil || link.Up.Loss != 0 {
		t.Errorf("loss_pct -1: %+v %v", link, err)
	}
	for _, bad := range []map[string]string{{"profile": "moon"}, {"profile": "dsl", "up": "fast"}, {"profile": "dsl", "rtt_ms": "x"},
		{"profile": "dsl", "loss_pct": "x"}, {"profile": "dsl", "loss_pct": "25"}} {
		if _, _, err := planlink.Link(runEnv(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
