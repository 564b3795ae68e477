package encoding_test

import (
	"bytes"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/deflate"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// BenchmarkDecode measures the encoding layer's Decode of one encoded
// element, header, buffer sizing and budget included, per codec over the
// smallest, a middling and the largest employees document; the codec
// benchmarks (internal/codecbench) measure the codecs alone.
func BenchmarkDecode(b *testing.B) {
	docs := datasets.EmployeeDocs()
	for _, spec := range []string{"zstd:3", "s2:1", "gzip:6", "deflate:6", "xml"} {
		sp, err := encoding.ParseSpec(spec)
		if err != nil {
			b.Fatal(err)
		}
		c, err := encoding.NewCodec(sp)
		if err != nil {
			b.Fatal(err)
		}
		s, err := encoding.New([]encoding.Codec{c}, encoding.WithSelector(encoding.ByName("doc")))
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range []datasets.Doc{docs[0], docs[3], docs[len(docs)-1]} {
			m, err := s.Encode(message.New(message.Element{Name: "doc", MIME: message.XMLUTF8, Data: d.Data}))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(spec+"/"+d.Name, func(b *testing.B) {
				b.SetBytes(int64(len(d.Data)))
				b.ReportAllocs()
				for b.Loop() {
					out, err := s.Decode(m)
					if err != nil {
						b.Fatal(err)
					}
					if e, _ := out.Get("", "doc"); len(e.Data) != len(d.Data) {
						b.Fatalf("decoded %d bytes, want %d", len(e.Data), len(d.Data))
					}
				}
				out, _ := s.Decode(m)
				if e, _ := out.Get("", "doc"); !bytes.Equal(e.Data, d.Data) {
					b.Fatal("round trip differs")
				}
			})
		}
	}
}
