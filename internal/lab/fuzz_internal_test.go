package lab

import (
	"bytes"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// FuzzParseBitRate: whatever ParseBitRate accepts is a rate in [0, 1e12]
// bit/s, and a rate FormatBitRate prints reads back as itself.
func FuzzParseBitRate(f *testing.F) {
	for _, s := range []string{"640k", "3Mbit/s", "100M", "56000", "1.5Gbps", "0", "", "k", "-1k", "NaN", "Inf", "1e12", "1e13", " 2 M b", "0x10p3k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseBitRate(s)
		if err != nil {
			return
		}
		if v < 0 || v > 1e12 {
			t.Fatalf("ParseBitRate(%q) = %d, outside [0, 1e12]", s, v)
		}
		if v == 0 {
			return // FormatBitRate says "unlimited"
		}
		if again, err := ParseBitRate(FormatBitRate(v)); err != nil || again != v {
			t.Fatalf("ParseBitRate(FormatBitRate(%d) = %q) = %d, %v", v, FormatBitRate(v), again, err)
		}
	})
}

// FuzzParseSizes: every size ParseSizes returns is in [1, 2³¹-1], and
// reads back as itself through FormatSize.
func FuzzParseSizes(f *testing.F) {
	for _, s := range []string{"1,64,512,1K,4K,1M", "1,64, 1K,16M", "2G", "0", "-1", "K", ",,", "", "2147483647", "2048M", "+5k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sizes, err := ParseSizes(s)
		if err != nil {
			return
		}
		if len(sizes) == 0 || len(sizes) > strings.Count(s, ",")+1 {
			t.Fatalf("ParseSizes(%q) = %d sizes", s, len(sizes))
		}
		for _, n := range sizes {
			if n < 1 || n > 1<<31-1 {
				t.Fatalf("ParseSizes(%q) gave %d", s, n)
			}
			if again, err := ParseSizes(FormatSize(n)); err != nil || len(again) != 1 || again[0] != n {
				t.Fatalf("ParseSizes(FormatSize(%d) = %q) = %v, %v", n, FormatSize(n), again, err)
			}
		}
	})
}

// FuzzReadResultsJSON: the results files (JSON lines) that ReadAMTTJSON
// and ReadGridJSON read never panic the readers, and what they read writes out as
// lines that read back to the same lines.
func FuzzReadResultsJSON(f *testing.F) {
	var amtt, grid bytes.Buffer
	WriteAMTTJSON(&amtt, []AMTTResult{{}})
	WriteGridJSON(&grid, []GridResult{{}})
	for _, b := range [][]byte{amtt.Bytes(), grid.Bytes(), []byte("\n\n{}\n"), []byte("{\n"), []byte("[1,2]\n"), []byte(`{"Peers":-1}`)} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkIdempotent(t, b, ReadAMTTJSON, WriteAMTTJSON)
		checkIdempotent(t, b, ReadGridJSON, WriteGridJSON)
	})
}

func checkIdempotent[T any](t *testing.T, b []byte, read func(io.Reader) ([]T, error), write func(io.Writer, []T) error) {
	t.Helper()
	res, err := read(bytes.NewReader(b))
	if err != nil {
		return
	}
	if n := bytes.Count(b, []byte("\n")) + 1; len(res) > n {
		t.Fatalf("%d results from %d lines", len(res), n)
	}
	var once, twice bytes.Buffer
	if err := write(&once, res); err != nil {
		t.Fatal(err)
	}
	again, err := read(bytes.NewReader(once.Bytes()))
	if err != nil || len(again) != len(res) {
		t.Fatalf("re-reading %d results: %d, %v", len(res), len(again), err)
	}
	if err := write(&twice, again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(once.Bytes(), twice.Bytes()) {
		t.Fatalf("results changed on a round trip:\n%s\n%s", once.Bytes(), twice.Bytes())
	}
}

// FuzzParseLoss: whatever ParseLoss accepts is a probability in [0,
// linkemu.MaxLoss], and what FormatLoss prints of it (four digits) reads
// back within its rounding.
func FuzzParseLoss(f *testing.F) {
	for _, s := range []string{"1%", "0.5%", "0.01", "0", "20%", "20.0001%", "0.2", "-0", "-1%", "NaN%", "Inf", "%", " 3 % ", "1e-3", "0x1p-4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseLoss(s)
		if err != nil {
			return
		}
		if !(v >= 0 && v <= linkemu.MaxLoss) {
			t.Fatalf("ParseLoss(%q) = %v, outside [0, %v]", s, v, linkemu.MaxLoss)
		}
		again, err := ParseLoss(FormatLoss(v))
		if err != nil || math.Abs(again-v) > v*1e-3 {
			t.Fatalf("ParseLoss(FormatLoss(%v) = %q) = %v, %v", v, FormatLoss(v), again, err)
		}
	})
}
