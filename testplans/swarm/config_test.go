package main

import (
	"errors"
	"testing"

	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/internal/swarm"
)

// TestSeedParameter: the seed is read whole, so a run names the seed a
// lab swarm run printed (through a float64 it lost its low bits), and 0,
// with which each instance drew a seed of its own, is refused.
func TestSeedParameter(t *testing.T) {
	for _, tc := range []struct {
		seed string
		want uint64
		err  error
	}{
		{"3548717228663863699", 3548717228663863699, nil},
		{"1", 1, nil},
		{"0", 0, swarm.ErrConfig},
		{"-1", 0, swarm.ErrConfig},
		{"1.5", 0, swarm.ErrConfig},
	} {
		re := &runtime.RunEnv{RunParams: runtime.RunParams{TestInstanceParams: map[string]string{"seed": tc.seed}, TestInstanceCount: 4, TestCase: "ci-flood"}}
		cfg, _, err := config(re)
		if !errors.Is(err, tc.err) || err == nil && cfg.Seed != tc.want {
			t.Errorf("seed=%s: %d, %v; want %d, %v", tc.seed, cfg.Seed, err, tc.want, tc.err)
		}
	}
}
