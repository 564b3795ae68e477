package lab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// WriteAMTTJSON writes one JSON object per result per line.
func WriteAMTTJSON(w io.Writer, results []AMTTResult) error { return writeJSONLines(w, results) }

// ReadAMTTJSON reads what WriteAMTTJSON wrote; blank lines are skipped.
func ReadAMTTJSON(r io.Reader) ([]AMTTResult, error) { return readJSONLines[AMTTResult](r, "AMTT") }

// writeJSONLines writes one JSON object per value per line.
func writeJSONLines[T any](w io.Writer, values []T) error {
	enc := json.NewEncoder(w)
	for _, v := range values {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// readJSONLines reads what writeJSONLines wrote, skipping blank lines;
// what names the results in errors.
func readJSONLines[T any](r io.Reader, what string) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return out, fmt.Errorf("lab: %s results line %d: %w", what, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// EncodedSize is the size of the employees document with records records
// once encoded by the codec spec names, header included: what crosses the
// link in the element's place. CodecNone gives the document's size.
func EncodedSize(spec string, records int) (int, error) {
	doc := datasets.Employees(records)
	if spec == CodecNone {
		return len(doc), nil
	}
	c, err := newCodec(spec)
	if err != nil {
		return 0, err
	}
	s, err := encoding.New([]encoding.Codec{c})
	if err != nil {
		return 0, err
	}
	e, err := s.EncodeElement(encoding.Producer{}.XML(amttNS, elDoc, doc))
	if err != nil {
		return 0, err
	}
	return len(e.Data), nil
}

// amttTable is the results of one profile, indexed for printing.
type amttTable struct {
	profile string
	codecs  []string // in the order they first appear
	records []int    // ascending
	cell    map[string]map[int]AMTTResult
}

func amttTables(results []AMTTResult) []*amttTable {
	var tables []*amttTable
	byProfile := map[string]*amttTable{}
	for _, r := range results {
		t := byProfile[r.Profile]
		if t == nil {
			t = &amttTable{profile: r.Profile, cell: map[string]map[int]AMTTResult{}}
			byProfile[r.Profile] = t
			tables = append(tables, t)
		}
		if t.cell[r.Codec] == nil {
			t.cell[r.Codec] = map[int]AMTTResult{}
			t.codecs = append(t.codecs, r.Codec)
		}
		t.cell[r.Codec][r.Records] = r
		if !slices.Contains(t.records, r.Records) {
			t.records = append(t.records, r.Records)
		}
	}
	for _, t := range tables {
		slices.Sort(t.records)
	}
	return tables
}

// control returns the control AMTT of a document, from the first codec
// that measured it.
func (t *amttTable) control(records int) (AMTTResult, bool) {
	for _, c := range t.codecs {
		if r, ok := t.cell[c][records]; ok {
			return r, true
		}
	}
	return AMTTResult{}, false
}

// ProfileLabel describes a profile for a table heading: its name and, for
// the named ones, what its link is.
func ProfileLabel(name string) string {
	if p, err := linkemu.Lookup(name); err == nil && p.Description != "" {
		return name + " (" + p.Description + ")"
	}
	return name
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// linkLabel is ProfileLabel, or, for a profile that is not a named one
// as it is (CustomProfile, "dsl*"), its name and the link it ran on from
// links, which its name alone does not tell.
func linkLabel(name string, links map[string]linkemu.Link) string {
	if l, ok := links[name]; ok {
		if _, err := linkemu.Lookup(name); err != nil || name == CustomProfile {
			return name + " (" + DescribeLink(l) + ")"
		}
	}
	return ProfileLabel(name)
}

// WriteAMTTMarkdown writes the results as Markdown, one section per
// profile: the AMTT of each document under each codec with its %
// decrease against control (negative: slower), as in the paper's Table
// 5, then the encoded sizes, as in its Table 2.
func WriteAMTTMarkdown(w io.Writer, results []AMTTResult) error {
	return WriteAMTTMarkdownLinks(w, results, nil)
}

// WriteAMTTMarkdownLinks is WriteAMTTMarkdown with the links the
// profiles ran on (by AMTTResult.Profile), which head the sections of
// custom and changed profiles.
func WriteAMTTMarkdownLinks(w io.Writer, results []AMTTResult, links map[string]linkemu.Link) error {
	bw := bufio.NewWriter(w)
	for i, t := range amttTables(results) {
		if i > 0 {
			fmt.Fprintln(bw)
		}
		fmt.Fprintf(bw, "#### %s\n\n", linkLabel(t.profile, links))
		var codecs []string
		for _, c := range t.codecs {
			if c != CodecNone {
				codecs = append(codecs, c)
			}
		}
		fmt.Fprint(bw, "| records | bytes | trials | control (ms) |")
		for _, c := range codecs {
			fmt.Fprintf(bw, " %s (ms) | %s %% decrease |", c, c)
		}
		fmt.Fprint(bw, "\n|---:|---:|---:|---:|")
		for range codecs {
			fmt.Fprint(bw, "---:|---:|")
		}
		fmt.Fprintln(bw)
		for _, n := range t.records {
			ctl, _ := t.control(n)
			fmt.Fprintf(bw, "| %d | %d | %d | %s |", n, ctl.Bytes, ctl.Trials, ms(ctl.ControlAMTT))
			for _, c := range codecs {
				r, ok := t.cell[c][n]
				if !ok {
					fmt.Fprint(bw, " – | – |")
					continue
				}
				fmt.Fprintf(bw, " %s | %+.1f%% |", ms(r.AMTT), r.DecreasePct)
			}
			fmt.Fprintln(bw)
		}
		if len(codecs) == 0 {
			continue
		}
		fmt.Fprint(bw, "\nEncoded element size in bytes (% reduction):\n\n| records | bytes |")
		for _, c := range codecs {
			fmt.Fprintf(bw, " %s |", c)
		}
		fmt.Fprint(bw, "\n|---:|---:|")
		for range codecs {
			fmt.Fprint(bw, "---:|")
		}
		fmt.Fprintln(bw)
		for _, n := range t.records {
			ctl, _ := t.control(n)
			fmt.Fprintf(bw, "| %d | %d |", n, ctl.Bytes)
			for _, c := range codecs {
				size, err := EncodedSize(c, n)
				if err != nil || ctl.Bytes == 0 {
					fmt.Fprint(bw, " – |")
					continue
				}
				fmt.Fprintf(bw, " %d (%.1f%%) |", size, 100*float64(ctl.Bytes-size)/float64(ctl.Bytes))
			}
			fmt.Fprintln(bw)
		}
	}
	return bw.Flush()
}

// WriteAMTTChart draws the AMTT against document size, one line per codec
// (CodecNone is the control), one panel per profile, as SVG.
func WriteAMTTChart(w io.Writer, results []AMTTResult) error {
	return WriteAMTTChartLinks(w, results, nil)
}

// WriteAMTTChartLinks is WriteAMTTChart with the links the profiles ran
// on, as WriteAMTTMarkdownLinks.
func WriteAMTTChartLinks(w io.Writer, results []AMTTResult, links map[string]linkemu.Link) error {
	plots, err := amttPlots(results, links)
	if err != nil {
		return err
	}
	canvas := vgsvg.New(chartSize(len(plots)))
	drawPlots(draw.New(canvas), plots)
	_, err = canvas.WriteTo(w)
	return err
}

// chartSize is the size of a chart of n panels.
func chartSize(n int) (w, h vg.Length) {
	return 16 * vg.Centimeter, vg.Length(n) * 11 * vg.Centimeter
}

func drawPlots(dc draw.Canvas, plots [][]*plot.Plot) {
	cells := plot.Align(plots, draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Centimeter / 2, PadTop: vg.Centimeter / 4, PadBottom: vg.Centimeter / 4}, dc)
	for i := range plots {
		plots[i][0].Draw(cells[i][0])
	}
}

// amttPlots makes one plot per profile.
func amttPlots(results []AMTTResult, links map[string]linkemu.Link) ([][]*plot.Plot, error) {
	tables := amttTables(results)
	if len(tables) == 0 {
		return nil, fmt.Errorf("lab: no AMTT results to chart")
	}
	plots := make([][]*plot.Plot, len(tables))
	for i, t := range tables {
		p := plot.New()
		p.Title.Text = "AMTT on " + linkLabel(t.profile, links)
		p.X.Label.Text = "document size (KB)"
		p.Y.Label.Text = "AMTT (ms)"
		p.Y.Min = 0
		p.X.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.XOffs, p.Legend.YOffs = vg.Centimeter/2, -vg.Centimeter/3
		k := 0
		for _, c := range t.codecs {
			var xys plotter.XYs
			for _, n := range t.records {
				r, ok := t.cell[c][n]
				if !ok {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(r.Bytes) / 1000, Y: float64(r.AMTT) / float64(time.Millisecond)})
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			style := 0 // the control: grey, dashed
			if c != CodecNone {
				k++
				style = k
			} else {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			line.Color, points.Color = chartColor(style), chartColor(style)
			points.Shape = chartShape(style)
			line.Width = vg.Points(1.5)
			p.Add(line, points)
			label := c
			if c == CodecNone {
				label = "none (control)"
			}
			p.Legend.Add(label, line, points)
		}
		plots[i] = []*plot.Plot{p}
	}
	return plots, nil
}

var chartPalette = []color.RGBA{
	{0x44, 0x44, 0x44, 0xff}, // control: grey
	{0x1f, 0x77, 0xb4, 0xff},
	{0xd6, 0x27, 0x28, 0xff},
	{0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff},
	{0x94, 0x67, 0xbd, 0xff},
	{0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

func chartColor(i int) color.Color {
	if i == 0 {
		return chartPalette[0]
	}
	return chartPalette[1+(i-1)%(len(chartPalette)-1)]
}

func chartShape(i int) draw.GlyphDrawer {
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}
	return shapes[i%len(shapes)]
}
