// Command tgrun runs a Testground composition of p2pmsg's plans without
// Testground or Docker, as the local:exec runner would:
//
//	go run ./cmd/tgrun run -f amtt/compositions/dsl.toml [-f another.toml]... [--param trials=3] [--out results] [--timeout 10m]
//
// Several -f run one after the other, each plan built once.
// It builds the plan, starts an embedded sync service on 127.0.0.1,
// launches each instance as a process with Testground's runtime
// environment, streams their output prefixed with the instance, fails if
// any instance fails, crashes or times out, and gathers the outputs into
// results/<plan>/<run>/ with the merged tables and chart.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/p2pmsg/p2pmsg/testplans/internal/tgrun"
)

type params map[string]string

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }

func (p params) String() string { return fmt.Sprint(map[string]string(p)) }

func (p params) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	p[k] = v
	return nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] != "run" {
		fmt.Fprintln(os.Stderr, "usage: tgrun run -f COMPOSITION [--param name=value]... [--out DIR] [--run-id ID] [--timeout DURATION]")
		return 2
	}
	fs := flag.NewFlagSet("tgrun run", flag.ContinueOnError)
	var o tgrun.Options
	p := params{}
	var comps files
	fs.Var(&comps, "f", "composition file (TOML; repeatable)")
	fs.StringVar(&o.PlanDir, "plan-dir", "", "plan directory (default: found from the composition)")
	fs.StringVar(&o.OutDir, "out", "results", "results root: the run goes to OUT/<plan>/<run id>")
	fs.StringVar(&o.RunID, "run-id", "", "run ID (default: time and random; with several -f, the composition's name is appended)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "time limit of the run, build excluded")
	fs.Var(p, "param", "override a test parameter of every group: name=value (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if len(comps) == 0 || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "tgrun: -f COMPOSITION is required, and nothing else")
		return 2
	}
	o.Params = p
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	built := map[string]string{} // plan directory -> binary
	baseID := o.RunID
	for _, c := range comps {
		o := o
		o.Composition = c
		if baseID != "" && len(comps) > 1 {
			o.RunID = baseID + "-" + strings.TrimSuffix(filepath.Base(c), filepath.Ext(c))
		}
		comp, err := tgrun.LoadComposition(c)
		if err == nil && o.PlanDir == "" {
			o.PlanDir, err = tgrun.FindPlanDir(c, comp.Global.Plan)
		}
		if err == nil && built[o.PlanDir] == "" {
			bin, cleanup, berr := tgrun.Build(ctx, o.PlanDir, os.Stderr)
			if berr == nil {
				defer cleanup()
				built[o.PlanDir] = bin
			}
			err = berr
		}
		if err == nil {
			o.Binary = built[o.PlanDir]
			_, err = tgrun.Run(ctx, o)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "tgrun: %s: %v\n", c, err)
			if errors.Is(err, tgrun.ErrComposition) {
				return 2
			}
			return 1
		}
	}
	return 0
}
