package encoding_test

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/identitycodec"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

func sameData(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

func mixed() *message.Message {
	var p encoding.Producer
	return message.New(
		message.Text("jxta", "small", "hello"),
		p.XML("app", "doc", datasets.Employees(100)),
		message.Text("app", "note", "keep me raw"),
		message.Element{Namespace: "app", Name: "blob", MIME: "application/json", Data: bytes.Repeat([]byte(`{"a":1}`), 500)},
		message.Bytes("", "raw", bytes.Repeat([]byte{7}, 3000)),
	)
}

func TestMixedMessageOnlySelectedChange(t *testing.T) {
	z, err := zstd.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := encoding.New([]encoding.Codec{z}, encoding.WithSelector(encoding.ByMIME("application/json")))
	if err != nil {
		t.Fatal(err)
	}
	m := mixed()
	enc, err := s.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if enc == m {
		t.Fatal("Encode returned its argument though elements were selected")
	}
	for i, e := range enc.All() {
		orig := m.At(i)
		encoded := i == 1 || i == 3
		if encoding.IsEncoded(e) != encoded {
			t.Errorf("element %d %q: encoded=%v, want %v", i, e.Name, encoding.IsEncoded(e), encoded)
		}
		if e.Namespace != orig.Namespace || e.Name != orig.Name {
			t.Errorf("element %d renamed to %q:%q", i, e.Namespace, e.Name)
		}
		if !encoded && (!sameData(e.Data, orig.Data) || e.MIME != orig.MIME) {
			t.Errorf("unselected element %d was copied or changed", i)
		}
		if encoded && len(e.Data) >= len(orig.Data) {
			t.Errorf("element %d did not shrink: %d -> %d", i, len(orig.Data), len(e.Data))
		}
	}
	// m itself is untouched.
	if !m.Equal(mixed()) {
		t.Fatal("Encode modified its argument")
	}
	// The encoded message is still a valid JXTA binary message.
	raw, err := wire.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	onWire, err := wire.Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := s.Decode(onWire)
	if err != nil {
		t.Fatal(err)
	}
	want := mixed()
	e := want.At(1)
	e.MIME = message.XMLUTF8 // the producer's mark is gone
	want.Set(1, e)
	if !dec.Equal(want) {
		t.Fatal("decoded message differs from the original")
	}
}

func TestDecodeUnencodedReturnsSame(t *testing.T) {
	d, _ := encoding.NewDecoder()
	m := message.New(message.Text("", "a", "b"))
	got, err := d.Decode(m)
	if err != nil || got != m {
		t.Fatalf("got %p, %v; want the same message", got, err)
	}
	s, _ := encoding.New([]encoding.Codec{identitycodec.New()})
	if got, _ := s.Encode(m); got != m {
		t.Fatal("Encode with nothing selected copied the message")
	}
}

func TestSelectors(t *testing.T) {
	e := message.Element{Namespace: "app", Name: "doc", MIME: "Text/XML; charset=UTF-8", Data: make([]byte, 100)}
	var p encoding.Producer
	tests := []struct {
		name string
		sel  encoding.Selector
		e    message.Element
		want bool
	}{
		{"name", encoding.ByName("doc"), e, true},
		{"name miss", encoding.ByName("Doc"), e, false},
		{"mime", encoding.ByMIME("text/xml"), e, true},
		{"mime wildcard", encoding.ByMIME("text/*"), e, true},
		{"mime miss", encoding.ByMIME("text/plain"), e, false},
		{"empty mime is octet-stream", encoding.ByMIME("application/octet-stream"), message.Bytes("", "b", nil), true},
		{"marked keeps mime", encoding.ByMIME("text/plain"), p.Text("", "a", "b"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sel.Select(tt.e); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name   string
		codecs []encoding.Codec
		opts   []encoding.Option
	}{
		{"no codecs", nil, nil},
		{"nil codec", []encoding.Codec{nil}, nil},
		{"too many codecs", []encoding.Codec{identitycodec.New(), identitycodec.New(), identitycodec.New(), identitycodec.New(), identitycodec.New()}, nil},
		{"nil selector", []encoding.Codec{identitycodec.New()}, []encoding.Option{encoding.WithSelector(nil)}},
		{"nil registry", []encoding.Codec{identitycodec.New()}, []encoding.Option{encoding.WithRegistry(nil)}},
		{"zero limit", []encoding.Codec{identitycodec.New()}, []encoding.Option{encoding.WithLimits(0, 10)}},
		{"element over message", []encoding.Codec{identitycodec.New()}, []encoding.Option{encoding.WithLimits(11, 10)}},
		{"bad policy", []encoding.Codec{identitycodec.New()}, []encoding.Option{encoding.WithPolicy(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := encoding.New(tt.codecs, tt.opts...); !errors.Is(err, encoding.ErrBadOption) {
				t.Fatalf("got %v, want ErrBadOption", err)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	r, err := encoding.NewRegistry(identitycodec.New())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(identitycodec.New()); !errors.Is(err, encoding.ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := r.Lookup("nope"); !errors.Is(err, encoding.ErrUnknownCodec) {
		t.Fatalf("lookup: %v", err)
	}
	if c, err := r.Lookup("identity"); err != nil || c.Name() != "identity" {
		t.Fatalf("lookup identity: %v", err)
	}
	for _, n := range []string{"identity", "gzip", "zstd"} {
		if _, err := encoding.Default().Lookup(n); err != nil {
			t.Errorf("default registry lacks %s: %v", n, err)
		}
	}
}

func TestDecodeErrorsAndPolicy(t *testing.T) {
	g, _ := encoding.NewCodec(encoding.Spec{Name: "gzip", Level: 9})
	s, _ := encoding.New([]encoding.Codec{g}, encoding.WithSelector(encoding.ByName("doc")))
	doc := datasets.Employees(250)
	m := message.New(message.Text("", "a", "1"), message.Element{Name: "doc", MIME: message.XMLUTF8, Data: doc})
	enc, err := s.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := enc.Clone()
	e := corrupt.At(1)
	e.Data = bytes.Clone(e.Data)
	e.Data[len(e.Data)-3] ^= 0xff // gzip trailer: CRC/size mismatch
	corrupt.Set(1, e)

	onlyID, _ := encoding.NewRegistry(identitycodec.New())
	withGzip, _ := encoding.NewRegistry(g)
	tests := []struct {
		name    string
		in      *message.Message
		opts    []encoding.Option
		wantErr error
	}{
		{"ok", enc, []encoding.Option{encoding.WithRegistry(withGzip)}, nil},
		{"unknown codec", enc, []encoding.Option{encoding.WithRegistry(onlyID)}, encoding.ErrUnknownCodec},
		{"corrupt", corrupt, nil, encoding.ErrCorrupt},
		{"element too large", enc, []encoding.Option{encoding.WithLimits(len(doc)-1, 1<<20)}, encoding.ErrTooLarge},
		{"message too large", message.New(enc.At(1), enc.At(1)), []encoding.Option{encoding.WithLimits(len(doc), 2*len(doc)-1)}, encoding.ErrTooLarge},
		{"message at limit", message.New(enc.At(1), enc.At(1)), []encoding.Option{encoding.WithLimits(len(doc), 2*len(doc))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := encoding.NewDecoder(tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Decode(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				var ee *encoding.ElementError
				if !errors.As(err, &ee) || ee.Name != "doc" || got != nil {
					t.Fatalf("error %v does not name the element, or message delivered", err)
				}
			}
		})
	}

	t.Run("deliver encoded", func(t *testing.T) {
		var seen []*encoding.ElementError
		d, _ := encoding.NewDecoder(encoding.WithRegistry(onlyID), encoding.WithPolicy(encoding.DeliverEncoded),
			encoding.WithErrorHandler(func(e *encoding.ElementError) { seen = append(seen, e) }))
		got, err := d.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !encoding.IsEncoded(got.At(1)) || !sameData(got.At(1).Data, enc.At(1).Data) {
			t.Fatal("element not delivered encoded")
		}
		if len(seen) != 1 || !errors.Is(seen[0], encoding.ErrUnknownCodec) || seen[0].Codec != "gzip" {
			t.Fatalf("handler saw %v", seen)
		}
	})
}

func TestNestedTooDeep(t *testing.T) {
	// Three levels by hand, each meaningful on its own: refused as too
	// deep before anything else is looked at.
	e := message.Text("", "a", "x")
	for range 3 {
		h := encoding.AppendHeader(nil, encoding.Header{Codec: "identity", MIME: e.MIME, Size: uint64(len(e.Data))})
		e = message.Element{Name: "a", MIME: encoding.MIME, Data: append(h, e.Data...)}
	}
	d, _ := encoding.NewDecoder()
	if _, err := d.Decode(message.New(e)); !errors.Is(err, encoding.ErrNestedTooDeep) && !errors.Is(err, encoding.ErrNesting) {
		t.Fatalf("got %v", err)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	h := encoding.Header{Codec: "zstd", Params: encoding.Params{Level: -2, DictID: 77, KeyID: "psk:a"}, MIME: "text/xml", Size: 1 << 40}
	b := encoding.AppendHeader([]byte{}, h)
	got, n, err := encoding.ParseHeader(append(b, "payload"...))
	if err != nil || n != len(b) || got != h {
		t.Fatalf("got %+v, %d, %v", got, n, err)
	}
	for i := range b {
		if _, _, err := encoding.ParseHeader(b[:i]); !errors.Is(err, encoding.ErrCorrupt) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
}

// FuzzParseHeader: a header a peer sends is refused with ErrCorrupt or
// read from within the input, and written again reads back the same.
func FuzzParseHeader(f *testing.F) {
	f.Add(encoding.AppendHeader(nil, encoding.Header{Codec: "gzip", MIME: "text/plain", Size: 10}))
	f.Add(encoding.AppendHeader(nil, encoding.Header{Codec: "seal", Params: encoding.Params{KeyID: "peer:x", DictID: 3, Level: 9}}))
	f.Add([]byte("P2E\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, n, err := encoding.ParseHeader(data)
		if err != nil {
			if !errors.Is(err, encoding.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if n > len(data) {
			t.Fatal("header longer than input")
		}
		again, m, err := encoding.ParseHeader(encoding.AppendHeader(nil, h))
		if err != nil || again != h || m == 0 {
			t.Fatalf("re-parse: %+v %v", again, err)
		}
	})
}

// FuzzDecodeElement: an encoded element a peer sends decodes within the
// limit or is refused with an error wrapping one of the sentinels.
func FuzzDecodeElement(f *testing.F) {
	z, _ := zstd.New()
	s, _ := encoding.New([]encoding.Codec{z}, encoding.WithSelector(encoding.ByName("d")))
	e, _ := s.EncodeElement(message.Text("", "d", string(datasets.Employees(1))))
	f.Add(e.Data)
	g := gzip.New()
	s2, _ := encoding.New([]encoding.Codec{g}, encoding.WithSelector(encoding.ByName("d")))
	e, _ = s2.EncodeElement(message.Text("", "d", "hello hello hello"))
	f.Add(e.Data)
	// zstd around gzip, by hand: refused as nesting.
	inner, _ := z.Encode(nil, e.Data, encoding.Binding{})
	f.Add(append(encoding.AppendHeader(nil, encoding.Header{Codec: "zstd", MIME: encoding.MIME, Size: uint64(len(e.Data))}), inner...))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 1 << 16
		got, err := encoding.DecodeElement(message.Element{Name: "d", MIME: encoding.MIME, Data: data}, max, encoding.WithoutPipeBinding())
		if err != nil {
			for _, s := range []error{encoding.ErrUnknownCodec, encoding.ErrCorrupt, encoding.ErrAuth, encoding.ErrNoDictionary, encoding.ErrNoKey,
				encoding.ErrTooLarge, encoding.ErrNestedTooDeep, encoding.ErrNesting, encoding.ErrReplay, encoding.ErrUnbound} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v wraps none of the sentinels", err)
		}
		if len(got.Data) > max {
			t.Fatalf("decoded %d bytes", len(got.Data))
		}
	})
}

func TestBombs(t *testing.T) {
	z, _ := zstd.New(zstd.WithLevel(1))
	payload, _ := z.Encode(nil, make([]byte, 64<<20), encoding.Binding{})
	elem := func(claimed uint64) message.Element {
		data := encoding.AppendHeader(nil, encoding.Header{Codec: "zstd", Params: z.Params(), MIME: "text/plain", Size: claimed})
		return message.Element{Name: "bomb", MIME: encoding.MIME, Data: append(data, payload...)}
	}
	d, _ := encoding.NewDecoder(encoding.WithLimits(1<<20, 4<<20))
	tests := []struct {
		name    string
		e       message.Element
		wantErr error
	}{
		{"honest header over limit", elem(64 << 20), encoding.ErrTooLarge},
		{"lying header under limit", elem(1000), encoding.ErrTooLarge},
		{"absurd header", elem(1 << 62), encoding.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Decode(message.New(tt.e))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
	t.Logf("%d-byte element expanding to 64 MiB refused", len(payload))
}

// countingCodec counts the decodes of the codec it wraps.
type countingCodec struct {
	encoding.Codec
	n *int
}

func (c countingCodec) Decode(dst, src []byte, p encoding.Params, b encoding.Binding, max int) ([]byte, error) {
	*c.n++
	return c.Codec.Decode(dst, src, p, b, max)
}

// WithDecodeWrap sees every layer decoded, of schemes and DecodeElement.
func TestWithDecodeWrap(t *testing.T) {
	g := gzip.New()
	s, _ := encoding.New([]encoding.Codec{g})
	enc, err := s.Encode(message.New(s.Producer().Text("", "a", "hello"), s.Producer().Text("", "b", "world")))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	wrap := encoding.WithDecodeWrap(func(c encoding.Codec) encoding.Codec { return countingCodec{c, &n} })
	d, err := encoding.NewDecoder(wrap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(enc); err != nil || n != 2 {
		t.Fatalf("%d decodes seen, %v", n, err)
	}
	if _, err := encoding.DecodeElement(enc.At(0), 100, wrap); err != nil || n != 3 {
		t.Fatalf("%d decodes seen, %v", n, err)
	}
	if _, err := encoding.NewDecoder(encoding.WithDecodeWrap(nil)); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatalf("nil wrapper: %v", err)
	}
}

// acceptingCodec counts the decodes of the codec it wraps that the
// encoding layer accepted.
type acceptingCodec struct {
	encoding.Codec
	accepted *int
}

func (c acceptingCodec) Accepted() { *c.accepted++ }

// A wrapped codec that is a DecodeAccepter learns which of its decodes
// were kept: those of accepted elements, not one whose output differs
// from the size its header records.
func TestDecodeAccepter(t *testing.T) {
	g := gzip.New()
	s, _ := encoding.New([]encoding.Codec{g})
	enc, err := s.Encode(message.New(s.Producer().Text("", "a", "hello"), s.Producer().Text("", "b", "world")))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	d, _ := encoding.NewDecoder(encoding.WithDecodeWrap(func(c encoding.Codec) encoding.Codec { return acceptingCodec{c, &n} }))
	if _, err := d.Decode(enc); err != nil || n != 2 {
		t.Fatalf("%d decodes accepted, %v; want 2", n, err)
	}
	payload, _ := g.Encode(nil, []byte("hello"), encoding.Binding{})
	lying := encodedBy("gzip", g.Params(), "text/plain", 6, payload)
	if _, err := d.Decode(message.New(message.Element{Name: "a", MIME: encoding.MIME, Data: lying})); !errors.Is(err, encoding.ErrCorrupt) || n != 2 {
		t.Fatalf("%d decodes accepted after a refused one, %v; want still 2", n, err)
	}
}
