package encoding_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering checks that package encoding imports no codec and nothing
// above or beside the message model in p2pmsg.
func TestLayering(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/p2pmsg/p2pmsg/") && p != "github.com/p2pmsg/p2pmsg/pkg/message" {
				t.Errorf("%s imports %s; encoding may import only pkg/message", f, p)
			}
		}
	}
}
