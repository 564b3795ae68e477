// Command swarmcheck checks the results of a swarm plan's run: every row
// of swarm.jsonl must show complete delivery (swarm.Result.Complete),
// the cases given must all be there, each with the peers expected.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/p2pmsg/p2pmsg/internal/swarm"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "swarmcheck:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("swarmcheck", flag.ContinueOnError)
	results := fs.String("results", "", "the run's swarm.jsonl")
	cases := fs.String("cases", "", "comma-separated cases that must be present")
	peers := fs.Int("peers", 0, "peers each case must have had (0: any)")
	if err := fs.Parse(args); err != nil {
		return err
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
