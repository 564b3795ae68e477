// Package codectest is the conformance suite every codec of p2pmsg's
// encoding layer runs: round trips on random bytes, on the employees
// documents and on empty input, max-size enforcement, bombs, and truncated
// or corrupt input. It builds on pkg/encoding and internal/datasets.
package codectest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Binding is the binding the suite encodes and decodes under.
var Binding = encoding.Binding{Namespace: "ns", Name: "doc", PipeID: "pipe", Header: []byte("hdr")}

// Inputs returns the suite's inputs: empty, one byte, random bytes and the
// seven employees documents.
func Inputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := make([]byte, 100_000)
	for i := range rnd {
		rnd[i] = byte(rng.Uint32())
	}
	in := map[string][]byte{"empty": {}, "one": {'x'}, "random": rnd, "zeros": make([]byte, 1<<20)}
	for _, d := range datasets.EmployeeDocs() {
		in[d.Name] = d.Data
	}
	return in
}

// Run runs the suite on c.
func Run(t *testing.T, c encoding.Codec) {
	t.Helper()
	for name, src := range Inputs() {
		t.Run("roundtrip/"+name, func(t *testing.T) {
			prefix := []byte("prefix")
			enc, err := c.Encode(bytes.Clone(prefix), src, Binding)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatal("Encode did not append to dst")
			}
			dec, err := c.Decode(bytes.Clone(prefix), enc[len(prefix):], c.Params(), Binding, len(src))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dec[len(prefix):], src) || !bytes.HasPrefix(dec, prefix) {
				t.Fatalf("round trip differs: %d bytes in, %d out", len(src), len(dec)-len(prefix))
			}
			if len(src) > 0 {
				_, err := c.Decode(nil, enc[len(prefix):], c.Params(), Binding, len(src)-1)
				if !errors.Is(err, encoding.ErrTooLarge) {
					t.Fatalf("decode with max %d of %d bytes: %v, want ErrTooLarge", len(src)-1, len(src), err)
				}
			}
		})
	}
	t.Run("bomb", func(t *testing.T) {
		src := make([]byte, 8<<20)
		enc, err := c.Encode(nil, src, Binding)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err = c.Decode(nil, enc, c.Params(), Binding, 4096)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, encoding.ErrTooLarge) {
			t.Fatalf("bomb: %v, want ErrTooLarge", err)
		}
		// Bounded memory: far less than the 8 MiB the bomb holds.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
			t.Errorf("refusing an 8 MiB bomb at 4 KiB allocated %d bytes", alloc)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		src := datasets.Employees(50)
		enc, err := c.Encode(nil, src, Binding)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]byte{enc[:len(enc)/2], enc[:len(enc)-1], flip(enc, len(enc)/2), append(bytes.Clone(enc), 0)} {
			dec, err := c.Decode(nil, bad, c.Params(), Binding, len(src))
			if err == nil && bytes.Equal(dec, src) && !bytes.Equal(bad, enc) {
				continue // some codecs (identity) cannot detect it; then output must differ or be right
			}
			if err != nil && !errors.Is(err, encoding.ErrCorrupt) && !errors.Is(err, encoding.ErrTooLarge) && !errors.Is(err, encoding.ErrAuth) {
				t.Errorf("corrupt input: %v does not wrap ErrCorrupt/ErrAuth/ErrTooLarge", err)
			}
		}
	})
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x55
	return b
}

// decodeErrors are the sentinels a codec's Decode reports, as the
// encoding layer's Decoder expects them (encoding.Codec).
var decodeErrors = []error{encoding.ErrCorrupt, encoding.ErrAuth, encoding.ErrTooLarge, encoding.ErrReplay,
	encoding.ErrNoKey, encoding.ErrNoDictionary, encoding.ErrUnbound}

// Fuzz seeds f with encodings of the suite's inputs and checks that Decode
// never panics, fails only with an error wrapping one of encoding's
// sentinels, appends to dst, never returns more than its limit, and that
// whatever decodes re-encodes and decodes to the same bytes.
func Fuzz(f *testing.F, c encoding.Codec) { FuzzRoom(f, c, nil) }

// FuzzRoom is Fuzz for a codec documented to make room at first for
// more than its input bounds: room(src, max) is the most it may make for
// src under limit max, which a decode may allocate beside what Fuzz
// allows for its input and output. A nil room is Fuzz.
func FuzzRoom(f *testing.F, c encoding.Codec, room func(src []byte, max int) int) {
	for name, src := range Inputs() {
		if len(src) > 20000 {
			continue
		}
		_ = name
		enc, err := c.Encode(nil, src, Binding)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte{})
	// The limit is above what the inputs decode to, so that a codec that
	// makes room for what a header claims rather than what its input
	// holds shows in what a small input that decodes allocates.
	const max = 1 << 20
	// A first decode builds what a codec keeps between decodes (its
	// decoders, their tables), which the bound below does not count.
	if enc, err := c.Encode(nil, []byte("warm up"), Binding); err == nil {
		c.Decode(nil, enc, c.Params(), Binding, max)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		prefix := []byte("prefix")
		var dec []byte
		var err error
		alloc := testutil.Allocated(func() {
			dec, err = c.Decode(bytes.Clone(prefix), data, c.Params(), Binding, max)
		})
		// What the encoding layer documents (docs/hostile-peers.md): a
		// codec makes room only for what its input can hold, at first at
		// most 64 KiB plus 16 times the payload, growing as output
		// appears; so a decode costs a multiple of its input and its
		// output (or, failing, its limit), never what a header or a
		// window size claims.
		out := max
		if err == nil {
			out = len(dec)
		}
		bound := decodeAllocBound(len(data), out)
		if room != nil {
			bound += uint64(room(data, max))
		}
		if alloc > bound {
			t.Fatalf("decoding %d bytes (%d out, %v; limit %d) allocated %d bytes, over %d", len(data), out, err, max, alloc, bound)
		}
		if err != nil {
			for _, s := range decodeErrors {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v wraps none of encoding's sentinels", err)
		}
		if !bytes.HasPrefix(dec, prefix) {
			t.Fatal("Decode did not append to dst")
		}
		dec = dec[len(prefix):]
		if len(dec) > max {
			t.Fatalf("decoded %d bytes, limit %d", len(dec), max)
		}
		enc, err := c.Encode(nil, dec, Binding)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Decode(nil, enc, c.Params(), Binding, len(dec))
		if err != nil || !bytes.Equal(again, dec) {
			t.Fatalf("re-encoded round trip failed: %v", err)
		}
	})
}

// decodeAllocBound is the most Fuzz lets a decode of n bytes to out
// bytes allocate: 64 KiB plus 16 times its input to start, four times
// its output for output grown by doubling and what a codec decodes
// through (a nested layer, a checksum's copy), and 256 KiB for a
// decode's fixed costs (a decoder's state reset, an error's text).
func decodeAllocBound(n, out int) uint64 {
	return uint64(64<<10 + 16*n + 4*out + 256<<10)
}
