package tgrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/interrupt"
)

// Exit statuses of the tgrun command, as the p2pmsg command's: 128+N for
// a run cut short by signal N.
const (
	ExitOK    = 0
	ExitError = 1 // a run failed
	ExitUsage = 2 // the command line, a composition or a parameter is wrong
)

const usage = `usage: tgrun run -f COMPOSITION [-f COMPOSITION]... [--param name=value]... [--out DIR] [--run-id ID] [--timeout DURATION] [--plan-dir DIR]

Runs Testground compositions of p2pmsg's plans without Testground or Docker,
as the exec:go builder and the local:exec runner would: each -f in turn,
each plan built once. Every composition and --param is checked against its
plan's manifest (names declared, values of their declared types) before
anything is built or started.

Exit status: 0 every run ok; 1 a run failed; 2 the command line, a
composition or a parameter is wrong; 130 (143, 129) interrupted by SIGINT
(SIGTERM, SIGHUP), every instance stopped and its outputs kept.

Flags of run:
`

// Main runs the tgrun command with args (the program's name left out)
// and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return command(args, stdout, stderr, Options{})
}

// command is Main with every run's Options starting from base (tests set
// Binary and Env there).
func command(args []string, stdout, stderr io.Writer, base Options) int {
	fs, o, comps := runFlags(base)
	switch {
	case len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		printUsage(stdout, fs)
		return ExitOK
	case len(args) == 0 || args[0] != "run":
		printUsage(stderr, fs)
		return ExitUsage
	}
	fs.SetOutput(stderr) // the flag package's own error line
	err := fs.Parse(args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs)
		return ExitOK
	case err != nil:
		printUsage(stderr, fs)
		return ExitUsage
	case len(*comps) == 0 || fs.NArg() > 0:
		fmt.Fprintln(stderr, "tgrun: -f COMPOSITION is required, and nothing else")
		printUsage(stderr, fs)
		return ExitUsage
	}

	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	runs, code := checkAll(*o, *comps, stderr)
	if code != ExitOK {
		return code
	}
	built := map[string]string{} // plan directory -> binary
	for _, r := range runs {
		if err := context.Cause(ctx); err != nil {
			return interrupted(ctx, nil, stderr)
		}
		if r.Binary == "" && built[r.PlanDir] == "" {
			bin, cleanup, err := Build(ctx, r.PlanDir, stderr)
			if err != nil {
				return failed(ctx, r.Composition, nil, err, stderr)
			}
			defer cleanup()
			built[r.PlanDir] = bin
		}
		if r.Binary == "" {
			r.Binary = built[r.PlanDir]
		}
		if res, err := Run(ctx, r); err != nil {
			return failed(ctx, r.Composition, res, err, stderr)
		}
	}
	return ExitOK
}

// runFlags is the flag set of tgrun run, filling in a copy of base and
// the list of compositions.
func runFlags(base Options) (*flag.FlagSet, *Options, *files) {
	fs := flag.NewFlagSet("tgrun run", flag.ContinueOnError)
	fs.Usage = func() {} // printUsage, to stdout or stderr as the case is
	fs.SetOutput(io.Discard)
	o := base
	o.Params = params{}
	var comps files
	fs.Var(&comps, "f", "composition file (TOML; repeatable, run in turn)")
	fs.StringVar(&o.PlanDir, "plan-dir", "", "plan directory (default: found from the composition)")
	fs.StringVar(&o.OutDir, "out", "results", "results root: the run goes to OUT/<plan>/<run id>")
	fs.StringVar(&o.RunID, "run-id", "", "run ID (default: time and random, one per run; an ID given with several -f gets each composition's name appended)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "time limit of each run, build excluded")
	fs.Var(params(o.Params), "param", "override a test parameter of every group: name=value (repeatable)")
	return fs, &o, &comps
}

func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, usage)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// checkAll checks every composition (Check) before any is built or run,
// so that a mistake in the last one costs no run of the first, and
// returns each run's Options.
func checkAll(o Options, comps []string, stderr io.Writer) ([]Options, int) {
	var runs []Options
	for _, c := range comps {
		r := o
		r.Composition = c
		if o.RunID != "" && len(comps) > 1 {
			r.RunID = o.RunID + "-" + strings.TrimSuffix(filepath.Base(c), filepath.Ext(c))
		}
		dir, err := Check(r)
		if err != nil {
			fmt.Fprintln(stderr, errorLine(c, err))
			if errors.Is(err, ErrComposition) {
				return nil, ExitUsage
			}
			return nil, ExitError
		}
		r.PlanDir = dir
		runs = append(runs, r)
	}
	return runs, ExitOK
}

// failed reports a composition's failed build or run and returns the exit
// status: interrupted's when a signal ended ctx.
func failed(ctx context.Context, comp string, res *Result, err error, stderr io.Writer) int {
	if code := interrupted(ctx, res, stderr); code != ExitOK {
		return code
	}
	fmt.Fprintln(stderr, errorLine(comp, err))
	if errors.Is(err, ErrComposition) {
		return ExitUsage
	}
	return ExitError
}

// errorLine is the line tgrun prints for err, an error of this package
// about composition comp: "tgrun: COMP: what". The package's errors lead
// with its name ("tgrun: run failed: …"), and LoadComposition's name the
// file after their sentinel ("tgrun: unusable composition: COMP: …"):
// the line says each once.
func errorLine(comp string, err error) string {
	s := strings.TrimPrefix(err.Error(), "tgrun: ")
	s = strings.Replace(s, ": "+comp+": ", ": ", 1)
	return "tgrun: " + comp + ": " + s
}

// interrupted says, in one line, that a signal ended ctx and where the
// interrupted run's outputs are, and returns 128+N for signal N;
// ExitOK if no signal ended ctx.
func interrupted(ctx context.Context, res *Result, stderr io.Writer) int {
	se, ok := interrupt.Cause(ctx)
	if !ok {
		return ExitOK
	}
	if res != nil {
		fmt.Fprintf(stderr, "tgrun: %v: run %s stopped, every instance ended; outputs so far in %s\n", se, res.RunID, res.Dir)
	} else {
		fmt.Fprintf(stderr, "tgrun: %v\n", se)
	}
	return se.ExitCode()
}

type params map[string]string

func (p params) String() string { return fmt.Sprint(map[string]string(p)) }

func (p params) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	p[k] = v
	return nil
}

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }
