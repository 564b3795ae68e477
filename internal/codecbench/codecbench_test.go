package codecbench_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

func TestRun(t *testing.T) {
	in := []codecbench.Input{{Name: "e1", Data: datasets.Employees(1)}, {Name: "e50", Data: datasets.Employees(50)}}
	res, err := codecbench.Run(context.Background(), codecbench.DefaultSpecs, in, codecbench.WithMinDuration(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(codecbench.DefaultSpecs)*len(in) {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.BytesIn == 0 || r.BytesOut == 0 || r.CompressBps <= 0 || r.DecompressBps <= 0 {
			t.Errorf("bad result %+v", r)
		}
		if r.Codec == "gzip:9" && r.File == "e50" && r.BytesOut > r.BytesIn/3 {
			t.Errorf("gzip:9 barely compressed: %+v", r)
		}
	}
}

func TestRunErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		specs   []string
		opts    []codecbench.Option
		wantErr error
	}{
		{"unknown codec", context.Background(), []string{"lzma"}, nil, encoding.ErrUnknownCodec},
		{"bad level", context.Background(), []string{"gzip:x"}, nil, encoding.ErrSpec},
		{"level out of range", context.Background(), []string{"zstd:99"}, nil, encoding.ErrBadOption},
		{"level on identity", context.Background(), []string{"identity:1"}, nil, encoding.ErrBadOption},
		{"level on seal", context.Background(), []string{"seal:1"}, nil, encoding.ErrBadOption},
		{"bad duration", context.Background(), []string{"s2"}, []codecbench.Option{codecbench.WithMinDuration(0)}, encoding.ErrBadOption},
		{"cancelled", ctx, []string{"s2"}, nil, context.Canceled},
		{"model on gzip", context.Background(), []string{"gzip:6@employees"}, nil, encoding.ErrBadOption},
		{"unknown model", context.Background(), []string{"xml@nothing"}, nil, encoding.ErrNoDictionary},
		{"model by unknown ID", context.Background(), []string{"zstd@7"}, nil, encoding.ErrNoDictionary},
		{"model on stdgzip", context.Background(), []string{"stdgzip@employees"}, nil, encoding.ErrSpec},
		{"xml level out of range", context.Background(), []string{"xml:9"}, nil, encoding.ErrBadOption},
		{"stdgzip level out of range", context.Background(), []string{"stdgzip:12"}, nil, encoding.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := codecbench.Run(tt.ctx, tt.specs, codecbench.EmployeeInputs()[:1], tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if tt.opts == nil && tt.ctx == context.Background() && !errors.Is(err, encoding.ErrSpec) {
				t.Fatalf("%v does not wrap encoding.ErrSpec", err)
			}
		})
	}
}

func TestCorpus(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		wantErr error
	}{
		{"employees", 7, nil},
		{"dataset", 3, nil},
		{"all", 10, nil},
		{"nothing", 0, codecbench.ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := codecbench.Corpus(tt.name)
			if !errors.Is(err, tt.wantErr) || len(in) != tt.n {
				t.Fatalf("%d inputs, %v; want %d, %v", len(in), err, tt.n, tt.wantErr)
			}
		})
	}
}

// Model specs train on records the measured documents do not start with,
// and beat their plain codecs on a one-record document.
func TestModelSpecs(t *testing.T) {
	for _, name := range codecbench.Models {
		s, err := codecbench.ModelSamples(name)
		if err != nil || len(s) != 40 {
			t.Fatalf("%s: %d samples, %v", name, len(s), err)
		}
		if bytes.Contains(s[0], datasets.Employees(1)[100:160]) {
			t.Fatalf("%s: samples hold the measured record", name)
		}
	}
	in := []codecbench.Input{{Name: "e1", Data: datasets.Employees(1)}}
	res, err := codecbench.Run(context.Background(), []string{"xml", "xml@employees", "zstd:19", "zstd:19@employees", "stdgzip:6"}, in, codecbench.WithMinDuration(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%-18s %d -> %d", r.Codec, r.BytesIn, r.BytesOut)
	}
	if res[1].BytesOut >= res[0].BytesOut || res[3].BytesOut >= res[2].BytesOut {
		t.Errorf("a model did not help: %+v", res)
	}
}

// A spec names a model by name under ModelOptions; its header records the
// model's ID, so the same spec written with the ID builds the same codec.
func TestModelOptions(t *testing.T) {
	for _, spec := range []string{"xml:2@employees", "zstd:19@dataset"} {
		s, _ := encoding.ParseSpec(spec)
		byName, err := encoding.NewCodec(s, codecbench.ModelOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		id := byName.Params().DictID
		if id == 0 || byName.Params().Level != s.Level {
			t.Fatalf("%s: params %+v", spec, byName.Params())
		}
		if got := (encoding.Header{Codec: byName.Name(), Params: byName.Params()}).Spec(); got.Model == s.Model || got.Name != s.Name {
			t.Fatalf("%s: header spec %s", spec, got)
		}
		if _, err := encoding.NewCodec(s); !errors.Is(err, encoding.ErrBadOption) {
			t.Fatalf("%s without ModelOptions: %v", spec, err)
		}
	}
}
