package cli

import (
	"strings"
	"testing"
)

// TestCutLine: a line cut to the bound ends after a word when one ends
// near the bound; before, "… (asked 0 of 1 given peer); last error: dial
// …" was cut to "; last erro…" when the bound fell there.
func TestCutLine(t *testing.T) {
	urn := "urn:jxta:cbid-" + strings.Repeat("A", 66)
	for _, tt := range []struct{ in, want string }{
		{"short", "short"},
		{"no peer found with the pipe bound: " + urn + " as input (asked 0 of 1 given peer); last error: dialing",
			"no peer found with the pipe bound: " + urn + " as input (asked 0 of 1 given peer); last …"},
		{"x: " + urn + urn, "x: " + (urn + urn)[:157] + "…"},
		{strings.Repeat("é", 100), strings.Repeat("é", 80) + "…"},
	} {
		if got := cutLine(tt.in, 160); got != tt.want {
			t.Errorf("cutLine(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}
