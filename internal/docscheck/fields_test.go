package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// jsonLists are the documents that list the fields of a JSON output,
// and the Go type (in its source file, read, not imported) whose json
// tags name them.
var jsonLists = []struct{ doc, src, typ string }{
	{"docs/swarms.md", "internal/swarm/swarm.go", "Result"}, // lab swarm --json
}

// span is a code span, which may run over a line break.
var span = regexp.MustCompile("`([^`]+)`")

// jsonFields returns the field names the json tags of the struct typ in
// the Go file src give, "-" left out.
func jsonFields(t *testing.T, src, typ string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typ {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			t.Fatalf("%s: %s is not a struct", src, typ)
		}
		for _, fl := range st.Fields.List {
			if fl.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(fl.Tag.Value)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
		}
		return false
	})
	return out
}

// TestJSONFieldsListed: a document that lists a command's JSON fields
// names every one, in a code span.
func TestJSONFieldsListed(t *testing.T) {
	for _, l := range jsonLists {
		fields := jsonFields(t, filepath.Join(root, filepath.FromSlash(l.src)), l.typ)
		if len(fields) < 5 {
			t.Fatalf("%s: %s has %d json fields: not the type the test looks for", l.src, l.typ, len(fields))
		}
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(l.doc)))
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		for _, m := range span.FindAllStringSubmatch(fence.ReplaceAllString(string(md), ""), -1) {
			for _, w := range strings.FieldsFunc(m[1], func(r rune) bool { return r != '_' && !isWordRune(r) }) {
				named[w] = true
			}
		}
		for _, f := range fields {
			if !named[f] {
				t.Errorf("%s: JSON field %q (%s.%s) is not listed in a code span", l.doc, f, l.src, l.typ)
			}
		}
	}
}

func isWordRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
