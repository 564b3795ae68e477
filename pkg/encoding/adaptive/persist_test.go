package adaptive_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// sampleModels is models with a little of everything: encodes of two
// kinds, decodes, and a peer with a path and a profile.
func sampleModels() *adaptive.Models {
	w := newWorld()
	m := w.models
	m.Teach("fast:1", message.Element{Data: bytes.Repeat([]byte{7}, 5000)}, 5010, 7*time.Microsecond)
	rm := adaptive.NewModels()
	rm.TeachDecode("fast", 4096, 1000, 3*time.Microsecond)
	m.SetPeer("12D3KooWpeer", adaptive.PeerRecord{
		Path: adaptive.Path{RTT: 60 * time.Millisecond, Bandwidth: 80_000, InitWindow: 14600},
		At:   time.Unix(1_700_000_000, 5), Profile: rm.Profile(),
	})
	return m
}

func TestModelsSurviveARestart(t *testing.T) {
	m := sampleModels()
	file := filepath.Join(t.TempDir(), "data", adaptive.DefaultFile)
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
	r, ok := back.Peer("12D3KooWpeer")
	if !ok || r.Path.Bandwidth != 80_000 || r.Path.InitWindow != 14600 || !r.At.Equal(time.Unix(1_700_000_000, 5)) {
		t.Fatalf("peer record %+v", r)
	}
	if got := r.Profile.Codecs(); len(got) != 1 || got[0] != "fast" {
		t.Fatalf("peer profile codecs %v", got)
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
	file := filepath.Join(t.TempDir(), adaptive.DefaultFile)
	b, _ := sampleModels().MarshalBinary()
	// A version 1 file (before the grid's machinery went) is refused too.
	for _, bad := range [][]byte{[]byte("P2AM\x02"), b[:len(b)-3], append(b, 0), []byte("hello"), []byte("P2AM\x01\x00\x00\x00\x00")} {
		if err := os.WriteFile(file, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := adaptive.Load(file); !errors.Is(err, adaptive.ErrCorrupt) {
			t.Fatalf("%q...: err %v, want ErrCorrupt", bad[:min(len(bad), 8)], err)
		}
	}
}

func TestParseModelsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"too large", append([]byte("P2AM\x02"), make([]byte, 16<<20)...)},
		// magic, 300 specs (limit 256)
		{"too many specs", []byte("P2AM\x02\xac\x02")},
		// one spec "a", no kinds, then a class curve claiming 99 buckets
		{"long curve", []byte("P2AM\x02\x01\x01a\x00\x63")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := adaptive.ParseModels(tc.b); !errors.Is(err, adaptive.ErrCorrupt) {
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
	f.Add([]byte("P2AM\x02\x01\x01a\x00\x01\x03"))
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
		s, err := adaptive.New([]encoding.Codec{w.fast, w.strong}, adaptive.WithModels(m), adaptive.WithClock(w.clock))
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
		{"magic", []byte("P2AM\x02\x00")},
		{"version", []byte("P2AP\x01\x00")},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"too many codecs", []byte("P2AP\x02\x41")},
		{"empty name", []byte("P2AP\x02\x01\x00")},
		{"too large", append([]byte("P2AP\x02"), make([]byte, adaptive.MaxProfileSize)...)},
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
	f.Add([]byte("P2AP\x02\x00"))
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
