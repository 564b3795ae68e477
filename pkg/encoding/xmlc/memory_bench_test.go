package xmlc_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// heapAfter returns the live heap after collecting twice (the second
// empties sync.Pools, whose scratch no codec keeps).
func heapAfter() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkReceiverModels measures what a receiver holding n xml models
// costs: building its codec (a fresh model each time, as a process
// builds them once) and decoding both corpora's documents once per model,
// then what stays live with the codec kept (live-B/model: the decoders'
// buffers, not the documents). B/op is the build and decodes together.
func BenchmarkReceiverModels(b *testing.B) {
	in, err := codecbench.Corpus("all")
	if err != nil {
		b.Fatal(err)
	}
	var samples [][]byte
	for _, name := range codecbench.Models {
		s, err := codecbench.ModelSamples(name)
		if err != nil {
			b.Fatal(err)
		}
		samples = append(samples, s...)
	}
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			// Frames encoded with each model, by a sender of its own.
			frames := make([][][]byte, n)
			params := make([]encoding.Params, n)
			models := make([]*xmlc.Model, n)
			build := func() {
				for i := range n {
					m, err := xmlc.NewModel(uint32(0x100+i), samples...)
					if err != nil {
						b.Fatal(err)
					}
					models[i] = m
				}
			}
			build()
			for i, m := range models {
				snd, err := xmlc.New(xmlc.WithEncoderModel(m))
				if err != nil {
					b.Fatal(err)
				}
				frames[i], params[i] = nil, snd.Params()
				for _, d := range in {
					f, err := snd.Encode(nil, d.Data, encoding.Binding{})
					if err != nil {
						b.Fatal(err)
					}
					frames[i] = append(frames[i], f)
				}
			}
			b.ReportAllocs()
			var live int64
			for b.Loop() {
				b.StopTimer()
				build() // the same models, afresh: nothing of the last round shared
				before := heapAfter()
				b.StartTimer()
				c, err := xmlc.New(xmlc.WithModels(models...))
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					for _, f := range frames[i] {
						if _, err := c.Decode(nil, f, params[i], encoding.Binding{}, 64<<20); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				live = heapAfter() - before
				runtime.KeepAlive(c)
				b.StartTimer()
			}
			b.ReportMetric(float64(live)/float64(n), "live-B/model")
		})
	}
}

// BenchmarkFirstEncodeModel measures what a sender priming with a model
// allocates until it has encoded one document: a one-record document (up
// to smallInput, for which Encode also tries plain zstd at the best level:
// those tables are 34 MB) and a whole corpus document (the XML coding
// alone). The model's own encoder is the better level's tables (4 MB),
// klauspost's copy of them primed with the dictionary (4 MB) and history.
func BenchmarkFirstEncodeModel(b *testing.B) {
	samples, err := codecbench.ModelSamples("employees")
	if err != nil {
		b.Fatal(err)
	}
	m, err := xmlc.NewModel(0xE1, samples...)
	if err != nil {
		b.Fatal(err)
	}
	in, err := codecbench.Corpus("employees")
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		name string
		data []byte
	}{{"record", samples[len(samples)-1]}, {"document", in[len(in)-1].Data}} {
		b.Run(fmt.Sprintf("%s=%dB", d.name, len(d.data)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := xmlc.New(xmlc.WithEncoderModel(m))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Encode(nil, d.data, encoding.Binding{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
