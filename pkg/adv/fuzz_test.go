package adv_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
)

// FuzzParse: Parse never panics; what it accepts marshals (when valid) and
// parses back equal. Seeds: the JXSE-written golden files and hostile
// documents.
func FuzzParse(f *testing.F) {
	golden, _ := filepath.Glob(filepath.Join("testdata", "*.xml"))
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>`))
	f.Add([]byte(`<jxta:PipeAdvertisement xmlns:jxta="http://jxta.org"><Id>urn:jxta:uuid-59616261646162614E50472050325033C0FFEE04</Id><Type>JxtaUnicastSecure</Type>` +
		`<Binder>12D3KooWBVXX99f6arzRf2F5D5gTupvJmb9VNeSPeyJeAkSumagr</Binder><Binder>QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N</Binder></jxta:PipeAdvertisement>`))
	f.Add([]byte(`<jxta:PipeAdvertisement xmlns:jxta="http://jxta.org"><Id>urn:jxta:jxta-Null</Id></jxta:PipeAdvertisement>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var a *adv.PipeAdvertisement
		var err error
		alloc := testutil.Allocated(func() { a, err = adv.Parse(data) })
		// Within the size, depth and tag limits a document costs a
		// multiple of its bytes: about 30 times for an advertisement, 80
		// for one of a thousand empty tags.
		if bound := uint64(64<<10 + 128*len(data)); alloc > bound {
			t.Fatalf("parsing %d bytes allocated %d, over %d", len(data), alloc, bound)
		}
		if err != nil {
			return
		}
		if a.Validate() != nil {
			return // e.g. a name with control characters read from &#1;
		}
		b, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := adv.Parse(b)
		if err != nil || !reflect.DeepEqual(back, a) {
			t.Fatalf("re-parse: %+v, %v; want %+v", back, err, a)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	a, _ := adv.New(adv.Unicast, "benchmark pipe", "a description")
	data, _ := a.Marshal()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := adv.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	a, _ := adv.New(adv.Unicast, "benchmark pipe", "a description")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}
