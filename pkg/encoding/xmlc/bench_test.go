package xmlc_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

func benchDocs() []datasets.Doc {
	return append(datasets.EmployeeDocs(), datasets.DataSetDocs()...)
}

// BenchmarkEncode measures compression of both corpora; bytes_out is the
// payload size.
func BenchmarkEncode(b *testing.B) {
	c, err := xmlc.New()
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range benchDocs() {
		b.Run(d.Name, func(b *testing.B) {
			b.SetBytes(int64(len(d.Data)))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				if out, err = c.Encode(out[:0], d.Data, encoding.Binding{}); err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "bytes_out")
		})
	}
}

// BenchmarkDecode measures decompression of both corpora.
func BenchmarkDecode(b *testing.B) {
	c, err := xmlc.New()
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range benchDocs() {
		enc, _ := c.Encode(nil, d.Data, encoding.Binding{})
		b.Run(d.Name, func(b *testing.B) {
			b.SetBytes(int64(len(d.Data)))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				if out, err = c.Decode(out[:0], enc, c.Params(), encoding.Binding{}, len(d.Data)); err != nil || len(out) != len(d.Data) {
					b.Fatal(err)
				}
			}
			if !bytes.Equal(out, d.Data) {
				b.Fatal("round trip differs")
			}
		})
	}
}

// BenchmarkQuery compares Query with what a receiver without it does:
// decode, then parse with encoding/xml (RawToken, the cheapest way) and
// collect the values; decode alone is given as a floor. MB/s are of the
// document.
func BenchmarkQuery(b *testing.B) {
	c, err := xmlc.New()
	if err != nil {
		b.Fatal(err)
	}
	const ds = "/soap:Envelope/soap:Body/GetOrdersResponse/GetOrdersResult/NewDataSet/Orders/"
	cases := []struct {
		doc  datasets.Doc
		path string
	}{
		{datasets.Doc{Name: "employees-1000", Data: datasets.Employees(1000)}, "/employees/employee/lname"},
		{datasets.Doc{Name: "employees-1000", Data: datasets.Employees(1000)}, "/employees/employee/@id"},
		{datasets.Doc{Name: "dataset-8350", Data: datasets.DataSet(8350)}, ds + "Freight"},
	}
	for _, tc := range cases {
		enc, _ := c.Encode(nil, tc.doc.Data, encoding.Binding{})
		want, err := c.Query(enc, c.Params(), tc.path, len(tc.doc.Data))
		if err != nil || len(want) == 0 {
			b.Fatal(err)
		}
		name := tc.doc.Name + tc.path[strings.LastIndex(tc.path, "/"):]
		b.Run("query/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.doc.Data)))
			b.ReportAllocs()
			for b.Loop() {
				got, err := c.Query(enc, c.Params(), tc.path, len(tc.doc.Data))
				if err != nil || len(got) != len(want) {
					b.Fatal(err)
				}
			}
		})
		b.Run("decode+encoding-xml/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.doc.Data)))
			b.ReportAllocs()
			var dec []byte
			for b.Loop() {
				if dec, err = c.Decode(dec[:0], enc, c.Params(), encoding.Binding{}, len(tc.doc.Data)); err != nil {
					b.Fatal(err)
				}
				if got := parseValues(dec, tc.path); len(got) != len(want) {
					b.Fatalf("%d values, want %d", len(got), len(want))
				}
			}
		})
		b.Run("decode/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.doc.Data)))
			b.ReportAllocs()
			var dec []byte
			for b.Loop() {
				if dec, err = c.Decode(dec[:0], enc, c.Params(), encoding.Binding{}, len(tc.doc.Data)); err != nil || len(dec) != len(tc.doc.Data) {
					b.Fatal(err)
				}
			}
		})
	}
}

// parseValues collects the values at a simple path with encoding/xml.
func parseValues(doc []byte, path string) [][]byte {
	steps := strings.Split(path[1:], "/")
	attr := ""
	if a := steps[len(steps)-1]; strings.HasPrefix(a, "@") {
		attr, steps = a[1:], steps[:len(steps)-1]
	}
	d := xml.NewDecoder(bytes.NewReader(doc))
	depth, match := 0, 0 // elements open; how many of them match the path
	var out [][]byte
	var text []byte
	for {
		tok, err := d.RawToken()
		if err != nil {
			return out
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := t.Name.Local
			if t.Name.Space != "" {
				n = t.Name.Space + ":" + n
			}
			if match == depth && depth < len(steps) && steps[depth] == n {
				match++
				if match == len(steps) {
					text = text[:0]
					for _, a := range t.Attr {
						if attr != "" && a.Name.Local == attr {
							out = append(out, []byte(a.Value))
						}
					}
				}
			}
			depth++
		case xml.EndElement:
			if match == depth {
				if match == len(steps) && attr == "" {
					out = append(out, bytes.Clone(text))
				}
				match--
			}
			depth--
		case xml.CharData:
			if match == len(steps) && depth == match {
				text = append(text, t...)
			}
		}
	}
}

// BenchmarkFirstEncode measures what a new codec costs until it has
// encoded one small document and one that is not XML: building it and
// the zstd encoders' tables, which its first encodes allocate.
func BenchmarkFirstEncode(b *testing.B) {
	doc, text := datasets.Employees(1), []byte(strings.Repeat("not xml, some text; ", 40))
	b.ReportAllocs()
	for b.Loop() {
		c, err := xmlc.New()
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range [][]byte{doc, text} {
			if _, err := c.Encode(nil, in, encoding.Binding{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkFirstEncodeSizes measures what a new codec costs until it has
// encoded one document of each size, at the default and the best level:
// above 4 KiB the main stream goes to the level's encoder, whose tables and
// history its first encode allocates.
func BenchmarkFirstEncodeSizes(b *testing.B) {
	for _, level := range []int{3, 4} {
		for _, rows := range []int{40, 2500} { // 16 KiB, 1 MiB
			in := datasets.DataSet(rows)
			b.Run(fmt.Sprintf("xml:%d/%d", level, len(in)), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c, err := xmlc.New(xmlc.WithLevel(level))
					if err != nil {
						b.Fatal(err)
					}
					if out, err := c.Encode(nil, in, encoding.Binding{}); err != nil || len(out) == 0 {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkEncodeShared measures one codec encoding from every goroutine
// (run with -cpu 1,2), as a node's senders share it: with the work on the
// CPU, -cpu 2 should encode about twice as many documents per second.
func BenchmarkEncodeShared(b *testing.B) {
	c, err := xmlc.New()
	if err != nil {
		b.Fatal(err)
	}
	for _, rows := range []int{3, 40, 160} { // 1 KiB, 16 KiB, 64 KiB
		in := datasets.DataSet(rows)
		b.Run(fmt.Sprint(len(in)), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var out []byte
				for pb.Next() {
					var err error // each goroutine's own
					if out, err = c.Encode(out[:0], in, encoding.Binding{}); err != nil || len(out) == 0 {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
