package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/lab"
)

func results(control, gzip time.Duration) []lab.AMTTResult {
	var out []lab.AMTTResult
	for _, c := range []string{"none", "gzip"} {
		for _, n := range []int{1, 1000} {
			r := lab.AMTTResult{Profile: "dsl", Codec: c, Records: n, Bytes: len(datasets.Employees(n)), Trials: 3, ControlAMTT: control, AMTT: control}
			if c == "gzip" {
				r.AMTT = gzip
			}
			r.DecreasePct = lab.Decrease(r.ControlAMTT, r.AMTT)
			out = append(out, r)
		}
	}
	return out
}

func write(t *testing.T, res []lab.AMTTResult) string {
	p := filepath.Join(t.TempDir(), "amtt.jsonl")
	var b bytes.Buffer
	lab.WriteAMTTJSON(&b, res)
	os.WriteFile(p, b.Bytes(), 0o644)
	return p
}

func check(t *testing.T, res []lab.AMTTResult) (int, string) {
	var out, errb bytes.Buffer
	code := run([]string{"-results", write(t, res), "-profile", "dsl", "-codecs", "none,gzip", "-sizes", "1,1000", "-trials", "3", "-min-decrease", "gzip=50"}, &out, &errb)
	return code, out.String() + errb.String()
}

func TestSound(t *testing.T) {
	if code, out := check(t, results(2300*time.Millisecond, 300*time.Millisecond)); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestUnsound(t *testing.T) {
	for name, c := range map[string]struct {
		res  []lab.AMTTResult
		want string
	}{
		// 172 KB cannot cross 640 kbit/s in a second.
		"faster than the link": {results(time.Second, 300*time.Millisecond), "beats the link"},
		"gzip too weak":        {results(2300*time.Millisecond, 1500*time.Millisecond), "want more than 50.0%"},
		"missing row":          {results(2300*time.Millisecond, 300*time.Millisecond)[1:], "none on 1 records: missing"},
		"wrong trials": {func() []lab.AMTTResult {
			r := results(2300*time.Millisecond, 300*time.Millisecond)
			r[0].Trials = 2
			return r
		}(), "2 trials, want 3"},
	} {
		code, out := check(t, c.res)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, output lacks %q:\n%s", name, code, c.want, out)
		}
	}
}

// -h prints the usage and exits 0 (before, 2, as for a bad flag).
func TestHelpExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-results") {
		t.Errorf("-h: exit %d, %q; want 0 and the usage", code, errb.String())
	}
	if code := run([]string{"-bogus"}, &out, &errb); code != 2 {
		t.Errorf("-bogus: exit %d, want 2", code)
	}
}
