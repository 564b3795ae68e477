package cli

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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runFile is written beside a lab command's --out files: what made them
// (the command line, when, the build and the machine), so that results
// read later, or on another machine, can be traced and repeated.
const runFile = "run.json"

// buildCommit is the commit the binary was built from, set by the
// Makefile (-ldflags -X, from git describe --always --dirty) where the
// toolchain does not stamp it (GOFLAGS=-buildvcs=false).
var buildCommit string

// runRecord is run.json.
type runRecord struct {
	// Command is the command line that reproduces the run: the command's
	// path and every flag given, as --name=value.
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

// newRunRecord describes the run of cmd (a command without arguments)
// that started at start and ends now.
func newRunRecord(cmd *cobra.Command, start time.Time) runRecord {
	line := strings.Fields(cmd.CommandPath())
	cmd.Flags().Visit(func(f *pflag.Flag) { line = append(line, "--"+f.Name+"="+f.Value.String()) })
	host, _ := os.Hostname()
	return runRecord{
		Command: line, Start: start.UTC(), End: time.Now().UTC(),
		Commit: commit(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUs: runtime.NumCPU(), CPU: cpuModel(), Host: host,
	}
}

// writeRunFile writes r as dir's run.json.
func writeRunFile(dir string, r runRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, runFile), append(b, '\n'), 0o644)
}

// copyRunFile copies the run.json beside from (the file an earlier run's
// reports are read from) into dir, or removes dir's if from has none:
// the reports written from from are that run's, not this one's.
func copyRunFile(from, dir string) error {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(from), runFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Remove(filepath.Join(dir, runFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case err != nil:
		return err
	}
	return os.WriteFile(filepath.Join(dir, runFile), b, 0o644)
}

// commit is the commit this binary was built from: buildCommit, or what
// the toolchain stamped.
func commit() string {
	if buildCommit != "" {
		return buildCommit
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
