package wire_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// dirtyAlloc hands out buffers full of garbage, with spare capacity, and
// remembers them.
type dirtyAlloc struct{ got [][]byte }

func (a *dirtyAlloc) alloc(n int) []byte {
	b := bytes.Repeat([]byte{0xAA}, n+7)[:n]
	a.got = append(a.got, b)
	return b
}

func (a *dirtyAlloc) owns(b []byte) bool {
	for _, g := range a.got {
		if len(b) > 0 && len(g) > 0 && &g[0] == &b[0] {
			return true
		}
	}
	return false
}

func TestDecodeWith(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 300; i++ {
		m := testutil.RandomMessage(r)
		b := mustMarshal(t, m)
		var a dirtyAlloc
		got, err := wire.DecodeWith(bytes.NewReader(b), a.alloc)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !got.Equal(m) {
			t.Fatalf("message %d: DecodeWith changed it", i)
		}
		for _, e := range got.Elements() {
			if len(e.Data) > 0 && !a.owns(e.Data) {
				t.Fatalf("message %d: element %q data not from alloc", i, e.Name)
			}
		}
	}
	// A length past the known end of input is refused before alloc is
	// asked for it.
	in := header().i16(1).raw("jxel").u8(0).u8(0).str("a").i32(1 << 20).raw("tiny").Bytes()
	var a dirtyAlloc
	if _, err := wire.DecodeWith(bytes.NewReader(in), a.alloc); !errors.Is(err, io.ErrUnexpectedEOF) || len(a.got) != 0 {
		t.Fatalf("lying length: %v, %d allocations", err, len(a.got))
	}
}

// FuzzDecodeWith: DecodeWith with a buffer source full of garbage decodes
// exactly what Decode does, and fails where it fails.
func FuzzDecodeWith(f *testing.F) {
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.bin"))
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("jxmg\x00\x00\x01\x00\x01jxel\x02\x00\x00\x01a\x00\x00\x00\x02hi"))
	f.Fuzz(func(t *testing.T, in []byte) {
		want, werr := wire.Decode(bytes.NewReader(in), wire.WithMaxMessageSize(1<<20))
		var a dirtyAlloc
		got, gerr := wire.DecodeWith(bytes.NewReader(in), a.alloc, wire.WithMaxMessageSize(1<<20))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("Decode: %v; DecodeWith: %v", werr, gerr)
		}
		if werr == nil && !got.Equal(want) {
			t.Fatal("DecodeWith decoded another message")
		}
		// From memory: the same verdict as the reader, less what the
		// reader leaves unread (an exact fit is required).
		r := bytes.NewReader(in)
		rm, rerr := wire.Decode(r, wire.WithMaxMessageSize(1<<20))
		if rerr == nil && r.Len() != 0 {
			rerr = wire.ErrTrailingData
		}
		var b dirtyAlloc
		mm, merr := wire.UnmarshalWith(in, b.alloc, wire.WithMaxMessageSize(1<<20))
		if (rerr == nil) != (merr == nil) {
			t.Fatalf("Decode: %v; UnmarshalWith: %v", rerr, merr)
		}
		if rerr == nil && !mm.Equal(rm) {
			t.Fatal("UnmarshalWith decoded another message")
		}
		if merr != nil && rerr != nil && errors.Is(merr, wire.ErrLimit) != errors.Is(rerr, wire.ErrLimit) {
			t.Fatalf("Decode: %v; UnmarshalWith: %v", rerr, merr)
		}
	})
}
