package id_test

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// readGolden returns the fields of the non-comment lines of a golden file
// that JXSE wrote (see interop_test.go; regenerate with -update).
func readGolden(t *testing.T, name string, fields int) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			if out = append(out, strings.Split(line, " ")); len(out[len(out)-1]) != fields {
				t.Fatalf("%s: bad line %q", name, line)
			}
		}
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		t.Fatalf("%s: %d lines, %v", name, len(out), err)
	}
	return out
}

// TestGoldenJXSEIDs: IDs of every kind JXSE wrote parse to what JXSE reads
// them as and print byte-identically (offline half of TestJXSEWrittenIDs).
func TestGoldenJXSEIDs(t *testing.T) {
	for _, f := range readGolden(t, "jxse-ids.txt", 5) {
		x, err := id.Parse(f[0])
		if err != nil {
			t.Errorf("%s: %v", f[0], err)
			continue
		}
		if got, want := view(x), "OK "+strings.Join(f, " "); got != want {
			t.Errorf("%s:\n ours %s\n JXSE %s", f[0], got, want)
		}
	}
}

// TestGoldenJXSESeeds: seeded IDs equal JXSE's (offline half of
// TestSeededLikeJXSELive).
func TestGoldenJXSESeeds(t *testing.T) {
	for _, f := range readGolden(t, "jxse-seeds.txt", 6) {
		var seed []byte
		if f[1] != "-" {
			var err error
			if seed, err = hex.DecodeString(f[1]); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := seededByUs(id.MustParse(f[0]), seed), strings.Join(f[2:], " "); got != want {
			t.Errorf("group %s seed %s:\n ours %s\n JXSE %s", f[0], f[1], got, want)
		}
	}
}
