package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/testground/sdk-go/run"
	"github.com/testground/sdk-go/runtime"
	"github.com/testground/sdk-go/sync"

	"github.com/p2pmsg/p2pmsg/internal/swarm"
	"github.com/p2pmsg/p2pmsg/internal/swarm/chart"
	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
)

func init() { plan.LoopbackHTTP() }

func param(re *runtime.RunEnv, name, def string) string {
	if v, ok := re.TestInstanceParams[name]; ok && v != "" {
		return v
	}
	return def
}

func number(re *runtime.RunEnv, name, def string) (float64, error) {
	v, err := strconv.ParseFloat(param(re, name, def), 64) // Testground writes numbers as JSON
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", name, err)
	}
	return v, nil
}

// config reads the case's parameters.
func config(re *runtime.RunEnv) (swarm.Config, time.Duration, error) {
	cfg := swarm.Config{Peers: re.TestInstanceCount, Cases: []string{re.TestCase}, Progress: func(s string) { re.RecordMessage("%s", s) }}
	var err error
	get := func(name, def string) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = number(re, name, def)
		return v
	}
	cfg.Publishers = int(get("publishers", "4"))
	cfg.Rate = get("rate", "100")
	cfg.Duration = time.Duration(get("duration_ms", "5000")) * time.Millisecond
	cfg.Targets = int(get("targets", "3"))
	cfg.Size = int(get("size", "100"))
	cfg.Degree = int(get("degree", "4"))
	cfg.ChurnFraction = get("churn", "0.2")
	cfg.Relays = int(get("relays", "2"))
	cfg.RelayFraction = get("relay_fraction", "0.2")
	timeout := time.Duration(get("timeout_s", "600")) * time.Second
	if err == nil {
		cfg.Seed, err = seed(re)
	}
	return cfg, timeout, err
}

// seed reads the seed as an integer: through a float64, as the other
// numbers, a seed `lab swarm` printed (3548717228663863699) lost its low
// bits. 0 is refused: every instance would draw a seed of its own
// (swarm.Config), and they must agree on the picks.
func seed(re *runtime.RunEnv) (uint64, error) {
	s, err := strconv.ParseUint(param(re, "seed", "1"), 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: parameter seed: %w", swarm.ErrConfig, err)
	case s == 0:
		return 0, fmt.Errorf("%w: parameter seed: 0 (each instance would draw its own); want 1 or more", swarm.ErrConfig)
	}
	return s, nil
}

func runCase(re *runtime.RunEnv, ic *run.InitContext) error {
	cfg, timeout, err := config(re)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	listen, err := plan.ListenAddr(ic.NetClient)
	if err != nil {
		return err
	}
	c := &coordinator{re: re, ic: ic}
	r, err := swarm.RunPeer(ctx, cfg, c, listen)
	if err != nil {
		return err
	}
	if r == nil {
		return nil
	}
	re.R().RecordPoint("swarm,case="+r.Case+",kind=p99_ns", float64(r.P99))
	res := []swarm.Result{*r}
	files, err := chart.Files(res)
	if err != nil {
		return err
	}
	for name, b := range files {
		if err := plan.WriteOutput(re, name, b); err != nil {
			return err
		}
	}
	re.RecordMessage("results:\n%s", files[swarm.MarkdownFile])
	os.Stderr.Write(files[swarm.MarkdownFile])
	return nil
}

// coordinator is swarm.Coordinator on Testground's sync service.
type coordinator struct {
	re *runtime.RunEnv
	ic *run.InitContext
}

func (c *coordinator) Seq() int { return int(c.ic.GlobalSeq) }

func (c *coordinator) Barrier(ctx context.Context, name string) error {
	_, err := c.ic.SyncClient.SignalAndWait(ctx, sync.State("swarm-"+name), c.re.TestInstanceCount)
	if err != nil {
		return fmt.Errorf("barrier %s: %w", name, err)
	}
	return nil
}

// shared is one instance's contribution to a Share.
type shared struct {
	Seq  int    `json:"seq"`
	Data []byte `json:"data"`
}

func (c *coordinator) Share(ctx context.Context, name string, b []byte) ([][]byte, error) {
	n := c.re.TestInstanceCount
	topic := sync.NewTopic("swarm-"+name, &shared{})
	ch := make(chan *shared, n)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := c.ic.SyncClient.Subscribe(sctx, topic, ch); err != nil {
		return nil, fmt.Errorf("share %s: %w", name, err)
	}
	if _, err := c.ic.SyncClient.Publish(ctx, topic, &shared{Seq: c.Seq(), Data: b}); err != nil {
		return nil, fmt.Errorf("share %s: %w", name, err)
	}
	out := make([][]byte, n)
	seen := make([]bool, n)
	for got := 0; got < n; {
		select {
		case s := <-ch:
			if s.Seq < 1 || s.Seq > n || seen[s.Seq-1] {
				continue
			}
			seen[s.Seq-1], out[s.Seq-1] = true, s.Data
			got++
		case <-ctx.Done():
			return nil, fmt.Errorf("share %s: %w", name, ctx.Err())
		}
	}
	return out, nil
}
