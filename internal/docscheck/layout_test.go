package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutDoc holds the layout of the tree, a code block under its heading
// "## Layout".
const layoutDoc = "docs/architecture.md"

// layoutPath is a package directory as the layout names it.
var layoutPath = regexp.MustCompile(`\b(?:pkg|internal)/[a-z0-9]+/`)

// TestLayoutNamesEveryPackage: the layout names every directory of pkg/
// and internal/, so that a package added to the tree is added to the map
// of where things live too.
func TestLayoutNamesEveryPackage(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(layoutDoc)))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(md), "\n## Layout\n")
	block := fence.FindString(section)
	if !ok || block == "" {
		t.Fatalf("%s: no code block under ## Layout", layoutDoc)
	}
	named := map[string]bool{}
	for _, p := range layoutPath.FindAllString(block, -1) {
		named[p] = true
	}
	checked := 0
	for _, top := range []string{"pkg", "internal"} {
		entries, err := os.ReadDir(filepath.Join(root, top))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			checked++
			if p := top + "/" + e.Name() + "/"; !named[p] {
				t.Errorf("%s: the layout does not name %s", layoutDoc, p)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d package directories: the tree is not where the test looks", checked)
	}
}
