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
	start := time.Now().Add(-time.Minute)
	r := provenance.New([]string{"p2pmsg", "lab", "amtt", "--profile=dsl"}, start)
	if !r.Start.Equal(start) || r.End.Before(r.Start) || r.Go != runtime.Version() || r.OS != runtime.GOOS || r.CPUs != runtime.NumCPU() {
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
