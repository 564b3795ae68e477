package xmlc_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// liveAfter returns how much more the heap holds, after collecting twice
// (the second empties sync.Pools), once f has run and what it returned
// is dropped.
func liveAfter(f func()) int64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&b)
	return int64(b.HeapAlloc) - int64(a.HeapAlloc)
}

// What a codec decoded is the caller's once Decode returns: the codec's
// zstd decoders keep none of it (klauspost's decoder keeps a reference to
// the output of its last frame until its next, which held the last
// document, or main stream, each decoder and model decoded for the
// codec's life). A receiver holding models keeps what their decoders
// need, not a document's worth per model.
func TestDecodeKeepsNoOutput(t *testing.T) {
	samples, err := codecbench.ModelSamples("dataset")
	if err != nil {
		t.Fatal(err)
	}
	m, err := xmlc.NewModel(0xD5, samples...)
	if err != nil {
		t.Fatal(err)
	}
	doc := datasets.DataSet(4000) // about 1.6 MB
	notXML := bytes.Repeat([]byte("p2pmsg not xml, "), 1<<16)
	for _, tc := range []struct {
		name string
		enc  []xmlc.Option
		in   []byte
		warm []byte // smaller, coded the same way
	}{
		{"xml with a model", []xmlc.Option{xmlc.WithEncoderModel(m)}, doc, datasets.DataSet(300)},
		{"xml", nil, doc, datasets.DataSet(300)},
		{"zstd", nil, notXML, notXML[:len(notXML)/16]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd, err := xmlc.New(tc.enc...)
			if err != nil {
				t.Fatal(err)
			}
			frame, err := snd.Encode(nil, tc.in, encoding.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := xmlc.New(xmlc.WithModels(m))
			if err != nil {
				t.Fatal(err)
			}
			// Decoding a smaller document builds what the codec keeps
			// (decoders' tables and buffers); what decoding a larger one
			// adds is what it keeps of that document.
			warm, err := snd.Encode(nil, tc.warm, encoding.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := c.Decode(nil, warm, snd.Params(), encoding.Binding{}, 64<<20); err != nil {
					t.Fatal(err)
				}
			}
			got := liveAfter(func() {
				out, err := c.Decode(nil, frame, snd.Params(), encoding.Binding{}, 64<<20)
				if err != nil || !bytes.Equal(out, tc.in) {
					t.Fatalf("decoded %d bytes, %v; want the %d encoded", len(out), err, len(tc.in))
				}
			})
			// A sixteenth of the document: room for the heap's own
			// accounting, nothing like the document (or its main stream,
			// a third of it) that was held.
			if max := int64(len(tc.in) / 16); got > max {
				t.Errorf("after a %d-byte decode the heap holds %d bytes more, want at most %d", len(tc.in), got, max)
			}
			runtime.KeepAlive(c)
			runtime.KeepAlive(snd)
		})
	}
}
