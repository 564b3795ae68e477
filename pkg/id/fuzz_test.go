package id_test

import (
	"errors"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// FuzzParse: Parse never panics; an error is a *ParseError with a sentinel
// and an offset inside the input; what Parse accepts prints to a string
// that parses back to the same ID and prints the same again, and whose
// accessors do not panic. The seed corpus in testdata/fuzz/FuzzParse holds
// JXSE-written IDs of every kind and format and malformed strings; it is
// rewritten by go test -run TestJXSEWrittenIDs -update.
func FuzzParse(f *testing.F) {
	for _, s := range []string{netPipe, uuidGroup, hashCodat, "urn:jxta:jxta-Null", "URN:JXTA:jxta-netgroup", "urn:jxta:uuid-02", "urn:jxta:uuid-zz", "urn:jxta:x-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := id.Parse(s)
		if err != nil {
			var pe *id.ParseError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(s) || pe.Input != s {
				t.Fatalf("Parse(%q): bad error %#v", s, err)
			}
			if !errors.Is(err, id.ErrSyntax) && !errors.Is(err, id.ErrFormat) && !errors.Is(err, id.ErrLength) && !errors.Is(err, id.ErrType) {
				t.Fatalf("Parse(%q): error %v has no parse sentinel", s, err)
			}
			return
		}
		if x.IsZero() {
			t.Fatalf("Parse(%q) returned the zero ID", s)
		}
		str := x.String()
		y, err := id.Parse(str)
		if err != nil || y != x || y.String() != str {
			t.Fatalf("%q parsed to %q, which re-parses to %v, %v", s, str, y, err)
		}
		if len(str) > len(s)+2 {
			// Printing pads at most a one-byte value with a zero byte.
			t.Fatalf("%q prints longer as %q", s, str)
		}
		for _, g := range []id.ID{x.Group(), x.BaseClass()} {
			if !g.IsZero() {
				if h, err := id.Parse(g.String()); err != nil || h != g {
					t.Fatalf("%v: related ID %v does not round-trip: %v, %v", x, g, h, err)
				}
			}
		}
	})
}
