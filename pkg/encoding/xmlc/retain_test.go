package xmlc_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
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
	m := trainedModel(t, "dataset", 0xD5)
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

// Codecs holding the same model (with the same decoded-size limit) share
// its zstd decoders: a second codec's first decode does not build them
// and their buffers again, as the first codec's did. A process building
// codecs per use (a chain per spec, a registry per key set) pays for a
// model's decoders once.
func TestCodecsShareModelDecoders(t *testing.T) {
	m := trainedModel(t, "dataset", 0xD5)
	snd, err := xmlc.New(xmlc.WithEncoderModel(m))
	if err != nil {
		t.Fatal(err)
	}
	frame, err := snd.Encode(nil, datasets.DataSet(2000), encoding.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	decode := func(c *xmlc.Codec) uint64 {
		return testutil.Allocated(func() {
			if _, err := c.Decode(nil, frame, snd.Params(), encoding.Binding{}, 64<<20); err != nil {
				t.Fatal(err)
			}
		})
	}
	a, err := xmlc.New(xmlc.WithModels(m))
	if err != nil {
		t.Fatal(err)
	}
	first := decode(a)
	b, err := xmlc.New(xmlc.WithModels(m))
	if err != nil {
		t.Fatal(err)
	}
	// A zstd block decoder's buffers for a frame of full blocks are over
	// 128 KiB (a block's literals alone can be); the second codec's first
	// decode spares at least half that. What it does allocate is the
	// document and its own scratch (the main stream), as the first did.
	const decoderBuffers = 64 << 10
	if got := decode(b); got+decoderBuffers > first {
		t.Errorf("a second codec's first decode allocated %d bytes, the first codec's %d: want %d less", got, first, decoderBuffers)
	}
	runtime.KeepAlive(a)
}
