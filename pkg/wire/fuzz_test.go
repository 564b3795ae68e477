package wire_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// FuzzDecode feeds arbitrary bytes to the decoder, seeded with JXSE-written
// messages (testdata/golden). Whatever decodes must re-encode and decode to
// an equal message; nothing may panic, and a small limit keeps memory small.
func FuzzDecode(f *testing.F) {
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.bin"))
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("jxmg\x00\x00\x00\x00\x00"))
	f.Add([]byte("jxmg\x00\x00\x01\x00\x01jxel\x02\x00\x00\x01a\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var m *message.Message
		var err error
		alloc := testutil.Allocated(func() { m, err = wire.Unmarshal(in, wire.WithMaxMessageSize(1<<20)) })
		// From memory, no length is believed past the input's end: a
		// message costs a multiple of its bytes (an element's fields and
		// strings for its few bytes of header), whatever it claims.
		if bound := uint64(64<<10 + 64*len(in)); alloc > bound {
			t.Fatalf("unmarshalling %d bytes allocated %d, over %d", len(in), alloc, bound)
		}
		if err != nil {
			return
		}
		enc, err := wire.Marshal(m)
		if err != nil {
			// Decoding accepts what JXSE reads; encoding refuses a few
			// things it would write differently (none known): report.
			t.Fatalf("decoded message does not re-encode: %v", err)
		}
		m2, err := wire.Unmarshal(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !m2.Equal(m) {
			t.Fatal("re-encoding changed the message")
		}
		// Canonical bytes are a fixed point.
		enc2, _ := wire.Marshal(m2)
		if !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzCanonicalMIME checks the MIME canonicalizer never panics and is
// idempotent.
func FuzzCanonicalMIME(f *testing.F) {
	for _, s := range []string{"text/plain", "Text/Plain; Charset=\"UTF-8\"", "a/b (c) ;x=\"\\\"\"", "a/b;x=", "foo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := message.CanonicalMIME(s)
		if err != nil {
			return
		}
		c2, err := message.CanonicalMIME(c)
		if err != nil || c2 != c {
			t.Fatalf("canonical form %q of %q is not a fixed point: %q, %v", c, s, c2, err)
		}
	})
}

// FuzzUnmarshaler decodes the input, cut in two at a place the fuzzer
// picks, message after message with one Unmarshaler, as a stream's
// reader does (input a, b, a, b): each must decode as UnmarshalElements
// decodes it alone, the state an Unmarshaler keeps between messages
// changing nothing.
func FuzzUnmarshaler(f *testing.F) {
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.bin"))
	var prev []byte
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(slices.Clone(prev), b...), uint16(len(prev)))
		prev = b
	}
	f.Add([]byte("jxmg\x00\x00\x01\x00\x01jxel\x02\x00\x00\x01a\x00\x00\x00\x00jxmg\x00\x00\x00\x00\x00"), uint16(22))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		at := min(int(cut), len(in))
		u, err := wire.NewUnmarshaler(wire.WithMaxMessageSize(1 << 20))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{in[:at], in[at:], in[:at], in[at:]} {
			want, wantErr := wire.UnmarshalElements(nil, b, nil, wire.WithMaxMessageSize(1<<20))
			got, err := u.UnmarshalElements(nil, b, nil)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("the Unmarshaler says %v, UnmarshalElements %v", err, wantErr)
			}
			if err == nil && !message.FromElements(got).Equal(message.FromElements(want)) {
				t.Fatal("the Unmarshaler decoded another message than UnmarshalElements")
			}
		}
	})
}
