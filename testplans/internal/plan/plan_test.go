package plan_test

import (
	"context"
	"errors"
	"testing"

	"github.com/testground/sdk-go/network"
	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
)

func runEnv(params map[string]string) *runtime.RunEnv {
	return &runtime.RunEnv{RunParams: runtime.RunParams{TestInstanceParams: params, TestInstanceCount: 2}}
}

// The sidecar's egress shapes and the in-process link are the same link:
// LinkShape.Bandwidth is egress bytes per second, as linkemu's.
func TestShapesRoundTrip(t *testing.T) {
	for _, p := range linkemu.Profiles() {
		s, r := plan.Shapes(p.Link)
		if s.Bandwidth != uint64(p.Link.Up.Bandwidth) || s.Latency != p.Link.Up.Latency || r.Bandwidth != uint64(p.Link.Down.Bandwidth) {
			t.Errorf("%s: shapes %+v %+v", p.Name, s, r)
		}
		back, err := plan.Emulated(s, r)
		if err != nil || back != p.Link {
			t.Errorf("%s: emulated %+v, %v; want %+v", p.Name, back, err, p.Link)
		}
	}
	dsl, _ := linkemu.Lookup("dsl")
	if s, _ := plan.Shapes(dsl.Link); s.Bandwidth != 80_000 { // 640 kbit/s
		t.Errorf("dsl sender egress %d B/s", s.Bandwidth)
	}
	// Loss is emulated (as its repair's delay), up to linkemu.MaxLoss;
	// corruption is not.
	if l, err := plan.Emulated(network.LinkShape{Loss: 2}, network.LinkShape{}); err != nil || l.Up.Loss != 0.02 || l.Down.Loss != 0 {
		t.Errorf("2%% loss: %+v, %v", l, err)
	}
	if s, _ := plan.Shapes(linkemu.Link{Up: linkemu.Shape{Loss: 0.01}}); s.Loss != 1 {
		t.Errorf("1%% loss: sidecar shape %+v", s)
	}
	for _, bad := range []network.LinkShape{{Loss: 30}, {Corrupt: 1}} {
		if _, err := plan.Emulated(bad, network.LinkShape{}); !errors.Is(err, plan.ErrUnsupportedShape) {
			t.Errorf("%+v accepted: %v", bad, err)
		}
	}
}

// Without a sidecar only the emulating end shapes, with both shapes.
func TestShapeWithoutSidecar(t *testing.T) {
	dsl, _ := linkemu.Lookup("dsl")
	s, r := plan.Shapes(dsl.Link)
	re := runEnv(nil)
	got, err := plan.Shape(context.Background(), re, nil, s, r, true)
	if err != nil || got != dsl.Link {
		t.Fatalf("emulating end: %+v, %v", got, err)
	}
	got, err = plan.Shape(context.Background(), re, nil, r, s, false)
	if err != nil || got != (linkemu.Link{}) {
		t.Fatalf("other end: %+v, %v", got, err)
	}
}
