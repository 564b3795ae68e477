package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
)

func init() { plan.LoopbackHTTP() }

// layers are the layers the plan can measure, by name: the layer list
// parameter picks among them.
var layers = map[string]lab.Layer{
	"tcp":      lab.TCPLayer{},
	"stream":   lab.StreamLayer{NewHost: lab.NodeHost},
	"endpoint": lab.EndpointLayer{},
	"pipe":     lab.PipeLayer{},
	"socket":   lab.SocketLayer{},
}

func param(re *runtime.RunEnv, name, def string) string {
	if v, ok := re.TestInstanceParams[name]; ok && v != "" {
		return v
	}
	return def
}

func intParam(re *runtime.RunEnv, name string, def int) (int, error) {
	v, err := strconv.Atoi(param(re, name, strconv.Itoa(def)))
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", name, err)
	}
	return v, nil
}

// runRTT runs the study in this instance: each layer's sender and echoing
// receiver on loopback, as `p2pmsg lab rtt` does.
func runRTT(re *runtime.RunEnv) error {
	cfg := lab.RTTConfig{Transport: param(re, "transport", lab.TransportTCP), Progress: os.Stderr}
	for _, name := range strings.Split(param(re, "layers", "tcp,stream,endpoint"), ",") {
		l, ok := layers[strings.TrimSpace(name)]
		if !ok {
			names := make([]string, 0, len(layers))
			for n := range layers {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("unknown layer %q (have %s)", name, strings.Join(names, ", "))
		}
		cfg.Layers = append(cfg.Layers, l)
	}
	var err error
	if cfg.Sizes, err = lab.ParseSizes(param(re, "sizes", "1,1K,64K,1M")); err != nil {
		return err
	}
	if cfg.Warmup, err = intParam(re, "warmup", 100); err != nil {
		return err
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = -1 // RTTConfig reads 0 as "the default"
	}
	if cfg.Runs, err = intParam(re, "runs", 3); err != nil {
		return err
	}
	if cfg.Pairs, err = intParam(re, "pairs", 20); err != nil {
		return err
	}
	timeout, err := intParam(re, "timeout_s", 600)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout)*time.Second)
	defer cancel()
	res, err := lab.RunRTT(ctx, cfg)
	if err != nil {
		return err
	}
	var j, md bytes.Buffer
	enc := json.NewEncoder(&j)
	md.WriteString("| layer | transport | size | RTT | latency | bandwidth (MB/s) | wire bytes |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range res {
		if err := enc.Encode(r); err != nil {
			return err
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %v | %v | %.1f | %d |\n", r.Layer, r.Transport, lab.FormatSize(r.Size), r.RTT, r.Latency, r.Bandwidth/1e6, r.WireBytes)
		re.R().RecordPoint(fmt.Sprintf("rtt,layer=%s,transport=%s,size=%d", r.Layer, r.Transport, r.Size), float64(r.RTT))
	}
	if err := plan.WriteOutput(re, "rtt.jsonl", j.Bytes()); err != nil {
		return err
	}
	if err := plan.WriteOutput(re, "rtt.md", md.Bytes()); err != nil {
		return err
	}
	re.RecordMessage("results:\n%s", md.String())
	return nil
}
