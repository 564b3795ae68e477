// Package codecbench measures p2pmsg's codecs side by side, in one process
// and one thread: size out, compress and decompress throughput. It is the
// engine behind `p2pmsg lab codecs` and the codec benchmarks, and builds on
// pkg/encoding, its codec subpackages and internal/datasets (both corpora: the
// employees documents and the SOAP/DataSet query results).
package codecbench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	// The codecs Run measures register their factories.
	_ "github.com/p2pmsg/p2pmsg/internal/identitycodec"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/deflate"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
)

// ErrUnknown reports a corpus or model name codecbench does not know.
var ErrUnknown = errors.New("codecbench: unknown corpus or model")

// DefaultSpecs are the codecs and levels measured when none are given.
var DefaultSpecs = []string{
	"identity", "gzip:1", "gzip:6", "gzip:9", "deflate:6",
	"zstd:1", "zstd:3", "zstd:9", "zstd:19", "s2:1", "s2:2", "s2:3", "seal",
	"stdgzip:6", "xml",
}

// newCodec returns the codec a spec names (encoding.ParseSpec): a
// registered codec, built as encoding.NewCodec builds it with ModelOptions,
// or stdgzip (Go's compress/gzip, a reference, not a registered codec;
// level 6 by default). seal is measured with a random key of its own, which
// is why this is not exported: a sealing codec must be built with the
// caller's keys (seal.Factory), and Run needs one only to time it.
func newCodec(spec string, models *encoding.Models) (encoding.Codec, error) {
	s, err := encoding.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	switch s.Name {
	case StdGzipName:
		if s.Model != "" {
			return nil, fmt.Errorf("%w %q: %s takes no model", encoding.ErrSpec, spec, StdGzipName)
		}
		level := cmp.Or(s.Level, 6)
		c, err := newStdGzip(level)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", encoding.ErrSpec, spec, err)
		}
		return c, nil
	case seal.Name:
		key := make([]byte, seal.KeySize)
		rand.Read(key)
		// Run decodes one element again and again.
		f := seal.Factory(seal.WithPSK("codecbench", key), seal.WithoutReplayProtection())
		return encoding.NewCodec(s, encoding.WithFactory(seal.Name, f))
	}
	if _, byID := s.DictID(); byID && models != nil {
		return encoding.NewCodec(s, models.BuildOptions()...)
	}
	return encoding.NewCodec(s, ModelOptions()...)
}

// Input is a named document to measure.
type Input struct {
	Name string
	Data []byte
}

// EmployeeInputs returns the seven employees documents.
func EmployeeInputs() []Input {
	var in []Input
	for _, d := range datasets.EmployeeDocs() {
		in = append(in, Input{Name: d.Name, Data: d.Data})
	}
	return in
}

// Result is one codec's figures on one input. Its JSON form is the line
// `p2pmsg lab codecs --json` prints.
type Result struct {
	Codec         string  `json:"codec"`
	File          string  `json:"file"`
	BytesIn       int     `json:"bytes_in"`
	BytesOut      int     `json:"bytes_out"`
	CompressBps   float64 `json:"compress_Bps"`
	DecompressBps float64 `json:"decompress_Bps"`
}

// Option configures Run.
type Option func(*config) error

type config struct {
	minDur time.Duration
	models *encoding.Models
}

// WithModels measures the specs that name a model by ID (xml@7,
// zstd:19@9) with the models m holds. Default: none, and only the named
// Models are known.
func WithModels(m *encoding.Models) Option {
	return func(c *config) error {
		if m == nil {
			return fmt.Errorf("%w: nil models", encoding.ErrBadOption)
		}
		c.models = m
		return nil
	}
}

// WithMinDuration sets how long each compress and each decompress
// measurement runs at least, 1 ms to 1 min. Default: 100 ms.
func WithMinDuration(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > time.Minute {
			return fmt.Errorf("%w: min duration %v", encoding.ErrBadOption, d)
		}
		c.minDur = d
		return nil
	}
}

// Run measures each codec spec on each input, in that order, in the
// calling goroutine locked to its thread. A spec is any that
// encoding.NewCodec builds with ModelOptions, stdgzip, or seal (with a
// random key); a bad one fails with an error wrapping encoding.ErrSpec
// before anything is measured. Every decode is checked against its input.
// It stops early with ctx's error if ctx is done.
func Run(ctx context.Context, specs []string, inputs []Input, opts ...Option) ([]Result, error) {
	cfg := config{minDur: 100 * time.Millisecond}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	codecs := make([]encoding.Codec, len(specs))
	for i, s := range specs {
		c, err := newCodec(s, cfg.models)
		if err != nil {
			return nil, err
		}
		codecs[i] = c
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := encoding.Binding{Namespace: "lab", Name: "codecs", PipeID: "lab"}
	var out []Result
	for i, c := range codecs {
		for _, in := range inputs {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			var enc []byte
			cBps, err := measure(ctx, cfg.minDur, len(in.Data), func() error {
				var err error
				enc, err = c.Encode(enc[:0], in.Data, b)
				return err
			})
			if err != nil {
				return out, fmt.Errorf("%s on %s: encode: %w", specs[i], in.Name, err)
			}
			enc = bytes.Clone(enc)
			var dec []byte
			dBps, err := measure(ctx, cfg.minDur, len(in.Data), func() error {
				var err error
				if dec, err = c.Decode(dec[:0], enc, c.Params(), b, len(in.Data)); err != nil {
					return err
				}
				if len(dec) != len(in.Data) {
					return fmt.Errorf("decoded %d bytes, want %d", len(dec), len(in.Data))
				}
				return nil
			})
			if err == nil && !bytes.Equal(dec, in.Data) {
				err = errors.New("round trip differs")
			}
			if err != nil {
				return out, fmt.Errorf("%s on %s: decode: %w", specs[i], in.Name, err)
			}
			out = append(out, Result{Codec: specs[i], File: in.Name, BytesIn: len(in.Data), BytesOut: len(enc), CompressBps: cBps, DecompressBps: dBps})
		}
	}
	return out, nil
}

// measure runs f in growing batches until a batch lasts minDur and
// returns bytes per second.
func measure(ctx context.Context, minDur time.Duration, size int, f func() error) (float64, error) {
	if err := f(); err != nil { // warm up, and fail fast
		return 0, err
	}
	for n := 1; ; n *= 2 {
		start := time.Now()
		for range n {
			if err := f(); err != nil {
				return 0, err
			}
		}
		if d := time.Since(start); d >= minDur || n >= 1<<30 {
			return float64(size) * float64(n) / d.Seconds(), nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}
