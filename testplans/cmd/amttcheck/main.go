// Command amttcheck checks an AMTT run's results for completeness and
// physical soundness, for CI:
//
//	go run ./cmd/amttcheck -results results/amtt/RUN/amtt.jsonl -profile dsl \
//	    -codecs none,gzip,zstd -trials 3 -min-decrease gzip=50
//
// Complete: one row per codec and document, with the trials asked for,
// the document's real size and positive times. Sound: no control message
// beat its link, that is crossed the uplink faster than its serialization
// time plus the round trip; no encoded message beat the round trip; and
// on the largest document each -min-decrease codec cut the AMTT by more
// than the given percentage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// Expectations are what a run must show.
type Expectations struct {
	Profile     string
	Link        linkemu.Link
	Codecs      []string
	Records     []int
	Trials      int
	MinDecrease map[string]float64 // codec -> % on the largest document
}

// Check returns every way res falls short of e.
func Check(res []lab.AMTTResult, e Expectations) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	rows := map[string]map[int]lab.AMTTResult{}
	for _, r := range res {
		if r.Profile != e.Profile {
			bad("row for profile %q, want only %q", r.Profile, e.Profile)
			continue
		}
		if rows[r.Codec] == nil {
			rows[r.Codec] = map[int]lab.AMTTResult{}
		}
		if _, dup := rows[r.Codec][r.Records]; dup {
			bad("%s on %d records: two rows", r.Codec, r.Records)
		}
		rows[r.Codec][r.Records] = r
	}
	largest := slices.Max(e.Records)
	for _, c := range e.Codecs {
		for _, n := range e.Records {
			r, ok := rows[c][n]
			if !ok {
				bad("%s on %d records: missing", c, n)
				continue
			}
			name := fmt.Sprintf("%s on %d records", c, n)
			if want := len(datasets.Employees(n)); r.Bytes != want {
				bad("%s: %d bytes, the document has %d", name, r.Bytes, want)
			}
			if r.Trials != e.Trials {
				bad("%s: %d trials, want %d", name, r.Trials, e.Trials)
			}
			if r.ControlAMTT <= 0 || r.AMTT <= 0 {
				bad("%s: non-positive AMTT (control %v, %v)", name, r.ControlAMTT, r.AMTT)
				continue
			}
			if d := lab.Decrease(r.ControlAMTT, r.AMTT); math.Abs(d-r.DecreasePct) > 1e-6 {
				bad("%s: decrease %.3f%%, the times give %.3f%%", name, r.DecreasePct, d)
			}
			if floor := e.Link.Up.SerializationTime(r.Bytes) + e.Link.RTT(); r.ControlAMTT < floor {
				bad("%s: control AMTT %v beats the link: serialization at %s plus the round trip is %v",
					name, r.ControlAMTT, lab.FormatBitRate(e.Link.Up.Bandwidth*8), floor)
			}
			if r.AMTT < e.Link.RTT() {
				bad("%s: AMTT %v beats the round trip %v", name, r.AMTT, e.Link.RTT())
			}
			if min, ok := e.MinDecrease[c]; ok && n == largest && r.DecreasePct <= min {
				bad("%s: %s cut the AMTT by %.1f%%, want more than %.1f%% (control %v, %v)", name, c, r.DecreasePct, min, r.ControlAMTT, r.AMTT)
			}
		}
	}
	for c := range rows {
		if !slices.Contains(e.Codecs, c) {
			bad("unexpected codec %q", c)
		}
	}
	return errs
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("amttcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		results, profile, codecs, sizes, minDec string
		trials                                  int
	)
	fs.StringVar(&results, "results", "", "AMTT results (JSON lines)")
	fs.StringVar(&profile, "profile", "", "the run's link profile")
	fs.StringVar(&codecs, "codecs", strings.Join(lab.DefaultAMTTCodecs, ","), "codecs the run measured")
	fs.StringVar(&sizes, "sizes", "1,50,100,250,500,750,1000", "record counts the run measured")
	fs.IntVar(&trials, "trials", lab.DefaultAMTTTrials, "trials per document the run measured")
	fs.StringVar(&minDec, "min-decrease", "", "codec=percent,...: the least % decrease on the largest document")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h: the usage, printed by flag
		}
		return 2
	}
	if results == "" || profile == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "amttcheck: -results and -profile are required")
		return 2
	}
	e := Expectations{Profile: profile, Codecs: strings.Split(codecs, ","), Trials: trials, MinDecrease: map[string]float64{}}
	var err error
	if _, e.Link, err = lab.ResolveLink(profile, lab.NoOverrides); err != nil {
		fmt.Fprintf(stderr, "amttcheck: %v\n", err)
		return 2
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(stderr, "amttcheck: -sizes: %v\n", err)
			return 2
		}
		e.Records = append(e.Records, n)
	}
	if minDec != "" {
		for _, kv := range strings.Split(minDec, ",") {
			c, v, ok := strings.Cut(kv, "=")
			pct, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				fmt.Fprintf(stderr, "amttcheck: -min-decrease: %q is not codec=percent\n", kv)
				return 2
			}
			e.MinDecrease[c] = pct
		}
	}
	f, err := os.Open(results)
	if err != nil {
		fmt.Fprintf(stderr, "amttcheck: %v\n", err)
		return 1
	}
	defer f.Close()
	res, err := lab.ReadAMTTJSON(f)
	if err != nil {
		fmt.Fprintf(stderr, "amttcheck: %v\n", err)
		return 1
	}
	if errs := Check(res, e); len(errs) > 0 {
		fmt.Fprintf(stderr, "amttcheck: %s: %d problems:\n%v\n", results, len(errs), errors.Join(errs...))
		return 1
	}
	for _, r := range res {
		if r.Records == slices.Max(e.Records) && r.Codec != lab.CodecNone {
			fmt.Fprintf(stdout, "amttcheck: %s: %s on %d bytes: control %v (floor %v), %v, %+.1f%%\n", profile, r.Codec, r.Bytes,
				r.ControlAMTT.Round(time.Microsecond), (e.Link.Up.SerializationTime(r.Bytes) + e.Link.RTT()).Round(time.Microsecond),
				r.AMTT.Round(time.Microsecond), r.DecreasePct)
		}
	}
	fmt.Fprintf(stdout, "amttcheck: %s: %d rows complete and physically sound\n", results, len(res))
	return 0
}
