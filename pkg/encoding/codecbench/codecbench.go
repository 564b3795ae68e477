// Package codecbench measures p2pmsg's codecs side by side, in one process
// and one thread: size out, compress and decompress throughput. It is the
// engine behind `p2pmsg lab codecs` and the codec benchmarks, and builds on
// pkg/encoding, its codec subpackages and pkg/datasets (both corpora: the
// employees documents and the SOAP/DataSet query results).
package codecbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/deflate"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/identity"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
)

// ErrBadSpec reports a codec spec that names no known codec or level.
var ErrBadSpec = errors.New("codecbench: bad codec spec")

// DefaultSpecs are the codecs and levels measured when none are given.
var DefaultSpecs = []string{
	"identity", "gzip:1", "gzip:6", "gzip:9", "deflate:6",
	"zstd:1", "zstd:3", "zstd:9", "zstd:19", "s2:1", "s2:2", "s2:3", "seal",
	"stdgzip:6", "xml",
}

// NewCodec returns the codec a spec "name[:level][@model]" names:
// identity, gzip, deflate, zstd, s2, seal (XChaCha20-Poly1305 with a fixed
// benchmark key; it takes no level), xml, or stdgzip (Go's compress/gzip,
// a reference, not a registered codec). "@model" (zstd and xml only) adds
// a shared dictionary or model trained on ModelSamples(model).
func NewCodec(spec string) (encoding.Codec, error) {
	nameLevel, model, hasModel := strings.Cut(spec, "@")
	name, lv, hasLevel := strings.Cut(nameLevel, ":")
	if hasModel && name != zstd.Name && name != xmlc.Name {
		return nil, fmt.Errorf("%w: %q: only zstd and xml take a model", ErrBadSpec, spec)
	}
	level := 0
	if hasLevel {
		var err error
		if level, err = strconv.Atoi(lv); err != nil {
			return nil, fmt.Errorf("%w: %q: level: %w", ErrBadSpec, spec, err)
		}
	}
	var c encoding.Codec
	var err error
	switch name {
	case identity.Name:
		if hasLevel {
			return nil, fmt.Errorf("%w: %q: identity takes no level", ErrBadSpec, spec)
		}
		c = identity.New()
	case gzip.Name:
		var o []gzip.Option
		if hasLevel {
			o = append(o, gzip.WithLevel(level))
		}
		c, err = gzip.New(o...)
	case deflate.Name:
		var o []deflate.Option
		if hasLevel {
			o = append(o, deflate.WithLevel(level))
		}
		c, err = deflate.New(o...)
	case zstd.Name:
		var o []zstd.Option
		if hasLevel {
			o = append(o, zstd.WithLevel(level))
		}
		if hasModel {
			d, derr := newZstdDict(model)
			if derr != nil {
				return nil, fmt.Errorf("%w: %q: %w", ErrBadSpec, spec, derr)
			}
			o = append(o, zstd.WithEncoderDictionary(d))
		}
		c, err = zstd.New(o...)
	case s2.Name:
		var o []s2.Option
		if hasLevel {
			o = append(o, s2.WithLevel(level))
		}
		c, err = s2.New(o...)
	case seal.Name:
		if hasLevel {
			return nil, fmt.Errorf("%w: %q: seal takes no level", ErrBadSpec, spec)
		}
		c, err = seal.New(seal.WithPSK("bench", bytes.Repeat([]byte{0x42}, seal.KeySize)),
			seal.WithoutReplayProtection()) // it decodes one element again and again
	case xmlc.Name:
		var o []xmlc.Option
		if hasLevel {
			o = append(o, xmlc.WithLevel(level))
		}
		if hasModel {
			m, merr := newModel(model)
			if merr != nil {
				return nil, fmt.Errorf("%w: %q: %w", ErrBadSpec, spec, merr)
			}
			o = append(o, xmlc.WithEncoderModel(m))
		}
		c, err = xmlc.New(o...)
	case StdGzipName:
		if !hasLevel {
			level = 6
		}
		c, err = newStdGzip(level)
	default:
		return nil, fmt.Errorf("%w: %q: unknown codec", ErrBadSpec, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrBadSpec, spec, err)
	}
	return c, nil
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
}

// WithMinDuration sets how long each compress and each decompress
// measurement runs at least, 1 ms to 1 min. Default: 100 ms.
func WithMinDuration(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > time.Minute {
			return fmt.Errorf("%w: min duration %v", ErrBadSpec, d)
		}
		c.minDur = d
		return nil
	}
}

// Run measures each codec spec on each input, in that order, in the
// calling goroutine locked to its thread. Every decode is checked against
// its input. It stops early with ctx's error if ctx is done.
func Run(ctx context.Context, specs []string, inputs []Input, opts ...Option) ([]Result, error) {
	cfg := config{minDur: 100 * time.Millisecond}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	codecs := make([]encoding.Codec, len(specs))
	for i, s := range specs {
		c, err := NewCodec(s)
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
				return out, fmt.Errorf("codecbench: %s on %s: encode: %w", specs[i], in.Name, err)
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
				return out, fmt.Errorf("codecbench: %s on %s: decode: %w", specs[i], in.Name, err)
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
