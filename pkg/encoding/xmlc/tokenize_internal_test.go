package xmlc

import (
	"bytes"
	"encoding/xml"
	"io"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
)

// BenchmarkTokenize compares the codec's scanner (tokenizing and building
// the structure runs and containers: more work than tokenizing; with and
// without replaying kept runs) with
// encoding/xml's RawToken loop, the standard library's cheapest way
// through a document. It backs the choice of a scanner of our own.
func BenchmarkTokenize(b *testing.B) {
	docs := []datasets.Doc{{Name: "employees-1000", Data: datasets.Employees(1000)}, {Name: "dataset-110", Data: datasets.DataSet(110)}}
	for _, d := range docs {
		b.Run("xmlc-scan/"+d.Name, func(b *testing.B) {
			b.SetBytes(int64(len(d.Data)))
			b.ReportAllocs()
			e := newEncoder()
			for b.Loop() {
				e.reset(d.Data, nil)
				if !e.scan() {
					b.Fatal("scan refused the document")
				}
			}
		})
		b.Run("xmlc-scan-noreplay/"+d.Name, func(b *testing.B) {
			b.SetBytes(int64(len(d.Data)))
			b.ReportAllocs()
			e := newEncoder()
			e.noReplay = true
			for b.Loop() {
				e.reset(d.Data, nil)
				if !e.scan() {
					b.Fatal("scan refused the document")
				}
			}
		})
		b.Run("encoding-xml-RawToken/"+d.Name, func(b *testing.B) {
			b.SetBytes(int64(len(d.Data)))
			b.ReportAllocs()
			for b.Loop() {
				dec := xml.NewDecoder(bytes.NewReader(d.Data))
				n := 0
				for {
					_, err := dec.RawToken()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n == 0 || dec.InputOffset() != int64(len(d.Data)) {
					b.Fatal("did not reach the end")
				}
			}
		})
	}
}
