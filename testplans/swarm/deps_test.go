package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksOnlyAPeer: every instance of this plan is one peer, and fifty
// share a machine, so what the binary links is paid fifty times over in
// resident code and package initialisation. It links the swarm engine and
// its chart, not the other experiments' engines and their dependencies.
func TestLinksOnlyAPeer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/p2pmsg/p2pmsg/internal/lab",        // the experiment engine
		"github.com/p2pmsg/p2pmsg/internal/codecbench", // codec benchmarks
		"github.com/p2pmsg/p2pmsg/internal/datasets",   // their data sets
		"github.com/nats-io/",                          // lab's rate baseline
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("the swarm plan links %s", dep)
			}
		}
	}
}
