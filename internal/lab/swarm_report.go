package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteSwarmJSON writes one JSON object per result per line.
func WriteSwarmJSON(w io.Writer, results []SwarmResult) error { return writeJSONLines(w, results) }

// WriteSwarmMarkdown writes the results as Markdown tables: delivery and
// latency per case, then what each peer cost.
func WriteSwarmMarkdown(w io.Writer, results []SwarmResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "| case | peers | delivered / expected | duplicates | p50 | p99 | max | failures | resolution p50 / p99 | bytes per delivery |")
	fmt.Fprintln(bw, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		if r.Case == SwarmIdle {
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
		if r.GossipDropped > 0 {
			fmt.Fprintf(bw, "\n%s: gossipsub dropped and counted %d message copies (pipe.Stats).\n", r.Case, r.GossipDropped)
		}
		switch r.Case {
		case SwarmRelay:
			fmt.Fprintf(bw, "\nrelay: %d relayed connections to the private peers, %d through the busiest relay.\n", r.RelayCircuits, r.RelayMaxCircuits)
		case SwarmChurn:
			fmt.Fprintf(bw, "\nchurn, unicast: %d messages accepted, %d delivered, %d reported (by Send or Flush), %d lost without an error.\n",
				r.Accepted, r.UnicastDelivered, r.Reported, r.Lost)
		}
	}
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

// cdfPoints is at most about 400 points of the empirical CDF of sorted
// latencies, in milliseconds.
func cdfPoints(lat []time.Duration) plotter.XYs {
	n := len(lat)
	step := max(1, n/400)
	var xys plotter.XYs
	for i := 0; i < n; i += step {
		xys = append(xys, plotter.XY{X: max(float64(lat[i])/float64(time.Millisecond), 0.001), Y: float64(i+1) / float64(n)})
	}
	if last := n - 1; last%step != 0 {
		xys = append(xys, plotter.XY{X: max(float64(lat[last])/float64(time.Millisecond), 0.001), Y: 1})
	}
	return xys
}

// WriteSwarmChart draws each case's delivery latency CDF (log time axis)
// as SVG. It needs the results' Latencies, which JSON does not carry.
func WriteSwarmChart(w io.Writer, results []SwarmResult) error {
	p := plot.New()
	p.Title.Text = "Delivery latency"
	p.X.Label.Text = "latency, send to delivery (ms, log scale)"
	p.Y.Label.Text = "fraction of deliveries"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	k := 0
	for _, r := range results {
		if len(r.Latencies) == 0 {
			continue
		}
		k++
		line, err := plotter.NewLine(cdfPoints(r.Latencies))
		if err != nil {
			return err
		}
		line.Color = chartColor(k)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%d peers)", r.Case, r.Peers), line)
	}
	if k == 0 {
		return fmt.Errorf("lab: no swarm latencies to chart")
	}
	canvas := vgsvg.New(16*vg.Centimeter, 11*vg.Centimeter)
	p.Draw(draw.New(canvas))
	_, err := canvas.WriteTo(w)
	return err
}

// ReadSwarmJSON reads what WriteSwarmJSON wrote (without latencies).
func ReadSwarmJSON(r io.Reader) ([]SwarmResult, error) {
	return readJSONLines[SwarmResult](r, "swarm")
}

// Files SwarmFiles names.
const (
	SwarmJSONFile     = "swarm.jsonl"
	SwarmMarkdownFile = "swarm.md"
	SwarmChartFile    = "swarm.svg"
)

// SwarmFiles renders the results as the files `lab swarm --out` and the
// swarm plan write, by name: the JSON lines, the Markdown tables and,
// when the results carry latencies, the CDF chart.
func SwarmFiles(res []SwarmResult) (map[string][]byte, error) {
	var j, md, svg bytes.Buffer
	if err := WriteSwarmJSON(&j, res); err != nil {
		return nil, err
	}
	if err := WriteSwarmMarkdown(&md, res); err != nil {
		return nil, err
	}
	files := map[string][]byte{SwarmJSONFile: j.Bytes(), SwarmMarkdownFile: md.Bytes()}
	if err := WriteSwarmChart(&svg, res); err == nil {
		files[SwarmChartFile] = svg.Bytes()
	}
	return files, nil
}
