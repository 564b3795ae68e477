package id_test

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// FuzzParse: Parse never panics, and what it accepts prints to a string
// that parses back to the same ID and prints the same. Seeds: JXSE-written
// IDs of every kind and format (testdata/jxse-ids.txt).
func FuzzParse(f *testing.F) {
	fh, err := os.Open(filepath.Join("testdata", "jxse-ids.txt"))
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f.Add(sc.Text())
	}
	fh.Close()
	for _, s := range []string{"urn:jxta:jxta-Null", "URN:JXTA:jxta-netgroup", "urn:jxta:uuid-02", "urn:jxta:uuid-zz", "urn:jxta:x-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := id.Parse(s)
		if err != nil {
			return
		}
		str := x.String()
		y, err := id.Parse(str)
		if err != nil || y != x || y.String() != str {
			t.Fatalf("%q parsed to %v, which re-parses to %v, %v", s, str, y, err)
		}
		_ = x.Group()
	})
}

func BenchmarkParse(b *testing.B) {
	const s = "urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := id.Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	x := id.MustParse("urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04")
	b.ReportAllocs()
	for b.Loop() {
		if len(x.String()) == 0 {
			b.Fatal("empty")
		}
	}
}
