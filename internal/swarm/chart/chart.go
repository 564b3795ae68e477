// Package chart draws the swarm cases' delivery latency CDF as SVG, for
// `p2pmsg lab swarm --out` and the swarm plan's collected results. It sits
// beside package swarm rather than in it because the plotting library and
// its fonts are several megabytes of a binary that a peer, which only
// measures, does not need.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/p2pmsg/p2pmsg/internal/swarm"
)

// File is the name Files gives the chart.
const File = "swarm.svg"

// palette is the lines' colours, those of lab's other charts after their
// grey control line.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff},
	{0xd6, 0x27, 0x28, 0xff},
	{0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff},
	{0x94, 0x67, 0xbd, 0xff},
	{0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

// ErrNoLatencies reports results without latencies to chart (results read
// back from JSON carry none).
var ErrNoLatencies = errors.New("chart: no swarm latencies to chart")

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

// Write draws each case's delivery latency CDF (log time axis)
// as SVG. It needs the results' Latencies, which JSON does not carry.
func Write(w io.Writer, results []swarm.Result) error {
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
		line.Color = palette[(k-1)%len(palette)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%d peers)", r.Case, r.Peers), line)
	}
	if k == 0 {
		return ErrNoLatencies
	}
	if p.X.Min == p.X.Max {
		// One latency, or all alike: gonum would widen the range to
		// ±1 ms, below zero on the log axis for a latency under 1 ms,
		// and panic. A factor of 2 either side keeps it on the axis.
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	canvas := vgsvg.New(16*vg.Centimeter, 11*vg.Centimeter)
	p.Draw(draw.New(canvas))
	_, err := canvas.WriteTo(w)
	return err
}

// Files is swarm.Files with, when the results carry latencies, the chart.
func Files(res []swarm.Result) (map[string][]byte, error) {
	files, err := swarm.Files(res)
	if err != nil {
		return nil, err
	}
	var svg bytes.Buffer
	if err := Write(&svg, res); err == nil {
		files[File] = svg.Bytes()
	}
	return files, nil
}
