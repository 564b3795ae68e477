package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// `lab amtt --json` prints exactly the fields, one object per
// codec and document, and --out writes the results, table and chart.
func TestLabAMTT(t *testing.T) {
	out := t.TempDir()
	r := run(t, nil, "lab", "amtt", "--profile", "lan", "--codecs", "none,gzip", "--sizes", "1,50",
		"--trials", "3", "--warmup", "0", "--json", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), r.stdout)
	}
	want := []string{"amtt_ns", "bytes", "codec", "control_amtt_ns", "control_spread", "decrease_pct", "encoded_bytes", "link", "profile", "records", "seed", "spread", "trials", "warmup"}
	for i, l := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		var keys []string
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			t.Fatalf("line %d has keys %v, want %v", i, keys, want)
		}
		if obj["profile"] != "lan" || obj["trials"] != 3.0 || obj["amtt_ns"].(float64) <= 0 || obj["encoded_bytes"].(float64) <= 0 {
			t.Errorf("line %d: %v", i, obj)
		}
		// The spread of the measured trials beside their trimmed mean.
		for _, k := range []string{"control_spread", "spread"} {
			sp, _ := obj[k].(map[string]any)
			if sp["median_ns"].(float64) <= 0 || sp["min_ns"].(float64) > sp["max_ns"].(float64) || sp["stddev_ns"] == nil {
				t.Errorf("line %d: %s %v", i, k, obj[k])
			}
		}
		// What the run was: lan's link, and no warm-up trial for
		// --warmup 0 (before, one ran: the configuration was normalized
		// twice, and "none" became the default).
		up, _ := obj["link"].(map[string]any)["up"].(map[string]any)
		if up["bandwidth_Bps"] != 12.5e6 || obj["warmup"] != 0.0 || obj["seed"] != 1.0 {
			t.Errorf("line %d: link %v, warm-up %v, seed %v; want lan's, 0, 1", i, obj["link"], obj["warmup"], obj["seed"])
		}
	}
	if !bytes.Contains(r.stderr, []byte("lab amtt: lan")) || !bytes.Contains(r.stderr, []byte("left")) {
		t.Errorf("no progress on stderr: %s", r.stderr)
	}
	for _, f := range []string{"amtt.jsonl", "amtt.md", "amtt.svg"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	checkRunFile(t, out, "p2pmsg", "lab", "amtt", "--profile=lan", "--codecs=none,gzip", "--sizes=1,50",
		"--trials=3", "--warmup=0", "--json=true", "--out="+out)
	md, _ := os.ReadFile(filepath.Join(out, "amtt.md"))
	if !bytes.Contains(md, []byte("| records | bytes | trials | control (ms) | gzip (ms) | gzip % decrease |")) {
		t.Errorf("table:\n%s", md)
	}
}

func TestLabAMTTUsage(t *testing.T) {
	if r := run(t, nil, "lab", "amtt", "--help"); r.code != 0 || !bytes.Contains(r.stdout, []byte("dsl")) {
		t.Errorf("--help: exit %d", r.code)
	}
	for _, args := range [][]string{
		{"--trials", "2"}, {"--profile", "moon"}, {"--up", "fast"}, {"--rtt", "soon"},
		{"--codecs", "lzma"}, {"--sizes", "0"}, {"--sizes", "x"},
	} {
		r := run(t, nil, append([]string{"lab", "amtt"}, args...)...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
}

// checkRunFile checks dir's run.json: the command line that made it (the
// flags in the order pflag visits them: by name), the run's times, the
// commit the binary was built from and this machine.
func checkRunFile(t *testing.T, dir string, command ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Command              []string
		Start, End           time.Time
		Commit, Go, OS, Arch string
		CommitUnknown        string `json:"commit_unknown"`
		CPUs                 int
		LoadStart            map[string]float64 `json:"load_start"`
		LoadEnd              map[string]float64 `json:"load_end"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	slices.Sort(command[3:])
	if !slices.Equal(r.Command, command) {
		t.Errorf("run.json command %q, want %q", r.Command, command)
	}
	if r.Start.IsZero() || r.End.Before(r.Start) || time.Since(r.Start) > time.Hour {
		t.Errorf("run.json start %v, end %v", r.Start, r.End)
	}
	if r.Commit != testCommit || r.CommitUnknown != "" || r.Go != runtime.Version() || r.OS != runtime.GOOS || r.Arch != runtime.GOARCH || r.CPUs != runtime.NumCPU() {
		t.Errorf("run.json: %s", b)
	}
	// The machine's load around the run (Linux: /proc/loadavg).
	if runtime.GOOS == "linux" {
		for _, l := range []map[string]float64{r.LoadStart, r.LoadEnd} {
			if _, ok := l["15m"]; !ok || len(l) != 3 {
				t.Errorf("run.json load: %s", b)
			}
		}
	}
}

// A plain go build with GOFLAGS=-buildvcs=false (not make build) stamps
// no commit: run.json says so in commit_unknown, and how to build one
// that records it, instead of leaving the commit out in silence.
func TestRunFileUnknownCommit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "p2pmsg")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/p2pmsg/p2pmsg/cmd/p2pmsg")...)
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "doc.xml")
	os.WriteFile(doc, bytes.Repeat([]byte("<a>hello</a>"), 50), 0o644)
	out := filepath.Join(dir, "results")
	var stderr bytes.Buffer
	c := exec.Command(bin, "lab", "codecs", "--codecs=gzip", "--files="+doc, "--out="+out)
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.Bytes())
	}
	var r map[string]any
	b := readFile(t, filepath.Join(out, "run.json"))
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	why, _ := r["commit_unknown"].(string)
	if _, ok := r["commit"]; ok || !strings.Contains(why, "make build") || !strings.Contains(why, "BuildCommit") {
		t.Errorf("run.json of a build without a commit:\n%s", b)
	}
}

// `lab rtt`, `lab rate` and `lab codecs` with --out DIR write their rows
// as JSON lines, their table as printed, and run.json; a run that fails
// after DIR was made leaves no DIR behind.
func TestLabTablesOut(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "doc.xml")
	os.WriteFile(doc, bytes.Repeat([]byte("<a>hello</a>"), 500), 0o644)
	for _, c := range []struct {
		name string
		args []string
		rows int
	}{
		{"rtt", []string{"--layer=tcp,stream", "--sizes=1", "--warmup=5", "--runs=1", "--pairs=3"}, 2},
		{"rate", []string{"--layer=stream", "--sizes=16", "--shapes=1x1", "--messages=1000"}, 1},
		{"codecs", []string{"--codecs=gzip:6,zstd:3", "--files=" + doc}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "results")
			args := append([]string{"lab", c.name, "--out=" + out}, c.args...)
			r := run(t, nil, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if txt := readFile(t, filepath.Join(out, c.name+".txt")); !bytes.Equal(txt, r.stdout) {
				t.Errorf("%s.txt\n%s\nis not the table printed\n%s", c.name, txt, r.stdout)
			}
			jsonRows(t, readFile(t, filepath.Join(out, c.name+".jsonl")), c.rows)
			checkRunFile(t, out, append([]string{"p2pmsg", "lab", c.name}, args[2:]...)...)
		})
	}
	// The model is missing: found once --out is made, before measuring.
	out := filepath.Join(dir, "a", "b")
	failsCleanly(t, run(t, nil, "lab", "codecs", "--codecs", "xml@99", "--files", doc, "--out", out))
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Errorf("a failed run left its --out directory")
	}
}
