// Package provenance records what made a set of results: the command
// line that repeats the run, when it ran, the commit built and the
// machine. The lab commands (--out) and the Testground runner (tgrun)
// write it as run.json beside their results, so that results read
// later, or on another machine, can be traced and repeated: a run calls
// Begin when it starts and New when it ends.
package provenance

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// File is the name of the record beside a run's results.
const File = "run.json"

// BuildCommit is the commit the binary was built from, set by the
// Makefile (-ldflags -X, from git describe --always --dirty) where the
// toolchain does not stamp it (GOFLAGS=-buildvcs=false).
var BuildCommit string

// Record is run.json.
type Record struct {
	// Command is the command line that repeats the run.
	Command []string  `json:"command"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	// Commit is the commit built, with "-dirty" if the tree had changes;
	// empty if the build did not record one, and then CommitUnknown says
	// why and how to build a binary that records it (NoCommit).
	Commit        string `json:"commit,omitempty"`
	CommitUnknown string `json:"commit_unknown,omitempty"`
	Go            string `json:"go"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	// CPUs is the logical CPUs the process could use (runtime.NumCPU).
	CPUs int `json:"cpus"`
	// CPU is the processor's model name (Linux: /proc/cpuinfo).
	CPU  string `json:"cpu,omitempty"`
	Host string `json:"host,omitempty"`
	// LoadStart and LoadEnd are the machine's load averages when the run
	// started and when it ended: beside CPUs, whether it shared the
	// machine. Absent where the system has none to read (Linux:
	// /proc/loadavg) and in records written before they were recorded.
	LoadStart *Load `json:"load_start,omitempty"`
	LoadEnd   *Load `json:"load_end,omitempty"`
}

// Load is the system's load averages over 1, 5 and 15 minutes: the mean
// number of runnable (and, on Linux, uninterruptible) tasks.
type Load struct {
	One     float64 `json:"1m"`
	Five    float64 `json:"5m"`
	Fifteen float64 `json:"15m"`
}

// NoCommit is Record.CommitUnknown for a binary built without a commit.
const NoCommit = "the binary records no commit: it was built with -buildvcs=false (GOFLAGS) or outside a git checkout, " +
	"without -ldflags -X github.com/p2pmsg/p2pmsg/internal/provenance.BuildCommit=...; make build sets it"

// Start is what a run records when it starts.
type Start struct {
	Time time.Time
	Load *Load // nil where unknown
}

// Begin is called when a run starts.
func Begin() Start { return Start{Time: time.Now(), Load: loadAvg()} }

// New describes the run of command that started at start and ends now,
// on this machine, by this binary.
func New(command []string, start Start) Record {
	host, _ := os.Hostname()
	r := Record{
		Command: command, Start: start.Time.UTC(), End: time.Now().UTC(),
		Commit: commit(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUs: runtime.NumCPU(), CPU: cpuModel(), Host: host,
		LoadStart: start.Load, LoadEnd: loadAvg(),
	}
	if r.Commit == "" {
		r.CommitUnknown = NoCommit
	}
	return r
}

// loadAvg reads /proc/loadavg; nil where it cannot.
func loadAvg() *Load {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	var v [3]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return nil
		}
	}
	return &Load{One: v[0], Five: v[1], Fifteen: v[2]}
}

// Write writes r as dir's run.json.
func Write(dir string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, File), append(b, '\n'), 0o644)
}

// Copy copies the run.json in from (the directory of an earlier run's
// results) into dir, or removes dir's if from has none: results written
// from from's are that run's, not this one's.
func Copy(from, dir string) error { return CopyFile(from, dir, File) }

// CopyFile is Copy for another file of an earlier run's results, named
// name in both directories.
func CopyFile(from, dir, name string) error {
	b, err := os.ReadFile(filepath.Join(from, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case err != nil:
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

// commit is the commit this binary was built from: BuildCommit, or what
// the toolchain stamped.
func commit() string {
	if BuildCommit != "" {
		return BuildCommit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// cpuModel is the first processor's model name in /proc/cpuinfo, or ""
// where there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
