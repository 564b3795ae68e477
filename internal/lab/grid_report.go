package lab

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// GridGzip is the fixed choice the "never worse than gzip always" target
// compares with: gzip at its default level.
const GridGzip = "gzip:6"

// GridCell summarises one cell: auto against the best fixed choice, against
// identity and against gzip always.
type GridCell struct {
	Profile string        `json:"profile"`
	CPU     string        `json:"cpu"`
	Doc     string        `json:"doc"`
	Bytes   int           `json:"bytes"`
	Best    string        `json:"best"` // the best fixed choice
	BestT   time.Duration `json:"best_ns"`
	Auto    time.Duration `json:"auto_ns"`
	// AutoPicks says what auto sent, "xml:3" or "s2:1 3/zstd:3 2".
	AutoPicks string `json:"auto_picks"`
	// Excess is auto's AMTT over the best fixed choice's, in percent
	// (negative: auto was faster).
	Excess    float64 `json:"excess_pct"`
	OverIdent float64 `json:"over_identity_pct"` // NaN when identity was skipped
	// PairedIdent is auto's paired ratio to identity (GridResult.Paired);
	// NaN when identity was skipped or the results predate it.
	PairedIdent float64 `json:"paired_identity"`
	// PairedIdentCI is its 95% confidence interval (GridResult.PairedCI);
	// NaNs when there is none.
	PairedIdentCI [2]float64 `json:"paired_identity_ci"`
	OverGzip      float64    `json:"over_gzip_pct"`  // NaN when gzip:6 was not measured
	MeetsBest     bool       `json:"meets_best"`     // within 5% or 1 ms of the best
	MeetsIdent    bool       `json:"meets_identity"` // within 2% of identity (no floor)
	MeetsGzip     bool       `json:"meets_gzip"`     // within 5% of gzip always (no floor)
	Unmeasured    bool       `json:"unmeasured,omitempty"`
	// Measured and Disturbed are GridResult's.
	Measured    int     `json:"measured,omitempty"`
	Disturbed   float64 `json:"disturbed,omitempty"`
	identityT   time.Duration
	gzipT       time.Duration
	fixedByName map[string]GridResult
}

// Summarize returns a cell per profile, CPU and document, in the results'
// order.
func Summarize(results []GridResult) []GridCell {
	type key struct{ p, c, d string }
	var order []key
	byKey := map[key][]GridResult{}
	for _, r := range results {
		k := key{r.Profile, r.CPU, r.Doc}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out []GridCell
	for _, k := range order {
		c := GridCell{Profile: k.p, CPU: k.c, Doc: k.d, OverIdent: math.NaN(), OverGzip: math.NaN(), PairedIdent: math.NaN(), PairedIdentCI: [2]float64{math.NaN(), math.NaN()}, fixedByName: map[string]GridResult{}}
		var auto *GridResult
		for _, r := range byKey[k] {
			c.Bytes = r.Bytes
			if r.Choice == ChoiceAuto {
				auto = &r
				continue
			}
			c.fixedByName[r.Choice] = r
			if r.Skipped != "" || r.Trials == 0 {
				continue
			}
			if c.Best == "" || r.AMTT < c.BestT {
				c.Best, c.BestT = r.Choice, r.AMTT
			}
		}
		if auto == nil || auto.Trials == 0 || c.Best == "" {
			c.Unmeasured = true
			out = append(out, c)
			continue
		}
		c.Auto = auto.AMTT
		c.Measured, c.Disturbed = auto.Measured, auto.Disturbed
		c.AutoPicks = formatPicks(auto.Picks)
		c.Excess = pct(c.Auto, c.BestT)
		c.MeetsBest = within(c.Auto, c.BestT, TargetPct)
		c.MeetsIdent, c.MeetsGzip = true, true
		if r, ok := c.fixedByName[ChoiceIdentity]; ok && r.Trials > 0 {
			c.identityT = r.AMTT
			c.OverIdent = pct(c.Auto, r.AMTT)
			c.MeetsIdent = withinPct(c.Auto, r.AMTT, 2)
			if v, ok := auto.Paired[ChoiceIdentity]; ok {
				c.PairedIdent = v
			}
			if v, ok := auto.PairedCI[ChoiceIdentity]; ok {
				c.PairedIdentCI = v
			}
		}
		if r, ok := c.fixedByName[GridGzip]; ok && r.Trials > 0 {
			c.gzipT = r.AMTT
			c.OverGzip = pct(c.Auto, r.AMTT)
			c.MeetsGzip = withinPct(c.Auto, r.AMTT, TargetPct)
		}
		out = append(out, c)
	}
	return out
}

func pct(got, ref time.Duration) float64 {
	if ref <= 0 {
		return 0
	}
	return 100 * float64(got-ref) / float64(ref)
}

func formatPicks(p map[string]int) string {
	names := slices.SortedFunc(maps.Keys(p), func(a, b string) int {
		if p[a] != p[b] {
			return p[b] - p[a]
		}
		return strings.Compare(a, b)
	})
	if len(names) == 1 {
		return names[0]
	}
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s×%d", n, p[n]))
	}
	return strings.Join(parts, " ")
}

// WriteGridJSON writes one JSON object per result per line.
func WriteGridJSON(w io.Writer, results []GridResult) error { return writeJSONLines(w, results) }

// ReadGridJSON reads what WriteGridJSON wrote; blank lines are skipped.
func ReadGridJSON(r io.Reader) ([]GridResult, error) { return readJSONLines[GridResult](r, "grid") }

func signed(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", v)
}

// signedAbs is signed(v) with the absolute difference d beside it, for
// the strict targets: on loopback 2% is a microsecond.
func signedAbs(v float64, d time.Duration) string {
	if math.IsNaN(v) {
		return "–"
	}
	sign := "+"
	if d < 0 {
		sign, d = "−", -d
	}
	abs := fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	switch {
	case d < 10*time.Microsecond: // a tenth: under a microsecond is not 0
		abs = fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		abs = fmt.Sprintf("%d µs", d.Round(time.Microsecond)/time.Microsecond)
	}
	return fmt.Sprintf("%+.1f%% (%s%s)", v, sign, abs)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// WriteGridMarkdown writes the summary table (one row per cell: the best
// fixed choice, auto, its excess, its paired ratio to identity and the
// three targets), the targets' tallies and the paired ratio's, then per
// profile and CPU every choice's AMTT.
func WriteGridMarkdown(w io.Writer, results []GridResult) error {
	bw := bufio.NewWriter(w)
	cells := Summarize(results)
	fmt.Fprintln(bw, "| link | cpu | document | bytes | best fixed | best (ms) | auto (ms) | auto sent | over best | over identity | paired ×identity (95% interval) | over gzip:6 | ≤5%/1 ms of best | ≤2% of identity | ≤5% of gzip |")
	fmt.Fprintln(bw, "|---|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|:-:|:-:|:-:|")
	var n, okBest, okIdent, okGzip, nPaired, okPaired, nCI, shownWithin, shownOver int
	var again []string
	for _, c := range cells {
		if c.Unmeasured {
			fmt.Fprintf(bw, "| %s | %s | %s | %d | – | – | – | – | – | – | – | – | – | – | – |\n", c.Profile, c.CPU, c.Doc, c.Bytes)
			continue
		}
		n++
		if c.Measured > 1 {
			again = append(again, fmt.Sprintf("%s/%s %s (%d times, %.0f%% disturbed)", c.Profile, c.CPU, c.Doc, c.Measured, 100*c.Disturbed))
		}
		okBest += b2i(c.MeetsBest)
		okIdent += b2i(c.MeetsIdent)
		okGzip += b2i(c.MeetsGzip)
		paired := "–"
		if !math.IsNaN(c.PairedIdent) {
			paired = fmt.Sprintf("%.3f", c.PairedIdent)
			nPaired++
			okPaired += b2i(c.PairedIdent <= 1.02)
			if lo, hi := c.PairedIdentCI[0], c.PairedIdentCI[1]; !math.IsNaN(lo) {
				paired += fmt.Sprintf(" (%.3f–%.3f)", lo, hi)
				nCI++
				shownWithin += b2i(hi <= 1.02)
				shownOver += b2i(lo > 1.02)
			}
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			c.Profile, c.CPU, c.Doc, c.Bytes, c.Best, ms(c.BestT), ms(c.Auto), c.AutoPicks,
			signed(c.Excess), signedAbs(c.OverIdent, c.Auto-c.identityT), paired, signed(c.OverGzip), yes(c.MeetsBest), yes(c.MeetsIdent), yes(c.MeetsGzip))
	}
	fmt.Fprintf(bw, "\nTargets met in %s: within 5%% (or 1 ms) of the best fixed choice in %d, within 2%% of identity in %d, within 5%% of gzip always in %d.\n", english.Count(n, "cell", "cells"), okBest, okIdent, okGzip)
	if nPaired > 0 {
		fmt.Fprintf(bw, "Auto's paired ratio to identity (the median over rounds of its exchange time over identity's in the same round) is at most 1.02 in %d of the %s where identity was measured.\n", okPaired, english.Count(nPaired, "cell", "cells"))
	}
	if nCI > 0 {
		fmt.Fprintf(bw, "Of the %s with rounds enough for a 95%% interval (in brackets), it lies wholly above 1.02 (auto shown more than 2%% slower than identity) in %d, wholly at or below 1.02 in %d, and across 1.02 (the run cannot tell) in %d.\n",
			english.Count(nCI, "cell", "cells"), shownOver, shownWithin, nCI-shownOver-shownWithin)
	}

	if len(again) > 0 {
		fmt.Fprintf(bw, "Measured again because the machine disturbed more than %.0f%% of the exchanges (more than %v× their choice's median and %v more), the least disturbed measurement kept: %s.\n",
			100*disturbedLimit, disturbedFactor, stallMin, strings.Join(again, "; "))
	}

	writeModelCheck(bw, results)

	type key struct{ p, c string }
	var order []key
	seen := map[key]bool{}
	for _, r := range results {
		if k := (key{r.Profile, r.CPU}); !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
	}
	for _, k := range order {
		var choices, docs []string
		cell := map[string]map[string]GridResult{}
		for _, r := range results {
			if r.Profile != k.p || r.CPU != k.c {
				continue
			}
			if !slices.Contains(choices, r.Choice) {
				choices = append(choices, r.Choice)
			}
			if !slices.Contains(docs, r.Doc) {
				docs = append(docs, r.Doc)
			}
			if cell[r.Doc] == nil {
				cell[r.Doc] = map[string]GridResult{}
			}
			cell[r.Doc][r.Choice] = r
		}
		fmt.Fprintf(bw, "\n#### %s, %s receiver: AMTT (ms), element bytes sent\n\n| document |", ProfileLabel(k.p), k.c)
		for _, c := range choices {
			fmt.Fprintf(bw, " %s |", c)
		}
		fmt.Fprint(bw, "\n|---|")
		for range choices {
			fmt.Fprint(bw, "---:|")
		}
		fmt.Fprintln(bw)
		for _, d := range docs {
			fmt.Fprintf(bw, "| %s |", d)
			for _, c := range choices {
				r := cell[d][c]
				if r.Skipped != "" || r.Trials == 0 {
					fmt.Fprint(bw, " skipped |")
					continue
				}
				fmt.Fprintf(bw, " %s (%d B) |", ms(r.AMTT), r.SentBytes)
			}
			fmt.Fprintln(bw)
		}
	}
	return bw.Flush()
}

// Bytes around a document on the wire (JXTA message, pipe and endpoint
// framing, yamux and TLS) and of an acknowledgement, for the model check.
const (
	msgOverhead = 160
	ackBytes    = 160
)

// writeModelCheck compares the identity choice's AMTT with the transfer
// time model on the profile's nominal link: the message there (warm
// connection, no slow start) plus the acknowledgement back. What the model
// leaves out is the machine's own time per exchange (pipes, endpoint,
// TLS), the same for every choice.
func writeModelCheck(w io.Writer, results []GridResult) {
	var rows []string
	for _, r := range results {
		p, err := linkemu.Lookup(r.Profile)
		if r.Choice != ChoiceIdentity || r.Trials == 0 || err != nil || p.Link.Up.IsZero() || r.CPU != CPUFast {
			continue
		}
		path := adaptive.Path{RTT: p.Link.RTT(), Bandwidth: float64(p.Link.Up.Bandwidth)}
		model := path.TransferTime(r.Bytes+msgOverhead) + p.Link.Down.TransferTime(ackBytes)
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s | %+.2f | %+.1f%% |", r.Profile, r.Doc, r.Bytes, ms(r.AMTT), ms(model),
			float64(r.AMTT-model)/float64(time.Millisecond), pct(r.AMTT, model)))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, "\n#### Transfer-time model against the emulated links\n\n"+
		"Identity's AMTT against the model on the profile's link (message there, acknowledgement back); the difference is this machine's time per exchange.\n\n"+
		"| link | document | bytes | measured (ms) | model (ms) | difference (ms) | difference |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// excessGrid is one CPU's cells for the heat map: columns are documents,
// rows profiles.
type excessGrid struct {
	docs, profiles []string
	z              [][]float64 // [row][col], NaN when unmeasured
}

func (g *excessGrid) Dims() (int, int)   { return len(g.docs), len(g.profiles) }
func (g *excessGrid) Z(c, r int) float64 { return g.z[r][c] }
func (g *excessGrid) X(c int) float64    { return float64(c) }
func (g *excessGrid) Y(r int) float64    { return float64(r) }

// WriteGridChart draws, per receiver CPU, a heat map of auto's excess
// over the best fixed choice (percent; below zero, auto beat every fixed
// choice) per profile and document, each cell labelled with its value, as
// SVG.
func WriteGridChart(w io.Writer, results []GridResult) error {
	cells := Summarize(results)
	var cpus []string
	for _, c := range cells {
		if !slices.Contains(cpus, c.CPU) {
			cpus = append(cpus, c.CPU)
		}
	}
	if len(cpus) == 0 {
		return fmt.Errorf("lab: no grid results to chart")
	}
	var plots [][]*plot.Plot
	var width vg.Length
	for _, cpu := range cpus {
		g := &excessGrid{}
		for _, c := range cells {
			if c.CPU != cpu {
				continue
			}
			if !slices.Contains(g.docs, c.Doc) {
				g.docs = append(g.docs, c.Doc)
			}
			if !slices.Contains(g.profiles, c.Profile) {
				g.profiles = append(g.profiles, c.Profile)
			}
		}
		g.z = make([][]float64, len(g.profiles))
		for r := range g.z {
			g.z[r] = make([]float64, len(g.docs))
			for i := range g.z[r] {
				g.z[r][i] = math.NaN()
			}
		}
		var labels plotter.XYLabels
		for _, c := range cells {
			if c.CPU != cpu || c.Unmeasured {
				continue
			}
			col, row := slices.Index(g.docs, c.Doc), slices.Index(g.profiles, c.Profile)
			g.z[row][col] = c.Excess
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(col), Y: float64(row)})
			labels.Labels = append(labels.Labels, fmt.Sprintf("%+.0f%%", c.Excess))
		}
		hm := plotter.NewHeatMap(g, excessPalette{})
		hm.Min, hm.Max = -20, 20
		hm.Underflow = excessPalette{}.Colors()[0]
		hm.Overflow = excessPalette{}.Colors()[len(excessPalette{}.Colors())-1]
		hm.NaN = color.Gray{Y: 0xdd}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("auto's AMTT over the best fixed choice, %s receiver (%%; green ≤ 0, red ≥ +20)", cpu)
		p.Add(hm)
		lab, err := plotter.NewLabels(labels)
		if err != nil {
			return err
		}
		for i := range lab.TextStyle {
			lab.TextStyle[i].XAlign, lab.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
		}
		p.Add(lab)
		p.X.Tick.Marker = indexTicks(g.docs)
		p.Y.Tick.Marker = indexTicks(g.profiles)
		p.X.Tick.Label.Rotation = math.Pi / 4
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
		p.X.Min, p.X.Max = -0.5, float64(len(g.docs))-0.5
		p.Y.Min, p.Y.Max = -0.5, float64(len(g.profiles))-0.5
		plots = append(plots, []*plot.Plot{p})
		// 2.2 cm a document, and never narrower than the title, which
		// would otherwise be cut on a grid of one or two documents.
		width = max(width, vg.Length(4+2.2*float64(len(g.docs)))*vg.Centimeter,
			p.Title.TextStyle.Width(p.Title.Text)+vg.Centimeter)
	}
	height := vg.Length(len(cpus)) * 13 * vg.Centimeter
	canvas := vgsvg.New(width, height)
	dc := draw.New(canvas)
	tiles := plot.Align(plots, draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Centimeter / 2, PadTop: vg.Centimeter / 4, PadBottom: vg.Centimeter / 4}, dc)
	for i := range plots {
		plots[i][0].Draw(tiles[i][0])
	}
	_, err := canvas.WriteTo(w)
	return err
}

// indexTicks labels the integer positions 0..n-1 with names.
type indexTicks []string

func (t indexTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for i, s := range t {
		out = append(out, plot.Tick{Value: float64(i), Label: s})
	}
	return out
}

// excessPalette runs from green (auto faster than every fixed choice)
// through white (as fast as the best) to red (20% or more slower).
type excessPalette struct{}

func (excessPalette) Colors() []color.Color {
	var out []color.Color
	const n = 41
	for i := range n {
		f := float64(i)/float64(n-1)*2 - 1 // -1..1
		switch {
		case f < 0:
			v := uint8(255 * (1 + f*0.6))
			out = append(out, color.RGBA{v, 255, v, 255})
		default:
			v := uint8(255 * (1 - f*0.75))
			out = append(out, color.RGBA{255, v, v, 255})
		}
	}
	return out
}

var _ palette.Palette = excessPalette{}

// WriteSwitchMarkdown writes the link-change run: auto's messages, the
// reference AMTTs and how many messages auto needed to adapt.
func WriteSwitchMarkdown(w io.Writer, r *SwitchResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Link change %s → %s, document %s. Best fixed choice on %s: %s, %s ms; on %s: %s, %s ms.\n\n",
		r.From, r.To, r.Doc, r.From, r.BestFrom.Choice, ms(r.BestFrom.AMTT), r.To, r.BestTo.Choice, ms(r.BestTo.AMTT))
	if r.Adapted > 0 {
		fmt.Fprintf(bw, "After the switch, auto's time was within 5%% (or 1 ms) of the best from message %d on (the median of each message and its neighbours; %s outside alone).\n", r.Adapted, english.Count(r.LateMisses, "later message", "later messages"))
	} else {
		fmt.Fprintf(bw, "After the switch, auto's time did not settle within 5%% (or 1 ms) of the best.\n")
	}
	if r.ChoiceAdapted > 0 {
		fmt.Fprintf(bw, "Its choice was one within 5%% of the best from message %d on.\n\n", r.ChoiceAdapted)
	} else {
		fmt.Fprintf(bw, "Its choice never settled on one within 5%% of the best.\n\n")
	}
	fmt.Fprintln(bw, "| message | link | auto sent | bytes | time (ms) | over best on this link |")
	fmt.Fprintln(bw, "|---:|---|---|---:|---:|---:|")
	for _, s := range r.Steps {
		best := r.BestFrom.AMTT
		if s.Link == r.To {
			best = r.BestTo.AMTT
		}
		fmt.Fprintf(bw, "| %d | %s | %s | %d | %s | %s |\n", s.Index, s.Link, s.Choice, s.SentBytes, ms(s.Time), signed(pct(s.Time, best)))
	}
	fmt.Fprintln(bw, "\nReference (fixed choices, trimmed mean):\n\n| link | choice | AMTT (ms) |\n|---|---|---:|")
	for _, ref := range r.Reference {
		fmt.Fprintf(bw, "| %s | %s | %s |\n", ref.Profile, ref.Choice, ms(ref.AMTT))
	}
	return bw.Flush()
}
