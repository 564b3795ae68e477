package provenance_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/provenance"
)

func read(t *testing.T, dir string) (provenance.Record, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, provenance.File))
	if os.IsNotExist(err) {
		return provenance.Record{}, false
	}
	var r provenance.Record
	if err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("%s: %s %v", provenance.File, b, err)
	}
	return r, true
}

func TestWriteAndCopy(t *testing.T) {
	start := provenance.Start{Time: time.Now().Add(-time.Minute)}
	r := provenance.New([]string{"p2pmsg", "lab", "amtt", "--profile=dsl"}, start)
	if !r.Start.Equal(start.Time) || r.End.Before(r.Start) || r.Go != runtime.Version() || r.OS != runtime.GOOS || r.CPUs != runtime.NumCPU() {
		t.Fatalf("New: %+v", r)
	}
	dir := t.TempDir()
	if err := provenance.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	got, ok := read(t, dir)
	if !ok || !slices.Equal(got.Command, r.Command) || !got.Start.Equal(r.Start) {
		t.Fatalf("read back %+v, want %+v", got, r)
	}
	// An earlier run's results carry its record; a copy into a folder
	// that holds another run's record replaces it.
	into := t.TempDir()
	if err := provenance.Write(into, provenance.New([]string{"other"}, start)); err != nil {
		t.Fatal(err)
	}
	if err := provenance.Copy(dir, into); err != nil {
		t.Fatal(err)
	}
	if got, ok := read(t, into); !ok || !slices.Equal(got.Command, r.Command) {
		t.Fatalf("copied %+v, want the earlier run's", got)
	}
	// Results with no record leave none behind: a stale one goes.
	if err := provenance.Copy(t.TempDir(), into); err != nil {
		t.Fatal(err)
	}
	if _, ok := read(t, into); ok {
		t.Fatal("a stale record stayed")
	}
	if err := provenance.Copy(t.TempDir(), into); err != nil {
		t.Fatalf("nothing to copy, nothing to remove: %v", err)
	}
}

// A record says what the machine was doing around the run, and says so
// when the binary cannot tell its commit (a test binary is stamped with
// none), rather than leaving the field out in silence.
func TestLoadAndUnknownCommit(t *testing.T) {
	start := provenance.Begin()
	r := provenance.New([]string{"x"}, start)
	if r.Commit != "" || r.CommitUnknown != provenance.NoCommit {
		t.Errorf("commit %q, unknown %q; want none, and why", r.Commit, r.CommitUnknown)
	}
	if runtime.GOOS == "linux" {
		if start.Load == nil || r.LoadStart != start.Load || r.LoadEnd == nil || r.LoadEnd.One < 0 {
			t.Errorf("load at start %+v, end %+v", r.LoadStart, r.LoadEnd)
		}
	}
	dir := t.TempDir()
	if err := provenance.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, provenance.File))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["commit_unknown"]; !ok {
		t.Errorf("no commit_unknown: %s", b)
	}
	if l, ok := m["load_end"].(map[string]any); runtime.GOOS == "linux" && (!ok || l["1m"] == nil || l["15m"] == nil) {
		t.Errorf("load_end: %s", b)
	}

	provenance.BuildCommit = "0123abc"
	t.Cleanup(func() { provenance.BuildCommit = "" })
	if r := provenance.New([]string{"x"}, start); r.Commit != "0123abc" || r.CommitUnknown != "" {
		t.Errorf("commit %q, unknown %q", r.Commit, r.CommitUnknown)
	}
}
