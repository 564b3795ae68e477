package codecbench_test

import (
	"bytes"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// BenchmarkCodecs measures every default codec spec on the seven
// employees documents: compressed size (bytes_out), compress and
// decompress MB/s.
func BenchmarkCodecs(b *testing.B) {
	bind := encoding.Binding{Namespace: "lab", Name: "codecs", PipeID: "lab"}
	for _, spec := range codecbench.DefaultSpecs {
		c, err := codecbench.BenchCodec(spec)
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range codecbench.EmployeeInputs() {
			enc, err := c.Encode(nil, in.Data, bind)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(spec+"/"+in.Name+"/compress", func(b *testing.B) {
				b.SetBytes(int64(len(in.Data)))
				b.ReportAllocs()
				var out []byte
				for b.Loop() {
					if out, err = c.Encode(out[:0], in.Data, bind); err != nil || len(out) == 0 {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(out)), "bytes_out")
			})
			b.Run(spec+"/"+in.Name+"/decompress", func(b *testing.B) {
				b.SetBytes(int64(len(in.Data)))
				b.ReportAllocs()
				var out []byte
				for b.Loop() {
					if out, err = c.Decode(out[:0], enc, c.Params(), bind, len(in.Data)); err != nil || len(out) != len(in.Data) {
						b.Fatal(err)
					}
				}
				if !bytes.Equal(out, in.Data) {
					b.Fatal("round trip differs")
				}
				b.ReportMetric(float64(len(enc)), "bytes_out")
			})
		}
	}
}

// BenchmarkDataSet measures the XML codec beside gzip (klauspost's and
// Go's own), zstd and s2 on the three SOAP/DataSet query results.
func BenchmarkDataSet(b *testing.B) {
	bind := encoding.Binding{Namespace: "lab", Name: "codecs", PipeID: "lab"}
	for _, spec := range []string{"xml", "gzip:6", "stdgzip:6", "zstd:3", "zstd:19", "s2:1"} {
		c, err := codecbench.BenchCodec(spec)
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range codecbench.DataSetInputs() {
			enc, err := c.Encode(nil, in.Data, bind)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(spec+"/"+in.Name+"/compress", func(b *testing.B) {
				b.SetBytes(int64(len(in.Data)))
				b.ReportAllocs()
				var out []byte
				for b.Loop() {
					if out, err = c.Encode(out[:0], in.Data, bind); err != nil || len(out) == 0 {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(out)), "bytes_out")
			})
			b.Run(spec+"/"+in.Name+"/decompress", func(b *testing.B) {
				b.SetBytes(int64(len(in.Data)))
				b.ReportAllocs()
				var out []byte
				for b.Loop() {
					if out, err = c.Decode(out[:0], enc, c.Params(), bind, len(in.Data)); err != nil || len(out) != len(in.Data) {
						b.Fatal(err)
					}
				}
				if !bytes.Equal(out, in.Data) {
					b.Fatal("round trip differs")
				}
				b.ReportMetric(float64(len(enc)), "bytes_out")
			})
		}
	}
}
