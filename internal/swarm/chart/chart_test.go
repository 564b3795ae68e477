package chart_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/swarm"
	"github.com/p2pmsg/p2pmsg/internal/swarm/chart"
)

func TestFiles(t *testing.T) {
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond, 40 * time.Millisecond}
	tests := []struct {
		name      string
		res       []swarm.Result
		wantChart bool
	}{
		{"latencies", []swarm.Result{{Case: swarm.Churn, Peers: 8, Delivered: 3, Latencies: lat}}, true},
		{"read back from JSON", []swarm.Result{{Case: swarm.Idle, Peers: 8}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := chart.Files(tt.res)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{swarm.JSONFile, swarm.MarkdownFile} {
				if len(files[name]) == 0 {
					t.Errorf("no %s", name)
				}
			}
			svg, ok := files[chart.File]
			if ok != tt.wantChart {
				t.Fatalf("chart written: %v, want %v", ok, tt.wantChart)
			}
			if ok && (!bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("churn (8 peers)"))) {
				t.Errorf("chart without its line:\n%s", svg)
			}
		})
	}
}

func TestWriteNoLatencies(t *testing.T) {
	var b strings.Builder
	if err := chart.Write(&b, []swarm.Result{{Case: swarm.Resolve, Peers: 8}}); !errors.Is(err, chart.ErrNoLatencies) {
		t.Fatalf("got %v, want %v", err, chart.ErrNoLatencies)
	}
}

// A case whose deliveries all took the same time under a millisecond (a
// relay swarm of 4 peers delivers one message, in about 0.5 ms) is
// charted: before, gonum widened the axis to ±1 ms, below zero on the
// log scale, and `lab swarm --peers 4 --case relay --out DIR` panicked
// ("Values must be greater than 0 for a log scale") after its run, its
// results lost, as did the swarm plan's instance 1 (outcome crash).
func TestWriteOneLatency(t *testing.T) {
	for _, lat := range [][]time.Duration{
		{500 * time.Microsecond},
		{700 * time.Microsecond, 700 * time.Microsecond, 700 * time.Microsecond},
		{time.Nanosecond},
		{5 * time.Millisecond},
	} {
		var b bytes.Buffer
		if err := chart.Write(&b, []swarm.Result{{Case: swarm.Relay, Peers: 4, Delivered: len(lat), Latencies: lat}}); err != nil {
			t.Fatalf("%v: %v", lat, err)
		}
		if !bytes.Contains(b.Bytes(), []byte("<svg")) || !bytes.Contains(b.Bytes(), []byte("relay (4 peers)")) {
			t.Errorf("%v: chart without its line:\n%s", lat, b.Bytes())
		}
	}
}
