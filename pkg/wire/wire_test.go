package wire_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

func mustMarshal(t testing.TB, m *message.Message) []byte {
	t.Helper()
	b, err := wire.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		m := testutil.RandomMessage(r)
		b := mustMarshal(t, m)
		if n, err := wire.Size(m); err != nil || n != int64(len(b)) {
			t.Fatalf("Size = %d, %v; Marshal wrote %d", n, err, len(b))
		}
		got, err := wire.Unmarshal(b)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !got.Equal(m) {
			t.Fatalf("message %d: round trip changed it", i)
		}
		var buf bytes.Buffer
		if err := wire.Encode(&buf, m); err != nil || !bytes.Equal(buf.Bytes(), b) {
			t.Fatalf("message %d: Encode differs from Marshal (%v)", i, err)
		}
	}
}

func TestDecoderStream(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var stream bytes.Buffer
	enc := wire.NewEncoder(&stream)
	var sent []*message.Message
	for i := 0; i < 100; i++ {
		m := testutil.RandomMessage(r)
		if m.Len() == 0 { // an empty message means "until EOF": only last
			m.Add(message.Text("", "n", "x"))
		}
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
	}
	// iotest-style one-byte reads prove no field straddling bug.
	dec, err := wire.NewDecoder(oneByteReader{&stream})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range sent {
		got, err := dec.Decode()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !got.Equal(want) {
			t.Fatalf("message %d differs", i)
		}
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Fatalf("after last message: %v, want io.EOF", err)
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// TestDecodeLeavesRest shows Decode stops at the message's last byte.
func TestDecodeLeavesRest(t *testing.T) {
	b := mustMarshal(t, message.New(message.Text("", "a", "b")))
	r := bufio.NewReader(bytes.NewReader(append(b, "rest"...)))
	if _, err := wire.Decode(r); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "rest" {
		t.Fatalf("left %q", rest)
	}
	if _, err := wire.Unmarshal(append(b, 0)); !errors.Is(err, wire.ErrTrailingData) {
		t.Fatalf("Unmarshal with trailing byte: %v", err)
	}
}

// build assembles raw wire bytes for malformed-input tests.
type build struct{ bytes.Buffer }

func (b *build) str(s string) *build {
	binary.Write(b, binary.BigEndian, int16(len(s)))
	b.WriteString(s)
	return b
}
func (b *build) i16(v int) *build    { binary.Write(b, binary.BigEndian, int16(v)); return b }
func (b *build) i32(v int) *build    { binary.Write(b, binary.BigEndian, int32(v)); return b }
func (b *build) raw(s string) *build { b.WriteString(s); return b }
func (b *build) u8(v byte) *build    { b.WriteByte(v); return b }

func header(ns ...string) *build {
	b := &build{}
	b.raw("jxmg").u8(0).i16(len(ns))
	for _, n := range ns {
		b.str(n)
	}
	return b
}

func TestDecodeErrors(t *testing.T) {
	valid := mustMarshal(t, message.New(message.Text("ns", "name", "value")))
	tests := []struct {
		name    string
		in      []byte
		opts    []wire.Option
		wantErr error
	}{
		{"empty input", nil, nil, io.EOF},
		{"bad magic", []byte("jxmx\x00\x00\x00\x00\x00"), nil, wire.ErrMalformed},
		{"version 1", header().Bytes()[:4:4], nil, io.ErrUnexpectedEOF},
		{"unsupported version", append([]byte("jxmg\x01"), 0, 0, 0, 0), nil, wire.ErrVersion},
		{"negative namespace count", header().Bytes()[:5], nil, io.ErrUnexpectedEOF},
		{"too many namespaces", (&build{}).raw("jxmg").u8(0).i16(254).Bytes(), nil, wire.ErrMalformed},
		{"namespace limit", header("a", "b").i16(0).Bytes(), []wire.Option{wire.WithMaxNamespaces(1)}, wire.ErrLimit},
		{"negative string length", (&build{}).raw("jxmg").u8(0).i16(1).i16(-5).Bytes(), nil, wire.ErrMalformed},
		{"lying namespace length", (&build{}).raw("jxmg").u8(0).i16(1).i16(30000).raw("abc").Bytes(), nil, io.ErrUnexpectedEOF},
		{"invalid UTF-8 name", header().i16(1).raw("jxel").u8(0).u8(0).str("\xff\xfe").i32(0).Bytes(), nil, wire.ErrMalformed},
		{"negative element count", header().i16(-1).Bytes(), nil, wire.ErrMalformed},
		{"element limit", header().i16(3).Bytes(), []wire.Option{wire.WithMaxElements(2)}, wire.ErrLimit},
		{"count lies (too few elements)", header().i16(2).raw("jxel").u8(0).u8(0).str("a").i32(0).Bytes(), nil, io.ErrUnexpectedEOF},
		{"bad element magic", header().i16(1).raw("jxeX").Bytes(), nil, wire.ErrMalformed},
		{"undefined namespace", header().i16(1).raw("jxel").u8(2).u8(0).str("a").i32(0).Bytes(), nil, wire.ErrMalformed},
		{"invalid MIME", header().i16(1).raw("jxel").u8(0).u8(1).str("a").str("nonsense").i32(0).Bytes(), nil, wire.ErrMalformed},
		{"MIME too long", header().i16(1).raw("jxel").u8(0).u8(1).str("a").str("a/" + string(bytes.Repeat([]byte("b"), 2000))).i32(0).Bytes(), nil, wire.ErrLimit},
		{"negative data length", header().i16(1).raw("jxel").u8(0).u8(0).str("a").i32(-1).Bytes(), nil, wire.ErrMalformed},
		{"lying data length", header().i16(1).raw("jxel").u8(0).u8(0).str("a").i32(60 << 20).raw("short").Bytes(), nil, io.ErrUnexpectedEOF},
		{"element over limit", header().i16(1).raw("jxel").u8(0).u8(0).str("a").i32(100).Bytes(), []wire.Option{wire.WithMaxElementSize(99)}, wire.ErrLimit},
		{"message over limit", valid, []wire.Option{wire.WithMaxMessageSize(int64(len(valid) - 1))}, wire.ErrLimit},
		{"name over limit", valid, []wire.Option{wire.WithMaxNameLen(3)}, wire.ErrLimit},
		{"signature depth", header().i16(1).raw("jxel").u8(0).u8(4).str("a").i32(0).raw("jxel").u8(0).u8(4).str("s").i32(0).Bytes(), []wire.Option{wire.WithMaxSignatureDepth(1)}, wire.ErrLimit},
		{"truncated signature", header().i16(1).raw("jxel").u8(0).u8(4).str("a").i32(0).Bytes(), nil, io.ErrUnexpectedEOF},
		{"trailing garbage", append(valid, 'x'), nil, wire.ErrTrailingData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.Unmarshal(tt.in, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			var we *wire.Error
			if tt.wantErr != io.EOF && !errors.As(err, &we) {
				t.Fatalf("error %T is not a *wire.Error", err)
			}
			// The same bytes through an unsized reader fail the same way.
			_, err2 := wire.Decode(io.MultiReader(bytes.NewReader(tt.in)), tt.opts...)
			if tt.wantErr != wire.ErrTrailingData && !errors.Is(err2, tt.wantErr) {
				t.Fatalf("streaming: error %v, want %v", err2, tt.wantErr)
			}
		})
	}
}

// TestTruncations decodes every prefix and every single-byte mutation of a
// valid message: errors only, never a panic.
func TestTruncationsAndMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m := testutil.ManyNamespaces(5)
	m.Add(message.Element{Name: "s", MIME: "text/plain", Data: []byte("abc"), Signature: &message.Element{Name: "sig", Data: []byte{1}}})
	b := mustMarshal(t, m)
	for i := 0; i < len(b); i++ {
		if _, err := wire.Unmarshal(b[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
	for i := 0; i < 2000; i++ {
		c := bytes.Clone(b)
		c[r.IntN(len(c))] = byte(r.Uint32())
		wire.Unmarshal(c) // must not panic
	}
}

// TestLyingLengthMemory: a stream announcing a 60 MiB element and then
// ending costs far less than 60 MiB.
func TestLyingLengthMemory(t *testing.T) {
	in := header().i16(1).raw("jxel").u8(0).u8(0).str("a").i32(60 << 20).raw("tiny").Bytes()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := wire.Decode(io.MultiReader(bytes.NewReader(in))) // size unknown to the decoder
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("allocated %d bytes for a lying length", grew)
	}
}

func TestEncodeErrors(t *testing.T) {
	long := string(bytes.Repeat([]byte("n"), wire.MaxStringLen+1))
	tests := []struct {
		name string
		m    *message.Message
	}{
		{"name too long", message.New(message.Bytes("", long, nil))},
		{"namespace too long", message.New(message.Bytes(long, "a", nil))},
		{"invalid UTF-8 name", message.New(message.Bytes("", "\xff", nil))},
		{"invalid MIME", message.New(message.Element{Name: "a", MIME: "nonsense"})},
		{"too many namespaces", testutil.ManyNamespaces(wire.MaxNamespaces + 1)},
		{"too many elements", message.New(make([]message.Element, wire.MaxElements+1)...)},
		{"nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := wire.Marshal(tt.m); !errors.Is(err, wire.ErrUnencodable) {
				t.Fatalf("Marshal: %v, want ErrUnencodable", err)
			}
			if err := wire.Encode(io.Discard, tt.m); !errors.Is(err, wire.ErrUnencodable) {
				t.Fatalf("Encode: %v, want ErrUnencodable", err)
			}
			if _, err := wire.Size(tt.m); !errors.Is(err, wire.ErrUnencodable) {
				t.Fatalf("Size: %v, want ErrUnencodable", err)
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []wire.Option{
		wire.WithMaxMessageSize(0), wire.WithMaxElementSize(-1), wire.WithMaxElements(wire.MaxElements + 1),
		wire.WithMaxNamespaces(300), wire.WithMaxNameLen(0), wire.WithMaxMIMELen(1 << 20), wire.WithMaxSignatureDepth(65),
	} {
		if _, err := wire.NewDecoder(bytes.NewReader(nil), o); !errors.Is(err, wire.ErrLimit) {
			t.Errorf("bad option accepted: %v", err)
		}
	}
}

func TestSmallMessageAllocs(t *testing.T) {
	b := mustMarshal(t, message.New(message.Bytes("", "payload", []byte("x"))))
	r := bytes.NewReader(b)
	allocs := testing.AllocsPerRun(200, func() {
		r.Reset(b)
		if _, err := wire.Decode(r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Errorf("decode of a 1-byte message: %.1f allocations, want <= 5", allocs)
	}
	m := message.New(message.Bytes("", "payload", []byte("x")))
	buf := make([]byte, 0, 256)
	allocs = testing.AllocsPerRun(200, func() {
		if _, err := wire.Append(buf[:0], m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("encode of a 1-byte message: %.1f allocations, want <= 1", allocs)
	}
}

// TestEmptyMessageAtExactLimit: an element-less message ("until end of
// input") that fills the size limit exactly decodes; one more byte is over.
func TestEmptyMessageAtExactLimit(t *testing.T) {
	b := mustMarshal(t, message.New())
	if m, err := wire.Decode(&io.LimitedReader{R: bytes.NewReader(b), N: int64(len(b))}, wire.WithMaxMessageSize(int64(len(b)))); err != nil || m.Len() != 0 {
		t.Fatalf("Decode = %v, %v", m, err)
	}
	if _, err := wire.Decode(bytes.NewReader(append(b, 'j')), wire.WithMaxMessageSize(int64(len(b)))); !errors.Is(err, wire.ErrLimit) {
		t.Fatalf("one byte over: %v", err)
	}
}

// TestDecodeReaderFails: a reader that fails (a stream reset, a deadline)
// is not a malformed message: Decode's error wraps the reader's, says
// where, and matches no sentinel of the format. It said "malformed
// message at byte 0 (signature): stream reset", and matched ErrMalformed.
func TestDecodeReaderFails(t *testing.T) {
	cause := errors.New("stream reset")
	for _, n := range []int{0, 10} { // before the signature, and within the message
		enc, err := wire.Marshal(message.New(message.Text("ns", "text", "hello")))
		if err != nil {
			t.Fatal(err)
		}
		r := io.MultiReader(bytes.NewReader(enc[:n]), iotest.ErrReader(cause))
		_, err = wire.Decode(r)
		if !errors.Is(err, cause) || errors.Is(err, wire.ErrMalformed) || errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("after %d bytes: %v; want the reader's error, not malformed", n, err)
		}
	}
}

// TestSignatureInOtherNamespaceRefused: a signature whose namespace is
// not its element's is refused, not written under its element's (as the
// format writes signatures), which changed the message in silence
// (FuzzParseJSONMessage in internal/cli: a signature in namespace "0"
// under an element in "" decoded in "").
func TestSignatureInOtherNamespaceRefused(t *testing.T) {
	sig := func(ns string) *message.Message {
		return message.New(message.Element{Namespace: "jxta", Name: "doc", Data: []byte("x"),
			Signature: &message.Element{Namespace: ns, Name: "sig", Data: []byte{1}}})
	}
	if _, err := wire.Marshal(sig("other")); !errors.Is(err, wire.ErrUnencodable) {
		t.Fatalf("signature in another namespace: %v, want ErrUnencodable", err)
	}
	if _, err := wire.Marshal(sig("")); !errors.Is(err, wire.ErrUnencodable) {
		t.Fatalf("signature in no namespace under jxta: %v, want ErrUnencodable", err)
	}
	b, err := wire.Marshal(sig("jxta"))
	if err != nil {
		t.Fatal(err)
	}
	if back, err := wire.Unmarshal(b); err != nil || !back.Equal(sig("jxta")) {
		t.Fatalf("signature in its element's namespace: %v", err)
	}
}
