package swarm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/english"
)

// WriteJSON writes one JSON object per result per line.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown writes the results as Markdown tables: delivery and
// latency per case, then what each peer cost. The idle case sends
// nothing and has no delivery row; results of the idle case alone have no
// delivery table, and a line says why instead.
func WriteMarkdown(w io.Writer, results []Result) error {
	bw := bufio.NewWriter(w)
	if len(results) > 0 && !slices.ContainsFunc(results, func(r Result) bool { return r.Case != Idle }) {
		fmt.Fprintln(bw, "idle sends no message, so it has no delivery or latency to report: it measures what each peer costs once the swarm has settled (--settle), below.")
		return writeCost(bw, results)
	}
	fmt.Fprintln(bw, "| case | peers | delivered / expected | duplicates | p50 | p99 | max | failures | resolution p50 / p99 | bytes per delivery |")
	fmt.Fprintln(bw, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		if r.Case == Idle {
			continue
		}
		res := "—"
		if r.ResolveP50 > 0 {
			res = fmt.Sprintf("%v / %v", roundDur(r.ResolveP50), roundDur(r.ResolveP99))
		}
		bpd := "—"
		if r.BytesPerDelivery > 0 {
			bpd = fmt.Sprintf("%.0f", r.BytesPerDelivery)
		}
		fmt.Fprintf(bw, "| %s | %d | %d / %d | %d | %v | %v | %v | %d | %s | %s |\n", r.Case, r.Peers, r.Delivered, r.Expected,
			r.Duplicates, roundDur(r.P50), roundDur(r.P99), roundDur(r.Max), r.Failures, res, bpd)
	}
	for _, r := range results {
		if r.Shortfall != "" {
			fmt.Fprintf(bw, "\n%s: the first member short: %s.\n", r.Case, r.Shortfall)
		}
		if r.GossipDropped > 0 {
			fmt.Fprintf(bw, "\n%s: gossipsub dropped and counted %s (pipe.Stats).\n", r.Case, english.Count(int(r.GossipDropped), "message copy", "message copies"))
		}
		switch r.Case {
		case Relay:
			fmt.Fprintf(bw, "\nrelay: %s to the private peers, %d through the busiest relay.\n", english.Count(r.RelayCircuits, "relayed connection", "relayed connections"), r.RelayMaxCircuits)
		case Churn:
			fmt.Fprintf(bw, "\nchurn, unicast: %s accepted: %d delivered, %d not delivered and reported by Flush, %d lost without an error; %s.\n",
				english.Count(r.Accepted, "message", "messages"), r.UnicastDelivered, r.Reported, r.Lost,
				english.Count(r.Refused, "Send refused", "Sends refused"))
		}
	}
	return writeCost(bw, results)
}

// writeCost ends WriteMarkdown: the table of what each peer cost.
func writeCost(bw *bufio.Writer, results []Result) error {
	fmt.Fprintln(bw, "\n| case | peers | RSS per peer | PSS per peer | goroutines per peer | connections per peer |")
	fmt.Fprintln(bw, "|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(bw, "| %s | %d | %.1f MB | %.1f MB | %.0f | %.1f |\n", r.Case, r.Peers, float64(r.RSSPerPeer)/1e6, float64(r.PSSPerPeer)/1e6, r.GoroutinesPerPeer, r.ConnsPerPeer)
	}
	return bw.Flush()
}

// roundDur rounds ns to three significant figures or so, for tables.
func roundDur(ns int64) time.Duration {
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

// ReadJSON reads what WriteJSON wrote (without latencies).
func ReadJSON(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var v Result
		if err := json.Unmarshal(b, &v); err != nil {
			return out, fmt.Errorf("swarm: results line %d: %w", line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// The names Files gives the files.
const (
	JSONFile     = "swarm.jsonl"
	MarkdownFile = "swarm.md"
)

// Files renders the results as the files `lab swarm --out` and the
// swarm plan write, by name: the JSON lines and the Markdown tables.
// The latency chart is package chart's, which links a plotting library a
// peer does not need.
func Files(res []Result) (map[string][]byte, error) {
	var j, md bytes.Buffer
	if err := WriteJSON(&j, res); err != nil {
		return nil, err
	}
	if err := WriteMarkdown(&md, res); err != nil {
		return nil, err
	}
	return map[string][]byte{JSONFile: j.Bytes(), MarkdownFile: md.Bytes()}, nil
}
