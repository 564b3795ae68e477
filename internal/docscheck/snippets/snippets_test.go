package snippets_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/docscheck"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..", "..")

// endMark ends the compared part of a twin's body.
const endMark = "// end of snippet"

// ellipsis in a snippet stands for any balanced run of its twin's tokens.
const ellipsis = "…"

// twinName names a twin function.
var twinName = regexp.MustCompile(`^snippet[A-Z]`)

// goFence is a fenced code block marked as Go.
var goFence = regexp.MustCompile("(?ms)^ {0,3}```go[ \t]*\n(.*?)^ {0,3}```[ \t]*$")

// tok is a token as compared: its kind, and its text for names and
// literals. Semicolons are layout, and comments are not compared.
type tok struct {
	kind token.Token
	lit  string
	line int // in the scanned text, from 1
}

func (t tok) String() string {
	if t.lit != "" {
		return t.lit
	}
	return t.kind.String()
}

// tokens scans Go source, keeping "…" as an ILLEGAL token.
func tokens(src string) []tok {
	fset := token.NewFileSet()
	f := fset.AddFile("", -1, len(src))
	var s scanner.Scanner
	s.Init(f, []byte(src), func(token.Position, string) {}, 0)
	var out []tok
	for {
		pos, kind, lit := s.Scan()
		switch kind {
		case token.EOF:
			return out
		case token.SEMICOLON:
			continue
		case token.ILLEGAL:
			if !strings.HasPrefix(src[f.Offset(pos):], ellipsis) {
				lit = "ILLEGAL " + lit
			} else {
				lit = ellipsis
			}
		case token.IDENT, token.INT, token.FLOAT, token.IMAG, token.CHAR, token.STRING:
		default:
			lit = ""
		}
		out = append(out, tok{kind, lit, f.Line(pos)})
	}
}

// match compares a snippet's tokens with a twin's, "…" matching a
// balanced run of the twin's tokens up to the snippet's next token. It
// reports whether they match, and how many of the snippet's tokens did.
func match(snip, twin []tok) (n int, ok bool) {
	i, j := 0, 0
	for i < len(snip) {
		if snip[i].lit == ellipsis {
			depth := 0
			for j < len(twin) && (depth > 0 || i+1 == len(snip) || !same(twin[j], snip[i+1])) {
				switch twin[j].kind {
				case token.LBRACE, token.LPAREN, token.LBRACK:
					depth++
				case token.RBRACE, token.RPAREN, token.RBRACK:
					depth--
				}
				j++
			}
			i++
			continue
		}
		if j == len(twin) || !same(snip[i], twin[j]) {
			return i, false
		}
		i, j = i+1, j+1
	}
	return i, j == len(twin)
}

func same(a, b tok) bool { return a.kind == b.kind && a.lit == b.lit }

type twin struct {
	name string
	toks []tok
	used bool
}

// twins reads the functions of this package's test files twinName names.
func twins(t *testing.T) []*twin {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []*twin
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !twinName.MatchString(fn.Name.Name) || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			body, _, _ = strings.Cut(body, endMark)
			out = append(out, &twin{name: fn.Name.Name, toks: tokens(body)})
		}
	}
	return out
}

// snippet is a Go code block of a Markdown file.
type snippet struct {
	file string
	line int // of its first line of code
	toks []tok
}

func markdownSnippets(t *testing.T) []snippet {
	files, err := docscheck.MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, f)
		for _, m := range goFence.FindAllStringSubmatchIndex(string(b), -1) {
			line := strings.Count(string(b[:m[2]]), "\n") + 1
			out = append(out, snippet{filepath.ToSlash(name), line, tokens(string(b[m[2]:m[3]]))})
		}
	}
	return out
}

// TestSnippets: every Go snippet of README.md and docs/ is, token for
// token, the body of a twin function here (which compiles), and every
// twin is a snippet's.
func TestSnippets(t *testing.T) {
	tw := twins(t)
	sn := markdownSnippets(t)
	if len(sn) < 3 || len(tw) < 3 {
		t.Fatalf("%d snippets, %d twins: the README and docs/ are not where the test looks", len(sn), len(tw))
	}
	for _, s := range sn {
		var best *twin
		bestN, found := -1, false
		for _, w := range tw {
			n, ok := match(s.toks, w.toks)
			if ok {
				w.used, found = true, true
				break
			}
			if n > bestN {
				best, bestN = w, n
			}
		}
		if found {
			continue
		}
		best.used = true // reported here
		line, at := s.line, "where the twin goes on"
		if bestN < len(s.toks) {
			line, at = s.line+s.toks[bestN].line-1, fmt.Sprintf("at %q", s.toks[bestN])
		}
		t.Errorf("%s:%d: the snippet is no twin's: it leaves %s %s; make the twin the snippet (it must compile)", s.file, line, best.name, at)
	}
	for _, w := range tw {
		if !w.used {
			t.Errorf("%s is no snippet's twin: remove it, or restore its snippet", w.name)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		snip, twin string
		want       bool
	}{
		{"x := f(1) // a comment", "x := f(1)", true},
		{"if err != nil { … }", "if err != nil {\n\treturn fmt.Errorf(\"x: %w\", err)\n}", true},
		{"if err != nil { … }\ny()", "if err != nil {\n\tif a { b() }\n}\ny()", true},
		{"x := f(1)", "x := f(2)", false},
		{"x := f(1)", "x := f(1)\ny()", false},
		{"x := f(1)\ny()", "x := f(1)", false},
		{"", "x := f(1)", false},
		{"…", "x := f(1)", true},
	} {
		if _, got := match(tokens(c.snip), tokens(c.twin)); got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.snip, c.twin, got, c.want)
		}
	}
}
