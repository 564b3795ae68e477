package cli

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/provenance"
	"github.com/p2pmsg/p2pmsg/internal/swarm"
	"github.com/p2pmsg/p2pmsg/internal/swarm/chart"
)

func newLabSwarmCmd() *cobra.Command {
	var (
		cfg    swarm.Config
		cases  string
		asJSON bool
		check  bool
		out    string
	)
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "Many peers in this process: propagate, resolution, relays and churn",
		Long: `Run --peers real p2pmsg nodes in this process on loopback, each with its
own host, endpoint, pipe service and DHT (server mode), each dialling
random others until it has --degree connections, and measure one case on a
swarm of its own:

  idle       what an idle peer costs once the swarm has settled (--settle)
  propagate  --publishers peers send --rate messages a second in all, for
             --duration, to a propagate pipe every peer is a member of
  resolve    every peer binds a unicast input pipe; each resolves --targets
             random others' pipes with no hint (DHT and resolver protocol
             only), sends one message and flushes it
  relay      --relay-fraction of the peers have no address and reserve on
             one of --relays relay peers; every other peer sends to
             --targets of them by pipe through the relays
  churn      --churn of the peers (not publishers) leave abruptly during a
             propagate run, each replaced by a new peer that binds the
             departed peer's unicast pipe, while every stable peer sends a
             flushed message every 250 ms to --targets unicast pipes

Latencies run from the send call to the receiving peer's Receive.
delivered/expected counts distinct messages where they were expected
(churn: at the peers alive throughout). Churn's unicast messages are each
refused by Send, or accepted and then delivered, not delivered and
reported by their Flush, or lost (flushed without an error and never
delivered, which must be 0). Per-peer cost is the process's RSS,
goroutines and connections over its start, divided by the peers.`,
		Example: `  p2pmsg lab swarm --peers 20
  p2pmsg lab swarm --peers 50 --case propagate,resolve --json > swarm.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			start := provenance.Begin()
			if err := positiveFlags(cmd, "peers", "publishers", "rate", "duration", "targets", "size", "degree",
				"relay-fraction", "relays", "churn", "settle"); err != nil {
				return err
			}
			if cfg.Cases = splitList(cases); len(cfg.Cases) == 0 && cmd.Flags().Changed("case") {
				return usageError{fmt.Errorf("--case %q names nothing", cases)}
			}
			// Checked before --out is made, so that a refused command
			// line leaves no directory behind.
			if err := cfg.Check(); err != nil {
				return usageError{err}
			}
			ctx, finish, err := measuring(cmd, out)
			if err != nil {
				return err
			}
			defer finish(&err)
			errw := cmd.ErrOrStderr()
			if cfg.Seed == 0 {
				// Drawn here, not by the engine, so that the run can be
				// repeated with the same picks.
				cfg.Seed = rand.Uint64N(math.MaxUint64) + 1
				// Given, as far as run.json's command line goes.
				if err := cmd.Flags().Set("seed", strconv.FormatUint(cfg.Seed, 10)); err != nil {
					return err
				}
				fmt.Fprintf(errw, "lab swarm: seed %d (drawn at random; --seed %d makes the same picks)\n", cfg.Seed, cfg.Seed)
			}
			cfg.Progress = func(s string) { fmt.Fprintln(errw, "lab "+s) }
			res, err := swarm.Run(ctx, cfg)
			if errors.Is(err, swarm.ErrUnknownCase) || errors.Is(err, swarm.ErrConfig) {
				return usageError{err}
			}
			if len(res) == 0 {
				return err
			}
			if check && err == nil {
				var short []error
				for _, r := range res {
					if cerr := r.Complete(); cerr != nil {
						short = append(short, cerr)
					}
				}
				err = errors.Join(short...)
			}
			if out != "" {
				if werr := writeSwarmFiles(out, res); werr != nil {
					return errors.Join(err, werr)
				}
				if werr := writeRunFile(out, cmd, start); werr != nil {
					return errors.Join(err, werr)
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if werr := swarm.WriteJSON(w, res); werr != nil {
					return werr
				}
			} else if werr := swarm.WriteMarkdown(w, res); werr != nil {
				return werr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Peers, "peers", 20, "peers in the swarm")
	f.StringVar(&cases, "case", strings.Join(swarm.Cases, ","), "comma-separated cases: "+strings.Join(swarm.Cases, ", "))
	f.IntVar(&cfg.Publishers, "publishers", 4, "propagate, churn: publishing peers")
	f.Float64Var(&cfg.Rate, "rate", 100, "propagate, churn: messages a second, all publishers together")
	f.DurationVar(&cfg.Duration, "duration", 5*time.Second, "propagate, churn: how long the publishers send")
	f.IntVar(&cfg.Targets, "targets", 3, "resolve, relay, churn: pipes each sending peer sends to")
	f.IntVar(&cfg.Size, "size", 100, "payload bytes (at least 20)")
	f.IntVar(&cfg.Degree, "degree", 4, "peers a joining peer connects to")
	f.Float64Var(&cfg.RelayFraction, "relay-fraction", 0.2, "relay: the fraction of peers with no address")
	f.IntVar(&cfg.Relays, "relays", 2, "relay: relay peers")
	f.Float64Var(&cfg.ChurnFraction, "churn", 0.2, "churn: the fraction of peers replaced")
	f.DurationVar(&cfg.Settle, "settle", swarm.Settle, "idle: how long the swarm settles before it is measured (connections trimmed, idle streams timed out)")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the random picks (0: a random one, printed on stderr)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.StringVar(&out, "out", "", "also write "+swarm.JSONFile+", "+swarm.MarkdownFile+", "+chart.File+" (delivery latency CDF per case) and "+runFile+" into this directory")
	f.BoolVar(&check, "check", false, "exit non-zero unless every case delivered everything, with no failure and nothing lost")
	return cmd
}

// writeSwarmFiles writes the results, their Markdown tables and their
// latency chart into dir.
func writeSwarmFiles(dir string, res []swarm.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, err := chart.Files(res)
	if err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
