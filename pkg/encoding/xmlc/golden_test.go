package xmlc_test

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

var updateGolden = flag.Bool("update-golden", false, "write testdata/encoded.sha256 from this code's encodings")

const goldenFile = "testdata/encoded.sha256"

// Encodings do not change unnoticed: every document of the corpora (and
// each model sample alone, the one-record messages models are for),
// encoded at every level, without a model and with each built-in one,
// gives the bytes recorded in testdata/encoded.sha256 (one digest per
// document and codec), and decodes back to the document. A receiver
// decodes what senders of other versions encoded, and the other way
// round: work on the codec's memory (what it builds, shares or drops)
// must leave them as they are.
func TestEncodingsUnchanged(t *testing.T) {
	type doc struct {
		name string
		data []byte
	}
	var docs []doc
	in, err := codecbench.Corpus("all")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range in {
		docs = append(docs, doc{d.Name, d.Data})
	}
	codecs := map[string][]xmlc.Option{}
	var names []string
	for l := 1; l <= 4; l++ {
		n := fmt.Sprintf("xml:%d", l)
		codecs[n], names = []xmlc.Option{xmlc.WithLevel(l)}, append(names, n)
	}
	for _, name := range codecbench.Models {
		samples, err := codecbench.ModelSamples(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := xmlc.NewModel(0x100, samples...)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range samples {
			docs = append(docs, doc{fmt.Sprintf("%s-sample-%d", name, i), s})
		}
		for l := 1; l <= 4; l++ {
			n := fmt.Sprintf("xml:%d@%s", l, name)
			codecs[n], names = []xmlc.Option{xmlc.WithLevel(l), xmlc.WithEncoderModel(m)}, append(names, n)
		}
	}
	var got strings.Builder
	for _, n := range names {
		c, err := xmlc.New(codecs[n]...)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			enc, err := c.Encode(nil, d.data, encoding.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := c.Decode(nil, enc, c.Params(), encoding.Binding{}, 64<<20)
			if err != nil || !bytes.Equal(dec, d.data) {
				t.Errorf("%s %s: decoded %d bytes (%v), want the %d encoded", n, d.name, len(dec), err, len(d.data))
			}
			fmt.Fprintf(&got, "%x %s %s\n", sha256.Sum256(enc), n, d.name)
		}
	}
	if *updateGolden {
		if err := os.WriteFile(goldenFile, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.String(); g != string(want) {
		gl, wl := strings.Split(g, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Errorf("encoding differs: got %q, want %q", gl[i], wl[i])
			}
		}
		if len(gl) != len(wl) {
			t.Errorf("%d encodings, want %d", len(gl)-1, len(wl)-1)
		}
	}
}
