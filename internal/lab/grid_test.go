package lab_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// The grid between real nodes, in its smallest form: every choice has a
// row per cell, auto's picks add up, and the sender's models learned.
// Nothing is asserted about the times.
func TestRunGridLoopback(t *testing.T) {
	models := adaptive.NewModels()
	var progress, trace bytes.Buffer
	res, err := lab.RunGrid(amttCtx(t), lab.GridConfig{
		Profiles: []string{"loopback"}, Docs: []string{"employees-1", "random-4K"},
		Choices: []string{"identity", "gzip:6", "s2:1"}, CPUs: []string{lab.CPUFast, lab.CPUSlow},
		Trials: 3, Warmup: 1, DocBudget: -1, Models: models, Progress: &progress, Trace: &trace,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2*2*4 {
		t.Fatalf("%d results, want 16 (2 CPUs × 2 documents × 3 choices and auto)", len(res))
	}
	for _, r := range res {
		// Each row says what it was measured with.
		slow := 0.0
		if r.CPU == lab.CPUSlow {
			slow = lab.DefaultSlowFactor
		}
		if r.Link == nil || *r.Link != (linkemu.Link{}) || r.Seed != 1 || r.SlowFactor != slow {
			t.Fatalf("%s/%s/%s: link %v, seed %d, slow factor %v; want loopback's, 1, %v", r.CPU, r.Doc, r.Choice, r.Link, r.Seed, r.SlowFactor, slow)
		}
		if r.Trials != 3 || r.AMTT <= 0 || r.Skipped != "" || r.Settled < 0 || r.Settled > r.Trials || r.Measured < 1 || r.Measured > 1+lab.DefaultGridRemeasure {
			t.Fatalf("result %+v", r)
		}
		if r.Choice == lab.ChoiceAuto {
			n := 0
			for spec, c := range r.Picks {
				if spec != "identity" && spec != "gzip:6" && spec != "s2:1" {
					t.Fatalf("auto's picks %v: %q is none of the choices", r.Picks, spec)
				}
				n += c
			}
			if n != 3 {
				t.Fatalf("auto's picks %v do not count its 3 trials", r.Picks)
			}
			if len(r.Paired) != 3 || r.Paired["identity"] <= 0 || r.Paired["gzip:6"] <= 0 || r.Paired["s2:1"] <= 0 {
				t.Fatalf("auto's paired ratios %v, want one for each fixed choice", r.Paired)
			}
			if len(r.PairedCI) != 0 {
				t.Fatalf("intervals %v from 3 rounds", r.PairedCI)
			}
		}
	}
	if len(models.Specs()) == 0 {
		t.Fatal("the sender's models learned nothing")
	}
	// Three traced rounds per measurement: a disturbed cell is measured
	// again, and its rounds are traced too.
	measurements := 0
	for _, r := range res {
		if r.Choice == lab.ChoiceAuto {
			measurements += r.Measured
		}
	}
	if !strings.Contains(progress.String(), "probed") || strings.Count(trace.String(), "\n") != 3*measurements {
		t.Fatalf("progress %q, trace of %d lines", progress.String(), strings.Count(trace.String(), "\n"))
	}
	cells := lab.Summarize(res)
	if len(cells) != 4 {
		t.Fatalf("%d cells, want 4", len(cells))
	}
}

func TestRunSwitchSmall(t *testing.T) {
	res, err := lab.RunSwitch(amttCtx(t), lab.SwitchConfig{
		From: "gbe", To: "lan", Doc: "employees-50", Before: 2, After: 3,
		Choices: []string{"identity", "s2:1"}, RefTrials: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 5 || res.Steps[1].Link != "gbe" || res.Steps[2].Link != "lan" {
		t.Fatalf("steps %+v", res.Steps)
	}
	if len(res.Reference) != 4 || res.BestTo.Profile != "lan" || res.BestFrom.Profile != "gbe" {
		t.Fatalf("reference %+v, best %+v / %+v", res.Reference, res.BestFrom, res.BestTo)
	}
	var md bytes.Buffer
	if err := lab.WriteSwitchMarkdown(&md, res); err != nil || !strings.Contains(md.String(), "| 5 | lan |") {
		t.Fatalf("markdown %v:\n%s", err, md.String())
	}
}

func TestGridConfigErrors(t *testing.T) {
	for _, cfg := range []lab.GridConfig{
		{Profiles: []string{"moon"}},
		{Docs: []string{"employees-0"}},
		{Docs: []string{"novel-3"}},
		{Choices: []string{"gzip:6", "gzip:6"}},
		{Choices: []string{"auto"}},
		{Choices: []string{"lzma"}},
		{Choices: []string{"identity"}},
		{CPUs: []string{"quantum"}},
		{SlowFactor: 0.5},
		{Trials: 2},
	} {
		if _, err := lab.RunGrid(context.Background(), cfg); !errors.Is(err, lab.ErrGridConfig) {
			t.Errorf("%+v: err %v, want ErrGridConfig", cfg, err)
		}
		if err := cfg.Check(); !errors.Is(err, lab.ErrGridConfig) {
			t.Errorf("%+v: Check: %v, want ErrGridConfig", cfg, err)
		}
	}
}

// A slow factor outside ValidSlowFactor's range is refused by Check
// saying the rule, NaN (which every comparison let through) among them;
// the bounds themselves are taken. Checked with Check alone, so that were
// a factor accepted, no grid would run.
func TestGridConfigSlowFactor(t *testing.T) {
	for _, c := range []struct {
		factor float64
		ok     bool
	}{
		{0.5, false}, {1, false}, {-20, false}, {lab.MaxSlowFactor + 1, false},
		{math.Inf(1), false}, {math.NaN(), false},
		{1.01, true}, {lab.DefaultSlowFactor, true}, {lab.MaxSlowFactor, true},
	} {
		err := lab.GridConfig{SlowFactor: c.factor}.Check()
		if c.ok {
			if err != nil {
				t.Errorf("slow factor %g: %v, want it taken", c.factor, err)
			}
			continue
		}
		if !errors.Is(err, lab.ErrGridConfig) || !strings.HasSuffix(err.Error(), "want "+lab.SlowFactorRule) {
			t.Errorf("slow factor %g: Check: %v, want ErrGridConfig saying %q", c.factor, err, lab.SlowFactorRule)
		}
	}
}

// A cell given twice is refused by Check (RunGrid's own check): checked
// with Check alone, so that were it accepted, no grid would run.
func TestGridConfigDuplicates(t *testing.T) {
	for _, cfg := range []lab.GridConfig{
		{Profiles: []string{"lan", "lan"}},
		{Docs: []string{"employees-1", "employees-1"}},
		{CPUs: []string{"fast", "fast"}},
	} {
		if err := cfg.Check(); !errors.Is(err, lab.ErrGridConfig) || !strings.Contains(err.Error(), "twice") {
			t.Errorf("%+v: Check: %v, want ErrGridConfig naming the duplicate", cfg, err)
		}
	}
}

func TestLoadGridDoc(t *testing.T) {
	for _, name := range lab.AllGridDocs {
		d, err := lab.LoadGridDoc(name)
		if err != nil || len(d.Data) == 0 {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.HasPrefix(name, "random") != (d.MIME == "application/octet-stream") {
			t.Fatalf("%s sent as %s", name, d.MIME)
		}
		if !strings.HasPrefix(name, "random") {
			if err := xml.Unmarshal(d.Data, new(any)); err != nil {
				t.Fatalf("%s is not XML: %v", name, err)
			}
		}
	}
	a, _ := lab.LoadGridDoc("random-64K")
	b, _ := lab.LoadGridDoc("random-64K")
	if len(a.Data) != 64<<10 || !bytes.Equal(a.Data, b.Data) {
		t.Fatal("random-64K is not 64 KiB of the same bytes each time")
	}
}

func gridResults() []lab.GridResult {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	var out []lab.GridResult
	add := func(profile, doc string, amtt map[string]float64) {
		for _, c := range []string{"identity", "gzip:6", "xml:3", "auto"} {
			r := lab.GridResult{Profile: profile, CPU: lab.CPUFast, Doc: doc, Bytes: 1000, Choice: c, Trials: 5, AMTT: ms(amtt[c]), SentBytes: 500, Measured: 1}
			if profile == "lan" {
				r.Measured, r.Disturbed = 3, 0.15
			}
			if amtt[c] == 0 {
				r.Trials, r.Skipped = 0, "60s over the link"
			}
			if c == "auto" {
				r.Picks = map[string]int{"xml:3": 4, "gzip:6": 1}
				if amtt["identity"] > 0 {
					p := amtt["auto"] / amtt["identity"] * 0.96
					r.Paired = map[string]float64{"identity": p}
					r.PairedCI = map[string][2]float64{"identity": {p * 0.95, p * 1.05}}
				}
			}
			out = append(out, r)
		}
	}
	add("dsl", "doc-a", map[string]float64{"identity": 100, "gzip:6": 50, "xml:3": 40, "auto": 41})
	add("dsl", "doc-b", map[string]float64{"identity": 0, "gzip:6": 50, "xml:3": 40, "auto": 60})
	add("lan", "doc-a", map[string]float64{"identity": 2, "gzip:6": 2.5, "xml:3": 2.6, "auto": 2.5})
	return out
}

func TestSummarize(t *testing.T) {
	cells := lab.Summarize(gridResults())
	if len(cells) != 3 {
		t.Fatalf("%d cells", len(cells))
	}
	a, b, c := cells[0], cells[1], cells[2]
	if a.Best != "xml:3" || math.Abs(a.Excess-2.5) > 1e-9 || !a.MeetsBest || !a.MeetsIdent || !a.MeetsGzip {
		t.Errorf("doc-a on dsl: %+v", a)
	}
	if a.AutoPicks != "xml:3×4 gzip:6×1" {
		t.Errorf("picks %q", a.AutoPicks)
	}
	if b.MeetsBest || b.MeetsGzip || !b.MeetsIdent || !math.IsNaN(b.OverIdent) {
		t.Errorf("doc-b on dsl (identity skipped, auto 50%% over the best): %+v", b)
	}
	// 0.5 ms over identity's 2 ms is 25%: within the 1 ms floor of the
	// best-choice target, but the identity target has no floor.
	if c.Best != "identity" || !c.MeetsBest || c.MeetsIdent || !c.MeetsGzip {
		t.Errorf("doc-a on lan: %+v", c)
	}
	if math.Abs(a.PairedIdent-0.3936) > 1e-9 || !math.IsNaN(b.PairedIdent) || math.Abs(c.PairedIdent-1.2) > 1e-9 {
		t.Errorf("paired ratios to identity %v, %v, %v; want 0.3936, NaN, 1.2", a.PairedIdent, b.PairedIdent, c.PairedIdent)
	}
	if math.Abs(c.PairedIdentCI[0]-1.14) > 1e-9 || math.Abs(c.PairedIdentCI[1]-1.26) > 1e-9 || !math.IsNaN(b.PairedIdentCI[0]) {
		t.Errorf("intervals %v, %v; want [1.14, 1.26], none", c.PairedIdentCI, b.PairedIdentCI)
	}
}

func TestGridReports(t *testing.T) {
	res := gridResults()
	var j bytes.Buffer
	if err := lab.WriteGridJSON(&j, res); err != nil {
		t.Fatal(err)
	}
	back, err := lab.ReadGridJSON(&j)
	if err != nil || len(back) != len(res) || back[4].Skipped == "" || back[3].Picks["xml:3"] != 4 || back[8].Measured != 3 || back[8].Disturbed != 0.15 {
		t.Fatalf("JSON round trip: %v, %+v", err, back)
	}
	var md bytes.Buffer
	if err := lab.WriteGridMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| dsl | fast | doc-b |", "**no**", "Targets met in 3 cells: within 5% (or 1 ms) of the best fixed choice in 2", "skipped",
		"| 0.394 (0.374–0.413) |", "is at most 1.02 in 1 of the 2 cells",
		"Measured again because the machine disturbed more than 10% of the exchanges (more than 2× their choice's median and 1ms more), the least disturbed measurement kept: lan/fast doc-a (3 times, 15% disturbed).",
		"Of the 2 cells with rounds enough for a 95% interval (in brackets), it lies wholly above 1.02 (auto shown more than 2% slower than identity) in 1, wholly at or below 1.02 in 1, and across 1.02 (the run cannot tell) in 0."} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var svg bytes.Buffer
	if err := lab.WriteGridChart(&svg, res); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(svg.Bytes()), []byte("<?xml")) || !bytes.Contains(svg.Bytes(), []byte("+50%")) {
		t.Fatal("the chart is not an SVG with the cells' labels")
	}
	if err := lab.WriteGridChart(&svg, nil); err == nil {
		t.Fatal("charted nothing")
	}
}

// The heat map is wide enough for its title: a grid of one document
// (lab grid --docs employees-1) drew a canvas narrower than the title,
// which began left of the image and was cut at both ends. The title is
// centred, so it fits once it starts at x ≥ 0.
func TestGridChartTitleFits(t *testing.T) {
	all := gridResults()
	var res []lab.GridResult
	for _, r := range all {
		if r.Doc == all[0].Doc && r.Profile == all[0].Profile {
			res = append(res, r)
		}
	}
	var svg bytes.Buffer
	if err := lab.WriteGridChart(&svg, res); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&svg)
	var x string
	found := false
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "text" {
			for _, a := range se.Attr {
				if a.Name.Local == "x" {
					x = a.Value
				}
			}
		}
		if cd, ok := tok.(xml.CharData); ok && strings.HasPrefix(string(cd), "auto's AMTT over the best fixed choice") {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no title in the chart")
	}
	if strings.HasPrefix(x, "-") {
		t.Fatalf("the title starts at x=%s, left of the image", x)
	}
}

// The summary counts its cells in good English whatever their number: a
// one-cell grid said "Targets met in 1 cells" (and "of the 1 cells").
func TestGridSummaryOneCell(t *testing.T) {
	var res []lab.GridResult
	for _, r := range gridResults() {
		if r.Profile == "lan" {
			res = append(res, r)
		}
	}
	var md bytes.Buffer
	if err := lab.WriteGridMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Targets met in 1 cell: ", "in 0 of the 1 cell where", "Of the 1 cell with rounds"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	sw := &lab.SwitchResult{From: "gbe", To: "lan", Doc: "d", Adapted: 2, LateMisses: 1, ChoiceAdapted: 1}
	md.Reset()
	if err := lab.WriteSwitchMarkdown(&md, sw); err != nil || !strings.Contains(md.String(), "; 1 later message outside alone)") {
		t.Errorf("switch markdown (%v):\n%s", err, md.String())
	}
}
