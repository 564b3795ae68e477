package adaptive_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// sampleModels is models with a little of everything: encodes of two
// kinds and decodes.
func sampleModels() *adaptive.Models {
	m := newWorld().models
	m.Teach("fast:1", message.Element{Data: bytes.Repeat([]byte{7}, 5000)}, 5010, 7*time.Microsecond)
	return m
}

func TestModelsSurviveARestart(t *testing.T) {
	m := sampleModels()
	file := filepath.Join(t.TempDir(), "data", "models.json")
	if err := m.Save(file); err != nil {
		t.Fatal(err)
	}
	back, err := adaptive.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.MarshalBinary()
	b, _ := back.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatal("reloaded models differ")
	}
	if got := back.Profile().Codecs(); len(got) != 2 {
		t.Fatalf("decode table %v", got)
	}
	// Decisions made from the reloaded models are the same.
	w := newWorld()
	d1 := w.scheme(t, adaptive.WithModels(m), adaptive.WithPeer(path(1e6))).Decide(doc(docSize))
	d2 := w.scheme(t, adaptive.WithModels(back), adaptive.WithPeer(path(1e6))).Decide(doc(docSize))
	for i := range d1.Estimates {
		if d1.Estimates[i].Total != d2.Estimates[i].Total {
			t.Fatalf("estimate %d: %v before the restart, %v after", i, d1.Estimates[i].Total, d2.Estimates[i].Total)
		}
	}
}

func TestLoadMissingFileGivesEmptyModels(t *testing.T) {
	m, err := adaptive.Load(filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Specs()) != 0 {
		t.Fatal("models from nowhere know something")
	}
}

func TestLoadCorruptFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "models.json")
	b, _ := sampleModels().MarshalBinary()
	// A version 1 file (before the grid's machinery went) is refused too.
	for _, bad := range [][]byte{[]byte("P2AM\x02"), b[:len(b)-3], append(b, 0), []byte("hello"), []byte("P2AM\x01\x00\x00\x00\x00")} {
		if err := os.WriteFile(file, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := adaptive.Load(file)
		if !errors.Is(err, adaptive.ErrCorrupt) {
			t.Fatalf("%q...: err %v, want ErrCorrupt", bad[:min(len(bad), 8)], err)
		}
		if s := err.Error(); strings.Count(s, "adaptive:") != 1 || !strings.Contains(s, file) {
			t.Fatalf("%q...: error %q, want the file named and the package once", bad[:min(len(bad), 8)], s)
		}
	}
}

func TestParseModelsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    string
	}{
		{"too large", `{"version":2,"decode":{"` + strings.Repeat("x", 16<<20) + `":[]}}`},
		{"version", `{"version":1}`},
		{"binary version 1", "P2AM\x01\x00\x00\x00\x00"},
		{"empty name", `{"version":2,"codecs":{"":{}}}`},
		{"long name", `{"version":2,"decode":{"` + strings.Repeat("x", 300) + `":[]}}`},
		{"order", `{"version":2,"codecs":{"a:1":{"class":[[[1,1000,5],[1,100,3]]]}}}`},
		{"same bucket", `{"version":2,"codecs":{"a:1":{"class":[[[1,100,5],[1,101,3]]]}}}`},
		{"weight", `{"version":2,"codecs":{"a:1":{"class":[[[9,100,5]]]}}}`},
		{"kind", `{"version":2,"codecs":{"a:1":{"size":{"text/xml/huge":[]}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := adaptive.ParseModels([]byte(tc.b)); !errors.Is(err, adaptive.ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

func FuzzParseModels(f *testing.F) {
	b, _ := sampleModels().MarshalBinary()
	f.Add(b)
	e, _ := adaptive.NewModels().MarshalBinary()
	f.Add(e)
	f.Add(b[:len(b)/2])
	f.Add([]byte(`{"version":2,"codecs":{"a:1":{"class":[[[1,100,5],[2,1000,30]]]}}}`))
	f.Add([]byte("P2AM\x01\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := adaptive.ParseModels(in)
		if err != nil {
			if !errors.Is(err, adaptive.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		out, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		again, err := adaptive.ParseModels(out)
		if err != nil {
			t.Fatalf("re-parsing what was parsed: %v", err)
		}
		out2, _ := again.MarshalBinary()
		if !bytes.Equal(out, out2) {
			t.Fatal("marshal is not stable")
		}
		// Whatever was parsed must be usable.
		w := newWorld()
		s, err := adaptive.New([]encoding.Codec{w.fast, w.strong}, adaptive.WithModels(m))
		if err != nil {
			t.Fatal(err)
		}
		s.Decide(doc(1000))
	})
}

func TestProfileRoundTrip(t *testing.T) {
	w := newWorld()
	p := decodeProfile(w, map[string]time.Duration{"fast": 2, "strong": 9})
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 512 {
		t.Errorf("a two-codec profile takes %d bytes", len(b))
	}
	q := new(adaptive.Profile)
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if c, _ := q.MarshalBinary(); !bytes.Equal(b, c) || len(q.Codecs()) != 2 {
		t.Fatalf("profile of %v came back as %v", p.Codecs(), q.Codecs())
	}
}

func TestParseProfileRejects(t *testing.T) {
	good, _ := decodeProfile(newWorld(), map[string]time.Duration{"fast": 2}).MarshalBinary()
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("P2AP\x01\x00")},
		{"version", []byte(`{"version":1,"decode":{}}`)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"too many codecs", []byte(manyCodecs(65))},
		{"empty name", []byte(`{"version":2,"decode":{"":[]}}`)},
		{"null", []byte(`{"version":2,"decode":{"a":null}}`)},
		{"too large", append([]byte(`{"version":2}`), bytes.Repeat([]byte(" "), adaptive.MaxProfileSize)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := new(adaptive.Profile).UnmarshalBinary(tc.b); !errors.Is(err, adaptive.ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

func FuzzParseProfile(f *testing.F) {
	good, _ := decodeProfile(newWorld(), map[string]time.Duration{"fast": 2, "strong": 9}).MarshalBinary()
	f.Add(good)
	f.Add([]byte(`{"version":2,"decode":{"a":[[[1,100,5]],[],[],[]]}}`))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, in []byte) {
		p := new(adaptive.Profile)
		if err := p.UnmarshalBinary(in); err != nil {
			if !errors.Is(err, adaptive.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		out, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		q := new(adaptive.Profile)
		if err := q.UnmarshalBinary(out); err != nil {
			t.Fatal(err)
		}
		if out2, _ := q.MarshalBinary(); !bytes.Equal(out, out2) {
			t.Fatal("marshal is not stable")
		}
	})
}

func manyCodecs(n int) string {
	var b strings.Builder
	b.WriteString(`{"version":2,"decode":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"c%d":[]`, i)
	}
	b.WriteString("}}")
	return b.String()
}

// Models files and profiles written before the models and the profile
// shared one reader read the same and write back byte for byte.
func TestFormatVersion2Files(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "models-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := adaptive.Load(filepath.Join("testdata", "models-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := m.MarshalBinary(); !bytes.Equal(out, b) {
		t.Fatalf("models came back as\n%s\nwant\n%s", out, b)
	}
	b, err = os.ReadFile(filepath.Join("testdata", "profile-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p adaptive.Profile
	if err := p.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if out, _ := p.MarshalBinary(); !bytes.Equal(out, b) {
		t.Fatalf("profile came back as\n%s\nwant\n%s", out, b)
	}
}

// Models that saw more media types than a file holds kinds per codec
// still save a file that loads.
func TestModelsOfManyKindsLoad(t *testing.T) {
	m := adaptive.NewModels()
	for i := range 1100 {
		m.Teach("fast:1", message.Element{MIME: fmt.Sprintf("text/x-%d", i), Data: periodic(1000)}, 300, time.Microsecond)
	}
	file := filepath.Join(t.TempDir(), "models.json")
	if err := m.Save(file); err != nil {
		t.Fatal(err)
	}
	if _, err := adaptive.Load(file); err != nil {
		t.Fatal(err)
	}
}
