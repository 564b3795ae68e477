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
	if _, err := plan.Emulated(network.LinkShape{Loss: 1}, network.LinkShape{}); !errors.Is(err, plan.ErrUnsupportedShape) {
		t.Errorf("loss accepted: %v", err)
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
