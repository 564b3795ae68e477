package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSwarmCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.jsonl", `{"case":"propagate","peers":8,"expected":640,"delivered":640,"p50_ns":2000000,"p99_ns":8000000,"max_ns":9000000,"lost":0}`+"\n")
	short := write("short.jsonl", `{"case":"propagate","peers":8,"expected":640,"delivered":639,"p50_ns":2000000,"p99_ns":8000000,"max_ns":9000000,"lost":0}`+"\n")
	for _, c := range []struct {
		args []string
		fail string
	}{
		{[]string{"-results", good, "-cases", "propagate", "-peers", "8"}, ""},
		{[]string{"-results", short, "-cases", "propagate"}, "639 of 640 delivered"},
		{[]string{"-results", good, "-cases", "resolve"}, "case resolve missing"},
		{[]string{"-results", good, "-peers", "50"}, "8 peers, want 50"},
		{[]string{"-results", filepath.Join(dir, "none.jsonl")}, "no such file"},
	} {
		err := run(c.args)
		if c.fail == "" && err != nil || c.fail != "" && (err == nil || !strings.Contains(err.Error(), c.fail)) {
			t.Errorf("%v: %v, want %q", c.args, err, c.fail)
		}
	}
}

// -h prints the usage and exits 0, a flag it does not know exits 2, a
// failed check 1 (before, -h exited 1 with "swarmcheck: flag: help
// requested").
func TestSwarmCheckExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-bogus"}, 2},
		{[]string{"-results", filepath.Join(t.TempDir(), "none.jsonl")}, 1},
	} {
		if got := exitCode(io.Discard, run(c.args)); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.args, got, c.want)
		}
	}
}
