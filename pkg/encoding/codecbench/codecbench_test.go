package codecbench_test

import (
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
