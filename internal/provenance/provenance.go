// Package provenance records what made a set of results: the command
// line that repeats the run, when it ran, the commit built and the
// machine. The lab commands (--out) and the Testground runner (tgrun)
// write it as run.json beside their results, so that results read
// later, or on another machine, can be traced and repeated.
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
	// empty if the build did not record one.
	Commit string `json:"commit,omitempty"`
	Go     string `json:"go"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	CPUs   int    `json:"cpus"`
	// CPU is the processor's model name (Linux: /proc/cpuinfo).
	CPU  string `json:"cpu,omitempty"`
	Host string `json:"host,omitempty"`
}

// New describes the run of command that started at start and ends now,
// on this machine, by this binary.
func New(command []string, start time.Time) Record {
	host, _ := os.Hostname()
	return Record{
		Command: command, Start: start.UTC(), End: time.Now().UTC(),
		Commit: commit(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUs: runtime.NumCPU(), CPU: cpuModel(), Host: host,
	}
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
func Copy(from, dir string) error {
	b, err := os.ReadFile(filepath.Join(from, File))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Remove(filepath.Join(dir, File)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case err != nil:
		return err
	}
	return os.WriteFile(filepath.Join(dir, File), b, 0o644)
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
