package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/provenance"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// Files `lab amtt --out DIR` writes.
const (
	amttJSONFile     = "amtt.jsonl"
	amttMarkdownFile = "amtt.md"
	amttChartFile    = "amtt.svg"
)

func newLabAMTTCmd() *cobra.Command {
	var (
		profiles, codecs, sizes, up, down, rtt, jitter, loss, out string
		asJSON                                                    bool
		trials, warmup                                            int
		seed                                                      uint64
	)
	var names []string
	for _, p := range linkemu.Profiles() {
		names = append(names, fmt.Sprintf("  %-14s %s", p.Name, p.Description))
	}
	cmd := &cobra.Command{
		Use:   "amtt",
		Short: "Average message transit time with and without compression, over emulated links",
		Long: `Reproduce the Compression Pipe Adapter study (papers/000: Table 5, gzip on
DSL, and its LAN test; TREECHOP and XMLPPM, Tables 6-7, are not here)
between two p2pmsg nodes in this process: the sender's node reaches the
receiver's over loopback TCP through an emulated link (its uplink is the
profile's "up"), and the two talk over two bidirectional pipes. After a
handshake, each trial sends the employees document in a control message
(element not encoded) on the communication pipe, then the same message
through an encoding pipe adapter for each codec; the receiver acknowledges
each once it has decoded it, and the sender times send-to-acknowledgement.
Per document (--sizes, in employee records) the first --warmup trials are
discarded, then the highest and the lowest, and the rest averaged: the
AMTT, and its % decrease against control (negative: slower).

Codecs are specs as "p2pmsg lab codecs" reads them (gzip, gzip:9, zstd:19,
s2, ...); "none" is the control alone.

Profiles (--profile, comma-separated; "custom" starts from no shaping):
` + strings.Join(names, "\n") + `
--up, --down (bits/s: 640k, 3M, 100Mbit/s), --rtt and --jitter (durations)
and --loss change every profile given; a changed profile is reported as
"name*". --loss is the probability that a TCP segment (1460 bytes) is lost,
each way (1% or 0.01, at most 20%): the pipes run over TCP, which loses no
byte, so a loss is the delay of its repair (one RTT after the third
segment behind it by fast retransmit; else a timeout, RTT + 200 ms after
it was sent), and everything behind it waits (pkg/linkemu's doc).

Output: a Markdown table on stdout (--json: one JSON object per codec and
document per line, with the trimmed means, the trial count, the encoded
size (encoded_bytes) and each series' median, standard deviation, lowest
and highest trial (control_spread, spread); docs/experiments.md lists the
fields); --out DIR also writes ` + amttJSONFile + `, ` + amttMarkdownFile + `, an SVG chart
` + amttChartFile + ` and ` + runFile + ` (the command line, when, the commit or why it is
unknown, the machine and its load). Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			start := provenance.Begin()
			o := lab.NoOverrides
			if up != "" {
				if o.Up, err = lab.ParseBitRate(up); err != nil {
					return usageError{fmt.Errorf("--up: %w", err)}
				}
			}
			if down != "" {
				if o.Down, err = lab.ParseBitRate(down); err != nil {
					return usageError{fmt.Errorf("--down: %w", err)}
				}
			}
			if loss != "" {
				if o.Loss, err = lab.ParseLoss(loss); err != nil {
					return usageError{fmt.Errorf("--loss: %w", err)}
				}
			}
			for _, d := range []struct {
				flag, val string
				dst       *time.Duration
			}{{"rtt", rtt, &o.RTT}, {"jitter", jitter, &o.Jitter}} {
				if d.val == "" {
					continue
				}
				if *d.dst, err = time.ParseDuration(d.val); err != nil || *d.dst < 0 {
					return usageError{fmt.Errorf("--%s: invalid duration %q", d.flag, d.val)}
				}
			}
			var records []int
			for _, f := range strings.Split(sizes, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return usageError{fmt.Errorf("--sizes: %q is not a record count", f)}
				}
				records = append(records, n)
			}
			specs := strings.Split(codecs, ",")
			for i := range specs {
				specs[i] = strings.TrimSpace(specs[i])
			}
			if trials < lab.MinAMTTTrials || warmup < 0 {
				return usageError{fmt.Errorf("--trials must be >= %d and --warmup >= 0", lab.MinAMTTTrials)}
			}
			// The engine reads a seed of 0 as its default, 1: --seed 0
			// would repeat --seed 1's run under another name.
			if err := positiveFlags(cmd, "seed"); err != nil {
				return err
			}
			w := warmup
			if w == 0 {
				w = -1 // AMTTConfig reads 0 as "the default" and negative as none
			}
			var cfgs []lab.AMTTConfig
			links := map[string]linkemu.Link{}
			for _, p := range strings.Split(profiles, ",") {
				label, link, err := lab.ResolveLink(strings.TrimSpace(p), o)
				if err != nil {
					return usageError{err}
				}
				if _, ok := links[label]; ok { // the reports key profiles by label: one would be lost
					return usageError{fmt.Errorf("--profile: %q given twice", label)}
				}
				cfg := lab.AMTTConfig{
					Profile: label, Link: link, Codecs: specs, Records: records,
					Trials: trials, Warmup: w, Seed: seed, Progress: cmd.ErrOrStderr(),
				}
				if err := cfg.Validate(); err != nil {
					return usageError{err}
				}
				cfgs = append(cfgs, cfg)
				links[label] = link
			}
			ctx, finish, err := measuring(cmd, out)
			if err != nil {
				return err
			}
			defer finish(&err)
			var all []lab.AMTTResult
			for _, cfg := range cfgs {
				fmt.Fprintf(cmd.ErrOrStderr(), "lab amtt: %s: %s\n", cfg.Profile, lab.DescribeLink(cfg.Link))
				res, err := lab.RunAMTT(ctx, cfg)
				if err != nil {
					return err
				}
				all = append(all, res...)
				if asJSON { // stream: a long run shows its results as they come
					if err := lab.WriteAMTTJSON(cmd.OutOrStdout(), res); err != nil {
						return err
					}
				}
			}
			if out != "" {
				if err := writeAMTTFiles(out, all, links); err != nil {
					return err
				}
				if err := writeRunFile(out, cmd, start); err != nil {
					return err
				}
			}
			if asJSON {
				return nil
			}
			return lab.WriteAMTTMarkdownLinks(cmd.OutOrStdout(), all, links)
		},
	}
	f := cmd.Flags()
	f.StringVar(&profiles, "profile", "dsl", "comma-separated link profiles (or custom)")
	f.StringVar(&up, "up", "", "sender's uplink in bits/s, overriding the profile's (0: unlimited)")
	f.StringVar(&down, "down", "", "sender's downlink in bits/s, overriding the profile's (0: unlimited)")
	f.StringVar(&rtt, "rtt", "", "round-trip propagation delay, overriding the profile's")
	f.StringVar(&jitter, "jitter", "", "extra random one-way delay in [0, jitter), each way")
	f.StringVar(&loss, "loss", "", "probability a TCP segment is lost, each way (1% or 0.01, at most 20%), seen as its retransmission's delay; overrides the profile's")
	f.StringVar(&codecs, "codecs", strings.Join(lab.DefaultAMTTCodecs, ","), "comma-separated codec specs; none is the control alone")
	f.StringVar(&sizes, "sizes", "1,50,100,250,500,750,1000", "comma-separated employee record counts (the paper's seven documents)")
	f.IntVar(&trials, "trials", lab.DefaultAMTTTrials, fmt.Sprintf("measured trials per document, at least %d (the highest and the lowest are dropped)", lab.MinAMTTTrials))
	f.IntVar(&warmup, "warmup", lab.DefaultAMTTWarmup, "trials discarded at the start of each document")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per codec and document per line")
	f.StringVar(&out, "out", "", "also write "+amttJSONFile+", "+amttMarkdownFile+", "+amttChartFile+" and "+runFile+" into this directory")
	f.Uint64Var(&seed, "seed", 1, "seed of the link's jitter and losses, 1 or more")
	return cmd
}

// writeAMTTFiles writes the results, their Markdown table and their chart
// into dir.
func writeAMTTFiles(dir string, res []lab.AMTTResult, links map[string]linkemu.Link) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var j, md, svg bytes.Buffer
	if err := lab.WriteAMTTJSON(&j, res); err != nil {
		return err
	}
	if err := lab.WriteAMTTMarkdownLinks(&md, res, links); err != nil {
		return err
	}
	if err := lab.WriteAMTTChartLinks(&svg, res, links); err != nil {
		return err
	}
	for name, b := range map[string][]byte{amttJSONFile: j.Bytes(), amttMarkdownFile: md.Bytes(), amttChartFile: svg.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
