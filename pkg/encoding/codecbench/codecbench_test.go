package codecbench_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/codecbench"
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
		{"unknown codec", context.Background(), []string{"lzma"}, nil, codecbench.ErrBadSpec},
		{"bad level", context.Background(), []string{"gzip:x"}, nil, codecbench.ErrBadSpec},
		{"level out of range", context.Background(), []string{"zstd:99"}, nil, encoding.ErrBadOption},
		{"level on identity", context.Background(), []string{"identity:1"}, nil, codecbench.ErrBadSpec},
		{"bad duration", context.Background(), []string{"s2"}, []codecbench.Option{codecbench.WithMinDuration(0)}, codecbench.ErrBadSpec},
		{"cancelled", ctx, []string{"s2"}, nil, context.Canceled},
		{"model on gzip", context.Background(), []string{"gzip:6@employees"}, nil, codecbench.ErrBadSpec},
		{"unknown model", context.Background(), []string{"xml@nothing"}, nil, codecbench.ErrBadSpec},
		{"xml level out of range", context.Background(), []string{"xml:9"}, nil, encoding.ErrBadOption},
		{"stdgzip level out of range", context.Background(), []string{"stdgzip:12"}, nil, encoding.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := codecbench.Run(tt.ctx, tt.specs, codecbench.EmployeeInputs()[:1], tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
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
		{"nothing", 0, codecbench.ErrBadSpec},
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
