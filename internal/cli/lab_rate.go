package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/provenance"
)

func newLabRateCmd() *cobra.Command {
	var (
		layers, sizes, shapes, transport, out string
		messages                              int
		load                                  float64
		paceStep                              time.Duration
		asJSON                                bool
	)
	cmd := &cobra.Command{
		Use:   "rate",
		Short: "One-way message rate and latency under load per layer, on loopback",
		Long: `Measure how many messages per second one node moves to others in this
process, one way, from the Send call to the receiver's handler. For each
layer, shape (senders goroutines on one node, each sending to every one of
peers nodes in turn) and payload size: a warm-up, a run of --messages
messages sent as fast as the senders can (at most 256 MiB of payload and
about 3 s at the warm-up's rate: a slow layer sends fewer, as the JSON's
"messages" says), and a run of about one second at half that rate, paced
in steps of --pace-step (the messages due in a step handed to the senders
at once), for the latency p50 and p99 (so it shows queueing, not
saturation).

Layers: stream (a raw libp2p stream as go-libp2p makes it, its yamux without
the node's write coalescing, one Write per message), stream-bufio (the same
through a 64 KiB bufio.Writer, flushed when the sender pauses: the
ceiling), endpoint, pipe (unicast pipe Send to an input pipe's Receive),
propagate (a propagate pipe whose members are the peers; its rate counts
copies handed over, over the members), socket (one Write per
message) and nats (the reference the rate targets were set against: an
embedded NATS server on loopback, one publishing and one subscribing
nats.go connection per peer, plaintext through the broker; compare its
figures within a run, not across machines).

A run whose receivers get nothing more for 5 s ends there: lost counts the
messages (for propagate, the copies) that had not arrived, over both runs,
and the rate counts only what arrived.`,
		Example: `  p2pmsg lab rate --layer stream,endpoint,pipe --sizes 100 --shapes 1x1
  p2pmsg lab rate --json > rate.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			start := provenance.Begin()
			var chosen []string
			for _, name := range strings.Split(layers, ",") {
				chosen = append(chosen, strings.TrimSpace(name))
			}
			sz, err := lab.ParseSizes(sizes)
			if err != nil {
				return usageError{fmt.Errorf("--sizes: %w", err)}
			}
			sh, err := parseShapes(shapes)
			if err != nil {
				return usageError{err}
			}
			if load <= 0 || load > 1 {
				return usageError{fmt.Errorf("--load must be in (0, 1]")}
			}
			if err := positiveFlags(cmd, "messages"); err != nil {
				return err
			}
			for _, n := range sz {
				if n < 12 {
					return usageError{fmt.Errorf("size %d: a rate message carries a timestamp and a pass number; use 12 bytes or more", n)}
				}
			}
			switch {
			case paceStep < 0:
				return usageError{fmt.Errorf("--pace-step must not be negative")}
			case paceStep >= lab.DefaultLatencyTime:
				return usageError{fmt.Errorf("--pace-step %v: want less than the latency run's %v", paceStep, lab.DefaultLatencyTime)}
			case paceStep == 0:
				paceStep = -1 // lab: as often as it can
			}
			ctx, finish, err := measuring(cmd, out)
			if err != nil {
				return err
			}
			defer finish(&err)
			res, err := lab.RunRate(ctx, lab.RateConfig{
				Layers: chosen, Sizes: sz, Shapes: sh, Transport: transport, Messages: messages, Load: load, PaceStep: paceStep,
				Progress: cmd.ErrOrStderr(),
			})
			if errors.Is(err, lab.ErrUnknownLayer) || errors.Is(err, lab.ErrRateConfig) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			return writeRows(cmd, res, asJSON, func(w io.Writer, res []lab.RateResult) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "layer\ttransport\tsize\tsenders\tpeers\tmessages/s\tbytes/s\tp50\tp99\tlost\t")
				for _, r := range res {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%v\t%v\t%d\t\n", r.Layer, r.Transport, lab.FormatSize(r.Size), r.Senders, r.Peers,
						formatCount(r.MsgsPerS), formatRate(r.BytesPerS), r.P50, r.P99, r.Lost)
				}
				return tw.Flush()
			}, out, "rate", start)
		},
	}
	f := cmd.Flags()
	f.StringVar(&layers, "layer", strings.Join(lab.RateLayers, ","), "comma-separated layers: "+strings.Join(lab.RateLayers, ", "))
	f.StringVar(&sizes, "sizes", "16,100,1K,16K", "comma-separated payload sizes (K, M suffixes; at least 12 bytes)")
	f.StringVar(&shapes, "shapes", "1x1,8x1,1x8", "comma-separated SENDERSxPEERS: sending goroutines on one node, receiving nodes")
	f.StringVar(&transport, "transport", lab.TransportTCP, "libp2p transport: tcp or quic")
	f.IntVar(&messages, "messages", 200_000, "messages per maximum-rate run (fewer for large sizes, at most 256 MiB, and for slow layers, about 3 s)")
	f.Float64Var(&load, "load", 0.5, "the fraction of the measured maximum rate the latency run offers")
	f.DurationVar(&paceStep, "pace-step", lab.DefaultPaceStep, "how often the latency run hands out the messages that came due, less than the run (0: as often as it can, a few at a time: see docs/performance.md)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.StringVar(&out, "out", "", outUsage("rate"))
	return cmd
}

// parseShapes reads "1x1,8x1,1x8".
func parseShapes(s string) ([]lab.RateShape, error) {
	var out []lab.RateShape
	for _, f := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(f), "x")
		sn, err1 := strconv.Atoi(a)
		pn, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--shapes: shape %q: want SENDERSxPEERS, e.g. 8x1", f)
		}
		if sn < 1 || pn < 1 {
			return nil, fmt.Errorf("--shapes: shape %q: want at least one sender and one peer", f)
		}
		out = append(out, lab.RateShape{Senders: sn, Peers: pn})
	}
	return out, nil
}

// formatCount prints a count per second with a metric suffix.
func formatCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f k", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// writeJSONLines prints each row as one JSON object per line.
func writeJSONLines[T any](w io.Writer, rows []T) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
