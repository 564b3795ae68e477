package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

var (
	fence   = regexp.MustCompile("(?ms)^ {0,3}(```|~~~).*?^ {0,3}(```|~~~)[^\\n]*$")
	code    = regexp.MustCompile("`+[^`\\n]*`+")
	link    = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	heading = regexp.MustCompile(`(?m)^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)
	scheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose is a Markdown text without its code blocks and code spans, where
// brackets and hashes are not links and headings.
func prose(md string) string {
	return code.ReplaceAllString(fence.ReplaceAllString(md, ""), "")
}

// links returns the targets of a Markdown text's links and images.
func links(md string) []string {
	var out []string
	for _, m := range link.FindAllStringSubmatch(prose(md), -1) {
		out = append(out, m[1])
	}
	return out
}

// slug is the fragment GitHub gives a heading: lower case, spaces to
// hyphens, everything but letters, digits, hyphens and underscores
// dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments of a Markdown text's headings, repeated
// ones numbered as GitHub numbers them (x, x-1, x-2).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(prose(md), -1) {
		s := slug(code.ReplaceAllStringFunc(m[1], func(c string) string { return strings.Trim(c, "`") }))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// markdownFiles returns README.md and every .md file under docs/.
func markdownFiles(t *testing.T) []string {
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestRelativeLinksResolve: every relative link in README.md and docs/
// names a file or directory of the repository (not outside it, where
// GitHub cannot follow), and its fragment a heading of the Markdown file
// it names.
func TestRelativeLinksResolve(t *testing.T) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range markdownFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, f)
		for _, target := range links(string(b)) {
			if scheme.MatchString(target) {
				continue // http:, https:, mailto:
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				abs, _ := filepath.Abs(dest)
				if abs != absRoot && !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", name, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file", name, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: a fragment of a file that is not Markdown", name, target)
				continue
			}
			md, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", name, target, err)
				continue
			}
			if !anchors(string(md))[frag] {
				t.Errorf("%s: link %q: no heading #%s in %s", name, target, frag, filepath.Base(dest))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d relative links: the README and docs/ are not where the test looks", checked)
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start: send and receive", "quick-start-send-and-receive"},
		{"Interoperability with JXSE 2.7", "interoperability-with-jxse-27"},
		{"JXTA peers on JXTA's own transport", "jxta-peers-on-jxtas-own-transport"},
		{"send and recv in detail", "send-and-recv-in-detail"},
		{"The `xml` codec", "the-xml-codec"},
	} {
		got := slug(code.ReplaceAllStringFunc(c.heading, func(s string) string { return strings.Trim(s, "`") }))
		if got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestLinksAndAnchors(t *testing.T) {
	md := "# Title\n\nSee [a](a.md#x), ![i](img/i.svg \"t\") and [web](https://example.com).\n" +
		"`[not](code.md)`\n\n```sh\n# not a heading\necho [x](y.md)\n```\n\n## Title\n"
	got := strings.Join(links(md), " ")
	if want := "a.md#x img/i.svg https://example.com"; got != want {
		t.Errorf("links = %q, want %q", got, want)
	}
	a := anchors(md)
	if !a["title"] || !a["title-1"] || a["not-a-heading"] || len(a) != 2 {
		t.Errorf("anchors = %v, want title and title-1", a)
	}
}
