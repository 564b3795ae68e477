package cli

import (
	"errors"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/pkg/lab"
)

func newLabSwarmCmd() *cobra.Command {
	var (
		cfg    lab.SwarmConfig
		cases  string
		asJSON bool
		check  bool
	)
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "Many peers in this process: propagate, resolution, relays and churn",
		Long: `Run --peers real p2pmsg nodes in this process on loopback, each with its
own host, endpoint, pipe service and DHT (server mode), every new peer
connected to --degree random earlier ones, and measure one case on a swarm
of its own:

  idle       what an idle peer costs once the swarm has settled
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
             flushed message every 100 ms to --targets unicast pipes

Latencies run from the send call to the receiving peer's Receive.
delivered/expected counts distinct messages where they were expected
(churn: at the peers alive throughout); accepted, reported and lost account
for churn's unicast messages (lost: accepted, flushed without an error and
never delivered, which must be 0). Per-peer cost is the process's RSS,
goroutines and connections over its start, divided by the peers.`,
		Example: `  p2pmsg lab swarm --peers 20
  p2pmsg lab swarm --peers 50 --case propagate,resolve --json > swarm.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range strings.Split(cases, ",") {
				if c = strings.TrimSpace(c); c != "" {
					cfg.Cases = append(cfg.Cases, c)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			errw := cmd.ErrOrStderr()
			cfg.Progress = func(s string) { fmt.Fprintln(errw, "lab "+s) }
			res, err := lab.RunSwarm(ctx, cfg)
			if errors.Is(err, lab.ErrUnknownCase) || errors.Is(err, lab.ErrSwarmConfig) {
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
			out := cmd.OutOrStdout()
			if asJSON {
				if werr := writeJSONLines(out, res); werr != nil {
					return werr
				}
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "case\tpeers\tdelivered\tdup\tp50\tp99\tmax\tfailures\tresolve p50\tp99\tbytes/delivery\tRSS/peer\tgoroutines/peer\tconns/peer\t")
			for _, r := range res {
				fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%d\t%v\t%v\t%v\t%d\t%v\t%v\t%.0f\t%.1f MB\t%.0f\t%.1f\t\n", r.Case, r.Peers,
					r.Delivered, r.Expected, r.Duplicates, round(r.P50), round(r.P99), round(r.Max), r.Failures,
					round(r.ResolveP50), round(r.ResolveP99), r.BytesPerDelivery, float64(r.RSSPerPeer)/1e6, r.GoroutinesPerPeer, r.ConnsPerPeer)
			}
			if ferr := tw.Flush(); ferr != nil {
				return ferr
			}
			for _, r := range res {
				if r.Case == lab.SwarmChurn {
					fmt.Fprintf(out, "churn unicast: %d accepted, %d delivered, %d reported, %d lost without an error\n", r.Accepted, r.UnicastDelivered, r.Reported, r.Lost)
				}
				if r.Case == lab.SwarmRelay {
					fmt.Fprintf(out, "relay: %d relayed connections to the private peers, %d through the busiest relay\n", r.RelayCircuits, r.RelayMaxCircuits)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Peers, "peers", 20, "peers in the swarm")
	f.StringVar(&cases, "case", strings.Join(lab.SwarmCases, ","), "comma-separated cases: "+strings.Join(lab.SwarmCases, ", "))
	f.IntVar(&cfg.Publishers, "publishers", 4, "propagate, churn: publishing peers")
	f.Float64Var(&cfg.Rate, "rate", 100, "propagate, churn: messages a second, all publishers together")
	f.DurationVar(&cfg.Duration, "duration", 5*time.Second, "propagate, churn: how long the publishers send")
	f.IntVar(&cfg.Targets, "targets", 3, "resolve, relay, churn: pipes each sending peer sends to")
	f.IntVar(&cfg.Size, "size", 100, "payload bytes (at least 20)")
	f.IntVar(&cfg.Degree, "degree", 4, "peers a joining peer connects to")
	f.Float64Var(&cfg.RelayFraction, "relay-fraction", 0.2, "relay: the fraction of peers with no address")
	f.IntVar(&cfg.Relays, "relays", 2, "relay: relay peers")
	f.Float64Var(&cfg.ChurnFraction, "churn", 0.2, "churn: the fraction of peers replaced")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the random picks (0: a random one)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.BoolVar(&check, "check", false, "exit non-zero unless every case delivered everything, with no failure and nothing lost")
	return cmd
}

func round(ns int64) time.Duration {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
