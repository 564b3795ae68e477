package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/provenance"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// Files `lab grid --out DIR` writes.
const (
	gridJSONFile     = "grid.jsonl"
	gridMarkdownFile = "grid.md"
	gridChartFile    = "grid.svg"
	gridSwitchFile   = "switch.md"
)

func newLabGridCmd() *cobra.Command {
	var (
		profiles, docs, choices, cpus, out, traceFile, modelsFile, from string
		switchFrom, switchTo, switchDoc                                 string
		asJSON, full, doSwitch                                          bool
		trials, warmup, remeasure                                       int
		slow                                                            float64
		maxMessage, budget                                              time.Duration
		seed                                                            uint64
	)
	cmd := &cobra.Command{
		Use:   "grid",
		Short: "The adaptive encoding against every fixed choice, on a grid of links and documents",
		Long: `Measure the AMTT (the AMTT experiment's trial protocol: send through an
encoding adapter, acknowledge once decoded, time send-to-acknowledgement, drop
the warm-up, the highest and the lowest, average) of the adaptive scheme
"auto" against "identity" (elements as they are) and every fixed codec, per
link profile × document × receiver CPU, between two p2pmsg nodes in this
process. All choices of a cell are measured side by side, round by round in
an order shuffled each round, on one connection: compare figures within a
cell, and repeat runs on a busy machine. A choice whose last exchange took
under 10 ms sends the document once more, untimed, before each timed one, so
that it is timed as in a stream of its own messages. A fixed choice more than
twice as slow as the best after --trials rounds (or any doubling of them) is
retired from the cell's later rounds; identity never is. A cell in which
more than a tenth of the fixed choices' exchanges took over twice their
choice's median and 1 ms more (the machine stalled them: another process, a
busy host) is measured again, up to --remeasure more times, and the least
disturbed measurement kept; the report lists those cells.

The sender is one node for the whole run: its models carry over from cell to
cell; each link's receiver is a new peer, whose path it probes (pathinfo) and
whose decode profile it fetches. A "slow" receiver's decoding is throttled
(--slow-factor times longer: a 450 MHz-class CPU against this machine's).
A fixed choice whose encoded document would take longer than --max-message
over the link is skipped in that cell. Where rounds are short, a document
gets rounds until --budget has passed (after its warm-up), up to 4000 ×
--trials: on the fastest links choices a microsecond apart need thousands
of rounds to be told apart. Auto's paired ratio to each fixed choice comes
with a 95% interval where a cell had six rounds or more.

The default run is small (a few minutes); --full is every profile
(` + strings.Join(lab.AllGridProfiles, ", ") + `), document
(` + strings.Join(lab.AllGridDocs, ", ") + `),
fixed choice (` + strings.Join(lab.AllGridChoices, ", ") + `) and both CPUs,
which takes hours; --profile, --docs, --choices or --cpu given with it
narrow it (--full --profile dsl: one link of the full grid).

Then, unless --switch=false, the link-change run: auto sends one document
over a connection whose link switches (--switch-from → --switch-to), and
the report says after how many messages auto was back within 5% (or 1 ms)
of the best fixed choice on the new link.

Output: Markdown on stdout (the summary per cell with the targets, then
every choice's AMTT per link), or --json one object per cell and choice;
--out DIR also writes ` + gridJSONFile + `, ` + gridMarkdownFile + `, the heat map ` + gridChartFile + ` (auto's
excess over the best fixed choice per cell) and ` + runFile + ` (the command line,
when, the commit or why it is unknown, the machine and its load), and
` + gridSwitchFile + `, the link-change report, only when the link-change run ran: not
with --switch=false (which removes an earlier run's ` + gridSwitchFile + ` from DIR);
with --from, the ` + runFile + ` and ` + gridSwitchFile + ` beside FILE are copied, or DIR's removed. Progress goes to stderr, auto's decisions to --trace FILE
(every one of a document's first 200 timed rounds, then one in 20).
--from FILE reports an earlier run's JSON lines again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			start := provenance.Begin()
			if from != "" {
				// --from measures nothing: a flag that shapes a
				// measurement would be silently ignored.
				for _, name := range gridRunFlags {
					if cmd.Flags().Changed(name) {
						return usageError{fmt.Errorf("--%s does not apply with --from, which reports an earlier run and measures nothing", name)}
					}
				}
			}
			if !doSwitch {
				// No link-change run: its flags would be silently ignored.
				for _, name := range []string{"switch-from", "switch-to", "switch-doc"} {
					if cmd.Flags().Changed(name) {
						return usageError{fmt.Errorf("--%s does not apply with --switch=false, which runs no link change", name)}
					}
				}
			}
			cfg := lab.GridConfig{Trials: trials, Warmup: warmup, SlowFactor: slow, MaxMessage: maxMessage, DocBudget: budget, Remeasure: remeasure, Seed: seed, Progress: cmd.ErrOrStderr()}
			if warmup == 0 {
				cfg.Warmup = -1
			}
			if remeasure == 0 {
				cfg.Remeasure = -1
			}
			if budget == 0 {
				cfg.DocBudget = -1
			}
			if full {
				cfg.Profiles, cfg.Docs, cfg.Choices, cfg.CPUs = lab.AllGridProfiles, lab.AllGridDocs, lab.AllGridChoices, []string{lab.CPUFast, lab.CPUSlow}
			}
			for _, f := range []struct {
				name, val string
				dst       *[]string
			}{{"profile", profiles, &cfg.Profiles}, {"docs", docs, &cfg.Docs}, {"choices", choices, &cfg.Choices}, {"cpu", cpus, &cfg.CPUs}} {
				if cmd.Flags().Changed(f.name) {
					if *f.dst = splitList(f.val); len(*f.dst) == 0 {
						return usageError{fmt.Errorf("--%s %q names nothing", f.name, f.val)}
					}
				}
			}
			if !lab.ValidSlowFactor(slow) {
				return usageError{fmt.Errorf("--slow-factor %s: want %s", cmd.Flags().Lookup("slow-factor").Value, lab.SlowFactorRule)}
			}
			// A seed of 0 is the engine's default, 1 (see lab amtt).
			if err := positiveFlags(cmd, "max-message", "seed"); err != nil {
				return err
			}
			if trials < lab.MinAMTTTrials || warmup < 0 || budget < 0 || remeasure < 0 {
				return usageError{fmt.Errorf("--trials must be >= %d, --warmup, --budget and --remeasure >= 0", lab.MinAMTTTrials)}
			}
			// The configuration is checked before --out is made, so that
			// a refused command line leaves no directory behind.
			swCfg := lab.SwitchConfig{From: switchFrom, To: switchTo, Doc: switchDoc, Choices: cfg.Choices, CPU: lab.CPUFast, Seed: seed}
			if from == "" {
				if err := cfg.Check(); err != nil {
					return usageError{err}
				}
				// The link-change run comes after the grid: its flags are
				// checked now, not after the grid's minutes or hours.
				if doSwitch {
					if err := swCfg.Check(); err != nil {
						return usageError{fmt.Errorf("--switch-from, --switch-to, --switch-doc: %w", err)}
					}
				}
			}
			// --models is saved after the run: a directory that is not
			// there is refused now, not made (the models' Save makes it).
			if modelsFile != "" {
				if _, err := os.Stat(filepath.Dir(modelsFile)); err != nil {
					return usageError{fmt.Errorf("--models: %w", err)}
				}
			}
			if from != "" { // reports of an earlier run, read before --out is made
				f, err := os.Open(from)
				if err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				defer f.Close()
				res, err := lab.ReadGridJSON(f)
				if err != nil {
					return err
				}
				if _, err := prepareOutDir(out); err != nil {
					return err
				}
				if out != "" {
					if err := writeGridFiles(out, res, nil); err != nil {
						return err
					}
					// The earlier run's link-change report goes with
					// its results; an older one in --out would read as
					// that run's.
					for _, name := range []string{provenance.File, gridSwitchFile} {
						if err := provenance.CopyFile(filepath.Dir(from), out, name); err != nil {
							return err
						}
					}
				}
				if asJSON {
					return lab.WriteGridJSON(cmd.OutOrStdout(), res)
				}
				return lab.WriteGridMarkdown(cmd.OutOrStdout(), res)
			}
			undoOut, err := prepareOutDir(out)
			if err != nil {
				return err
			}
			defer undoOnFailure(&err, undoOut)
			models := adaptive.NewModels()
			if modelsFile != "" {
				m, err := adaptive.Load(modelsFile)
				if err != nil {
					return err
				}
				models = m
			}
			cfg.Models = models
			if traceFile != "" {
				f, err := os.Create(traceFile)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.Trace = f
			}
			ctx, stop := interrupt.Context(cmd.Context())
			defer stop()
			defer exitOnSignal(ctx, &err)
			res, err := lab.RunGrid(ctx, cfg)
			if err != nil {
				if errors.Is(err, lab.ErrGridConfig) {
					return usageError{err}
				}
				return err
			}
			var sw *lab.SwitchResult
			if doSwitch {
				swCfg.Models, swCfg.Progress, swCfg.Trace = models, cmd.ErrOrStderr(), cfg.Trace
				sw, err = lab.RunSwitch(ctx, swCfg)
				if err != nil {
					if errors.Is(err, lab.ErrGridConfig) {
						return usageError{err}
					}
					return err
				}
			}
			if modelsFile != "" {
				if err := models.Save(modelsFile); err != nil {
					return err
				}
			}
			if out != "" {
				if err := writeGridFiles(out, res, sw); err != nil {
					return err
				}
				if err := writeRunFile(out, cmd, start); err != nil {
					return err
				}
				if sw == nil {
					// A switch report of an earlier run into the same
					// directory would read as this run's.
					if err := os.Remove(filepath.Join(out, gridSwitchFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return lab.WriteGridJSON(w, res)
			}
			if err := lab.WriteGridMarkdown(w, res); err != nil {
				return err
			}
			if sw != nil {
				fmt.Fprintln(w)
				return lab.WriteSwitchMarkdown(w, sw)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&profiles, "profile", strings.Join(lab.DefaultGridProfiles, ","), "comma-separated link profiles (loopback: none)")
	f.StringVar(&docs, "docs", strings.Join(lab.DefaultGridDocs, ","), "comma-separated documents: employees-N, dataset-N, random-SIZE")
	f.StringVar(&choices, "choices", strings.Join(lab.DefaultGridChoices, ","), "comma-separated fixed choices: identity and codec specs (auto picks among the same codecs)")
	f.StringVar(&cpus, "cpu", lab.CPUFast, "comma-separated receiver CPUs: fast, slow")
	f.Float64Var(&slow, "slow-factor", lab.DefaultSlowFactor, "how many times longer a slow receiver decodes: "+lab.SlowFactorRule)
	f.BoolVar(&full, "full", false, "every profile, document, fixed choice and both CPUs (hours); --profile, --docs, --choices, --cpu narrow it")
	f.IntVar(&trials, "trials", lab.DefaultGridTrials, "measured rounds per document")
	f.IntVar(&warmup, "warmup", lab.DefaultGridWarmup, "rounds discarded at the start of each document")
	f.DurationVar(&maxMessage, "max-message", lab.DefaultGridMaxMessage, "skip a fixed choice whose document takes longer over the link")
	f.DurationVar(&budget, "budget", lab.DefaultGridDocBudget, "time a document may take in a fast cell, for more rounds than --trials (at most 4000×); 0: --trials only")
	f.IntVar(&remeasure, "remeasure", lab.DefaultGridRemeasure, "measure a cell up to this many more times when the machine disturbed more than a tenth of its exchanges (keeping the least disturbed); 0: never")
	f.BoolVar(&doSwitch, "switch", true, "also run the link-change experiment")
	f.StringVar(&switchFrom, "switch-from", "lan", "link before the change")
	f.StringVar(&switchTo, "switch-to", "dsl", "link after the change")
	f.StringVar(&switchDoc, "switch-doc", lab.DefaultSwitchDoc, "document of the link-change run")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per cell and choice per line")
	f.StringVar(&out, "out", "", "also write "+gridJSONFile+", "+gridMarkdownFile+", "+gridChartFile+", "+runFile+" and, when the link-change run ran (not with --switch=false; with --from, the one beside FILE), "+gridSwitchFile+" into this directory")
	f.StringVar(&traceFile, "trace", "", "write auto's decisions to this file (tracing them adds to auto's time on the fastest links)")
	f.StringVar(&from, "from", "", "run nothing: report the JSON lines of an earlier run from this file (as Markdown, or with --json as JSON lines; the measuring flags are refused)")
	f.StringVar(&modelsFile, "models", "", "load the sender's models from this file and save them back (default: start empty)")
	f.Uint64Var(&seed, "seed", 1, "seed of the links' jitter and of the rounds' order, 1 or more")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// gridRunFlags are lab grid's flags that shape a measurement, which
// --from, reporting an earlier run, refuses rather than ignores.
var gridRunFlags = []string{"profile", "docs", "choices", "cpu", "full", "slow-factor", "trials", "warmup", "max-message", "budget", "remeasure", "seed", "models", "trace", "switch", "switch-doc", "switch-from", "switch-to"}

func writeGridFiles(dir string, res []lab.GridResult, sw *lab.SwitchResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var j, md, svg, sm bytes.Buffer
	if err := lab.WriteGridJSON(&j, res); err != nil {
		return err
	}
	if err := lab.WriteGridMarkdown(&md, res); err != nil {
		return err
	}
	if err := lab.WriteGridChart(&svg, res); err != nil {
		return err
	}
	files := map[string][]byte{gridJSONFile: j.Bytes(), gridMarkdownFile: md.Bytes(), gridChartFile: svg.Bytes()}
	if sw != nil {
		if err := lab.WriteSwitchMarkdown(&sm, sw); err != nil {
			return err
		}
		files[gridSwitchFile] = sm.Bytes()
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
