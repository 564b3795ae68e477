package cli

import (
	"encoding/json"
	"testing"
)

func TestPrintableLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain name", "plain name"},
		{"tab\there", `tab\there`},
		{"a\nb", `a\nb`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"back\\slash", `back\\slash`},
		{"r\u202eight", `r\u202eight`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"ünïcödé 名前", "ünïcödé 名前"},
		{"\x7f", `\x7f`},
	} {
		if got := printableLine(tc.in); got != tc.want {
			t.Errorf("printableLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPrintableText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"two\nlines\twith tab", "two\nlines\twith tab"},
		{"crlf\r\nline", "crlf\nline"},
		{"over\rwrite", `over\x0dwrite`},
		{`C:\path`, `C:\path`},
		{"\x1b[2J", `\x1b[2J`},
	} {
		if got := printableText(tc.in); got != tc.want {
			t.Errorf("printableText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestJSONSafe(t *testing.T) {
	in := map[string]string{"n": "a\u009bb\u202ec\U000e0001d ok é"}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonSafe(js)
	want := `{"n":"a\u009bb\u202ec\udb40\udc01d ok é"}`
	if string(got) != want {
		t.Fatalf("jsonSafe = %s, want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["n"] != in["n"] {
		t.Fatalf("round trip: %q, %v", back["n"], err)
	}
}
