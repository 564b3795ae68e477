package encoding_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    encoding.Spec
		wantErr error
	}{
		{"gzip", encoding.Spec{Name: "gzip"}, nil},
		{"zstd:19", encoding.Spec{Name: "zstd", Level: 19}, nil},
		{"gzip:-2", encoding.Spec{Name: "gzip", Level: -2}, nil},
		{"xml@employees", encoding.Spec{Name: "xml", Model: "employees"}, nil},
		{"zstd:3@225", encoding.Spec{Name: "zstd", Level: 3, Model: "225"}, nil},
		{"my-codec_2.1:2147483647@m.v-1_x", encoding.Spec{Name: "my-codec_2.1", Level: 2147483647, Model: "m.v-1_x"}, nil},
		{"s2:-2147483648", encoding.Spec{Name: "s2", Level: -2147483648}, nil},
		{"", encoding.Spec{}, encoding.ErrSpec},
		{":3", encoding.Spec{}, encoding.ErrSpec},
		{"@m", encoding.Spec{}, encoding.ErrSpec},
		{"gzip:", encoding.Spec{}, encoding.ErrSpec},
		{"gzip:x", encoding.Spec{}, encoding.ErrSpec},
		{"gzip:0", encoding.Spec{}, encoding.ErrSpec},  // the default is written by leaving the level out
		{"gzip:-0", encoding.Spec{}, encoding.ErrSpec}, // the same
		{"gzip:06", encoding.Spec{}, encoding.ErrSpec}, // would print as gzip:6
		{"gzip:+6", encoding.Spec{}, encoding.ErrSpec},
		{"gzip:-", encoding.Spec{}, encoding.ErrSpec},
		{"gzip:2147483648", encoding.Spec{}, encoding.ErrSpec},
		{"gzip:6:7", encoding.Spec{}, encoding.ErrSpec},
		{"xml@", encoding.Spec{}, encoding.ErrSpec},
		{"xml@a@b", encoding.Spec{}, encoding.ErrSpec},
		{"xml@a:3", encoding.Spec{}, encoding.ErrSpec}, // the level comes first
		{"zstd,seal", encoding.Spec{}, encoding.ErrSpec},
		{" gzip", encoding.Spec{}, encoding.ErrSpec},
		{"gz ip", encoding.Spec{}, encoding.ErrSpec},
		{"gzip/6", encoding.Spec{}, encoding.ErrSpec},
		{"gzíp", encoding.Spec{}, encoding.ErrSpec},
		{strings.Repeat("n", 65), encoding.Spec{}, encoding.ErrSpec},
		{"xml@" + strings.Repeat("m", 65), encoding.Spec{}, encoding.ErrSpec},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := encoding.ParseSpec(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseSpec(%q) error %v, want %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				if want := fmt.Sprintf("encoding: bad codec spec %q: ", tt.in); !strings.HasPrefix(err.Error(), want) {
					t.Errorf("error %q does not start %q", err, want)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("ParseSpec(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Fatalf("String() = %q, want %q", s, tt.in)
			}
		})
	}
}

func TestParseChain(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String of the parsed chain
		n       int
		wantErr error
	}{
		{"zstd:9,seal", "zstd:9,seal", 2, nil},
		{"gzip", "gzip", 1, nil},
		{" zstd:9 , seal ", "zstd:9,seal", 2, nil},
		{"xml:3@employees,seal", "xml:3@employees,seal", 2, nil},
		{"a,b,c", "a,b,c", 3, nil}, // the form only: NewChain says what may nest
		{"", "", 0, encoding.ErrSpec},
		{"  ", "", 0, encoding.ErrSpec},
		{"zstd:9,", "", 0, encoding.ErrSpec},
		{",seal", "", 0, encoding.ErrSpec},
		{"zstd:9,,seal", "", 0, encoding.ErrSpec},
		{"zstd:x,seal", "", 0, encoding.ErrSpec},
	}
	// An error names the chain as written and which of its codecs is
	// wrong (before: 'encoding: bad codec spec "": name: empty').
	whys := map[string]string{
		"zstd:9,":      `encoding: bad codec spec "zstd:9,": codec 2 of 2 (""): name: empty`,
		"zstd:9,,seal": `encoding: bad codec spec "zstd:9,,seal": codec 2 of 3 (""): name: empty`,
		"zstd:x,seal":  `encoding: bad codec spec "zstd:x,seal": codec 1 of 2 ("zstd:x"): level "x" is not a nonzero integer`,
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := encoding.ParseChain(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseChain(%q) error %v, want %v", tt.in, err, tt.wantErr)
			}
			if want, ok := whys[tt.in]; ok && (err == nil || err.Error() != want) {
				t.Fatalf("ParseChain(%q) error %q, want %q", tt.in, err, want)
			}
			if err != nil {
				return
			}
			if len(got) != tt.n || got.String() != tt.want {
				t.Fatalf("ParseChain(%q) = %v (%d), want %q (%d)", tt.in, got, len(got), tt.want, tt.n)
			}
		})
	}
}

func TestHeaderSpec(t *testing.T) {
	tests := []struct {
		name string
		p    encoding.Params
		want string
	}{
		{"zstd", encoding.Params{Level: 3}, "zstd:3"},
		{"zstd", encoding.Params{Level: 19, DictID: 225}, "zstd:19@225"},
		{"xml", encoding.Params{Level: 3, DictID: 0xFFFFFFFF}, "xml:3@4294967295"},
		{"seal", encoding.Params{KeyID: "psk:x"}, "seal"}, // keys are not part of a spec
	}
	for _, tt := range tests {
		s := encoding.Header{Codec: tt.name, Params: tt.p}.Spec()
		if s.String() != tt.want {
			t.Errorf("Header{%s, %+v) = %q, want %q", tt.name, tt.p, s, tt.want)
		}
		if id, ok := s.DictID(); ok != (tt.p.DictID != 0) || id != tt.p.DictID {
			t.Errorf("%q: DictID() = %d, %t", s, id, ok)
		}
		if back, err := encoding.ParseSpec(s.String()); err != nil || back != s {
			t.Errorf("%q does not parse back: %+v, %v", s, back, err)
		}
	}
	for _, m := range []string{"employees", "0", "01", "4294967296", ""} {
		if id, ok := (encoding.Spec{Name: "zstd", Model: m}).DictID(); ok {
			t.Errorf("model %q read as dictionary ID %d", m, id)
		}
	}
}

// FuzzParseChain: whatever ParseChain accepts prints back to a chain that
// parses to the same specs, and prints the same again; a chain written
// without spaces or tabs prints back exactly.
func FuzzParseChain(f *testing.F) {
	for _, s := range []string{
		"zstd:9,seal", "gzip", "gzip:-2", "xml@employees", "zstd:3@225", " s2:1 , seal ",
		"", ",", "gzip:0", "gzip:06", "a:1:2", "a@b@c", "x@y:1", "zstd:2147483648", "\xff", "é", "\u3000gzip", "gzip\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := encoding.ParseChain(in)
		if err != nil {
			if !errors.Is(err, encoding.ErrSpec) {
				t.Fatalf("ParseChain(%q): error %v does not wrap ErrSpec", in, err)
			}
			return
		}
		out := c.String()
		back, err := encoding.ParseChain(out)
		if err != nil {
			t.Fatalf("ParseChain(%q) printed %q, which does not parse: %v", in, out, err)
		}
		if len(back) != len(c) {
			t.Fatalf("%q -> %q: %d specs, then %d", in, out, len(c), len(back))
		}
		for i := range c {
			if back[i] != c[i] {
				t.Fatalf("%q -> %q: spec %d %+v, then %+v", in, out, i, c[i], back[i])
			}
		}
		if back.String() != out {
			t.Fatalf("%q printed %q, then %q", in, out, back.String())
		}
		if !strings.ContainsAny(in, " \t") && out != in {
			t.Fatalf("%q printed back as %q", in, out)
		}
	})
}

func ExampleParseChain() {
	c, err := encoding.ParseChain("zstd:9, seal")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range c {
		fmt.Printf("%s level %d\n", s.Name, s.Level)
	}
	fmt.Println(c)

	_, err = encoding.ParseChain("zstd:max")
	fmt.Println(err)
	// Output:
	// zstd level 9
	// seal level 0
	// zstd:9,seal
	// encoding: bad codec spec "zstd:max": level "max" is not a nonzero integer
}
