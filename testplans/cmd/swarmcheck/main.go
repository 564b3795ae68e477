// Command swarmcheck checks the results of a swarm plan's run: every row
// of swarm.jsonl must show complete delivery (swarm.Result.Complete),
// the cases given must all be there, each with the peers expected.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/p2pmsg/p2pmsg/internal/swarm"
)

func main() { os.Exit(exitCode(os.Stderr, run(os.Args[1:]))) }

// exitCode is the exit status for run's err, which it reports on w:
// 0 for none or -h (flag printed the usage), 2 for a command line flag
// could not parse (flag printed why and the usage), 1 for a check that
// failed.
func exitCode(w io.Writer, err error) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	default:
		fmt.Fprintln(w, "swarmcheck:", err)
		return 1
	}
}

// usageError is a command line that flag could not parse.
type usageError struct{ error }

func run(args []string) error {
	fs := flag.NewFlagSet("swarmcheck", flag.ContinueOnError)
	results := fs.String("results", "", "the run's swarm.jsonl")
	cases := fs.String("cases", "", "comma-separated cases that must be present")
	peers := fs.Int("peers", 0, "peers each case must have had (0: any)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	res, err := read(*results)
	if err != nil {
		return err
	}
	var errs []error
	seen := map[string]bool{}
	for _, r := range res {
		seen[r.Case] = true
		if *peers > 0 && r.Peers != *peers {
			errs = append(errs, fmt.Errorf("%s: %d peers, want %d", r.Case, r.Peers, *peers))
		}
		if err := r.Complete(); err != nil {
			errs = append(errs, err)
		}
		if r.Case != swarm.Idle && (r.Expected == 0 || r.P50 <= 0) {
			errs = append(errs, fmt.Errorf("%s: nothing measured", r.Case))
		}
	}
	for _, c := range strings.Split(*cases, ",") {
		if c = strings.TrimSpace(c); c != "" && !seen[c] {
			errs = append(errs, fmt.Errorf("case %s missing", c))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", *results, err)
	}
	fmt.Printf("swarmcheck: %s: %d cases complete\n", *results, len(res))
	return nil
}

func read(path string) ([]swarm.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return swarm.ReadJSON(f)
}
