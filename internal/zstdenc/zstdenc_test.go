package zstdenc_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/zstdenc"
)

// inputs are XML documents and word text at sizes around every boundary
// the encoders have: the minimum window, a block, the small window.
func inputs() [][]byte {
	words := strings.Fields("order shipment invoice customer pallet urgent delivery warehouse Anna Boris Chen Dana Emil Fatima { } : , \" 0 17 2026")
	rng := rand.New(rand.NewPCG(1, 2))
	var text []byte
	for len(text) < zstdenc.SmallWindow+2 {
		text = append(append(text, words[rng.IntN(len(words))]...), ' ')
	}
	xml := datasets.DataSet(2600)
	var in [][]byte
	for _, n := range []int{200, 1024, 1025, 4097, 64 << 10, 128<<10 + 1, zstdenc.SmallWindow - 64<<10, zstdenc.SmallWindow, zstdenc.SmallWindow + 1} {
		in = append(in, text[:n], xml[:n])
	}
	return in
}

// The encoder gives the bytes the level's own encoder gives, at every
// level, with and without a dictionary, for inputs on either side of the
// small window, encoded in turn as a sender does.
func TestSameBytesAsTheLevelsWindow(t *testing.T) {
	in := inputs()
	dict := datasets.DataSet(300)[:64<<10]
	levels := []kzstd.EncoderLevel{kzstd.SpeedFastest, kzstd.SpeedDefault, kzstd.SpeedBetterCompression, kzstd.SpeedBestCompression}
	for _, level := range levels {
		for _, withDict := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dict=%v", level, withDict), func(t *testing.T) {
				opts := []kzstd.EOption{kzstd.WithEncoderLevel(level), kzstd.WithEncoderConcurrency(1), kzstd.WithEncoderCRC(true)}
				prefix := 0
				if withDict {
					opts, prefix = append(opts, kzstd.WithEncoderDictRaw(7, dict)), len(dict)
				}
				ref, err := kzstd.NewWriter(nil, opts...)
				if err != nil {
					t.Fatal(err)
				}
				e, err := zstdenc.New(prefix, opts...)
				if err != nil {
					t.Fatal(err)
				}
				for _, src := range in {
					if got, want := e.EncodeAll(src, nil), ref.EncodeAll(src, nil); !bytes.Equal(got, want) {
						t.Fatalf("%d bytes: got %d bytes of frame, the level's window gives %d", len(src), len(got), len(want))
					}
				}
			})
		}
	}
}

// Once an input needs the level's encoder, every input goes to it (with
// the same bytes) and the small encoder is let go.
func TestLargeInputRetiresTheSmallEncoder(t *testing.T) {
	opts := []kzstd.EOption{kzstd.WithEncoderLevel(kzstd.SpeedBetterCompression), kzstd.WithEncoderConcurrency(1)}
	ref, err := kzstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := zstdenc.New(0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	small, large := datasets.DataSet(40), datasets.DataSet(2600)[:zstdenc.SmallWindow+1]
	for i, step := range []struct {
		src      []byte
		hasSmall bool
	}{{small, true}, {large, false}, {small, false}} {
		if got, want := e.EncodeAll(step.src, nil), ref.EncodeAll(step.src, nil); !bytes.Equal(got, want) {
			t.Fatalf("step %d: not the bytes of the level's encoder", i)
		}
		if e.HasSmall() != step.hasSmall {
			t.Fatalf("step %d (%d bytes): small encoder in use %v, want %v", i, len(step.src), e.HasSmall(), step.hasSmall)
		}
	}
}
