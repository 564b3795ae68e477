package encoding_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/identitycodec"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/deflate"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

var testPSK = bytes.Repeat([]byte{9}, seal.KeySize)

func withPSK() encoding.BuildOption {
	return encoding.WithFactory(seal.Name, seal.Factory(seal.WithPSK("team", testPSK)))
}

// TestNoCodecPackage: in a program that imports no codec package, the
// default registry is empty, and building or decoding a codec fails
// saying that codecs register when their packages are imported (before:
// "unknown codec (have )").
func TestNoCodecPackage(t *testing.T) {
	z, err := zstd.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := encoding.New([]encoding.Codec{z}, encoding.WithSelector(encoding.ByName("doc")))
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := s.Encode(message.New(message.Element{Name: "doc", Data: []byte("hello")}))
	if err != nil {
		t.Fatal(err)
	}
	encoding.WithoutCodecs(func() {
		_, err := encoding.NewCodec(encoding.Spec{Name: "zstd"})
		if !errors.Is(err, encoding.ErrUnknownCodec) || !strings.Contains(err.Error(), `import _ "github.com/p2pmsg/p2pmsg/pkg/encoding/`) {
			t.Errorf("NewCodec with no codec package imported: %v; want ErrUnknownCodec saying to import one", err)
		}
		dec, err := encoding.NewDecoder()
		if err != nil {
			t.Fatal(err)
		}
		_, err = dec.Decode(encoded)
		if !errors.Is(err, encoding.ErrUnknownCodec) || !strings.Contains(err.Error(), `import _ "github.com/p2pmsg/p2pmsg/pkg/encoding/`) {
			t.Errorf("Decode with no codec package imported: %v; want ErrUnknownCodec saying to import one", err)
		}
	})
}

func TestNewCodec(t *testing.T) {
	tests := []struct {
		spec    string
		opts    []encoding.BuildOption
		want    encoding.Params // of the codec built
		wantErr error
	}{
		{"identity", nil, encoding.Params{}, nil},
		{"gzip", nil, encoding.Params{Level: 6}, nil},
		{"gzip:-2", nil, encoding.Params{Level: -2}, nil},
		{"deflate:9", nil, encoding.Params{Level: 9}, nil},
		{"zstd:19", nil, encoding.Params{Level: 19}, nil},
		{"s2:3", nil, encoding.Params{Level: 3}, nil},
		{"xml", nil, encoding.Params{Level: 3}, nil},
		{"seal", []encoding.BuildOption{withPSK()}, encoding.Params{KeyID: "psk:team"}, nil},
		{"lzma", nil, encoding.Params{}, encoding.ErrUnknownCodec},
		{"zstd:99", nil, encoding.Params{}, encoding.ErrBadOption},
		{"s2:4", nil, encoding.Params{}, encoding.ErrBadOption},
		{"identity:1", nil, encoding.Params{}, encoding.ErrBadOption},
		{"gzip@employees", nil, encoding.Params{}, encoding.ErrBadOption},
		{"zstd@employees", nil, encoding.Params{}, encoding.ErrBadOption}, // names are the caller's factory's
		{"zstd:3@225", nil, encoding.Params{}, encoding.ErrNoDictionary},
		{"xml@225", nil, encoding.Params{}, encoding.ErrNoDictionary},
		{"seal", nil, encoding.Params{}, encoding.ErrNoKey}, // no built-in key
		{"seal:1", []encoding.BuildOption{withPSK()}, encoding.Params{}, encoding.ErrBadOption},
		{"seal", []encoding.BuildOption{encoding.WithFactory(seal.Name, seal.Factory())}, encoding.Params{}, encoding.ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := encoding.ParseSpec(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			c, err := encoding.NewCodec(s, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewCodec(%s): %v, want %v", tt.spec, err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, encoding.ErrSpec) {
					t.Errorf("error %v does not wrap ErrSpec", err)
				}
				saysLayerOnce(t, err)
				return
			}
			if c.Name() != s.Name || c.Params() != tt.want {
				t.Fatalf("built %s %+v, want %s %+v", c.Name(), c.Params(), s.Name, tt.want)
			}
		})
	}
}

// TestNewCodecLevelOutOfRange: a level a codec does not have is refused
// with an error naming the codec's levels, so that whoever typed the spec
// sees what to type instead (before, xml and zstd said only "xml level 9").
func TestNewCodecLevelOutOfRange(t *testing.T) {
	tests := []struct {
		spec, want string
	}{
		{"xml:9", "xml level 9 out of range 1 to 4"},
		{"xml:-1", "xml level -1 out of range 1 to 4"},
		{"zstd:30", "zstd level 30 out of range 1 to 22"},
		{"zstd:-5", "zstd level -5 out of range 1 to 22"},
		{"gzip:12", "gzip level 12 out of range -2 to 9"},
		{"deflate:-3", "deflate level -3 out of range -2 to 9"},
		{"s2:4", "s2 level 4 out of range 1 to 3"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			c, err := encoding.ParseChain(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			_, err = encoding.NewChain(c)
			if !errors.Is(err, encoding.ErrSpec) || !errors.Is(err, encoding.ErrBadOption) {
				t.Fatalf("NewChain(%s): %v, want ErrSpec and ErrBadOption", tt.spec, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewChain(%s): %q, want it to say %q", tt.spec, err, tt.want)
			}
		})
	}
}

func TestNewCodecHandBuiltSpec(t *testing.T) {
	for _, s := range []encoding.Spec{{}, {Name: "zstd@1"}, {Name: "gzip", Model: "a,b"}, {Name: "gzip", Level: 1 << 40}} {
		if _, err := encoding.NewCodec(s); !errors.Is(err, encoding.ErrSpec) {
			t.Errorf("NewCodec(%+v): %v, want ErrSpec", s, err)
		}
	}
}

func TestNewChain(t *testing.T) {
	tests := []struct {
		chain   string
		opts    []encoding.BuildOption
		kinds   []encoding.Kind
		wantErr error
	}{
		{"zstd:9,seal", []encoding.BuildOption{withPSK()}, []encoding.Kind{encoding.KindCompression, encoding.KindSeal}, nil},
		{"s2", nil, []encoding.Kind{encoding.KindCompression}, nil},
		{"seal", []encoding.BuildOption{withPSK()}, []encoding.Kind{encoding.KindSeal}, nil},
		{"zstd:9,seal", nil, nil, encoding.ErrNoKey},
		{"seal,zstd", []encoding.BuildOption{withPSK()}, nil, encoding.ErrNesting},
		{"gzip,zstd", nil, nil, encoding.ErrNesting},
		{"identity,seal", []encoding.BuildOption{withPSK()}, nil, encoding.ErrNesting},
		{"gzip,zstd,seal", []encoding.BuildOption{withPSK()}, nil, encoding.ErrSpec},
		{"gzip,lzma", nil, nil, encoding.ErrUnknownCodec},
	}
	for _, tt := range tests {
		t.Run(tt.chain, func(t *testing.T) {
			c, err := encoding.ParseChain(tt.chain)
			if err != nil {
				t.Fatal(err)
			}
			codecs, err := encoding.NewChain(c, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewChain(%s): %v, want %v", tt.chain, err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, encoding.ErrSpec) {
					t.Errorf("error %v does not wrap ErrSpec", err)
				}
				saysLayerOnce(t, err)
				return
			}
			if len(codecs) != len(tt.kinds) {
				t.Fatalf("%d codecs", len(codecs))
			}
			for i, k := range tt.kinds {
				if encoding.KindOf(codecs[i]) != k || codecs[i].Name() != c[i].Name {
					t.Errorf("codec %d: %s kind %d", i, codecs[i].Name(), encoding.KindOf(codecs[i]))
				}
			}
			if _, err := encoding.New(codecs, encoding.WithoutPipeBinding()); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := encoding.NewChain(nil); !errors.Is(err, encoding.ErrSpec) {
		t.Fatalf("empty chain: %v", err)
	}
}

// saysLayerOnce fails t unless err's text names the encoding layer once,
// at its start: a spec refused for a cause that is itself one of the
// layer's errors said "encoding: bad codec spec "zstd:99": encoding:
// invalid option: …".
func saysLayerOnce(t *testing.T, err error) {
	t.Helper()
	if s := err.Error(); !strings.HasPrefix(s, "encoding: ") || strings.Count(s, "encoding: ") != 1 {
		t.Errorf("error %q names the layer more than once", s)
	}
}

// Every codec package registers a factory, and only seal's refuses to
// build without what the caller gives.
func TestDefaultFactories(t *testing.T) {
	for _, name := range []string{identitycodec.Name, gzip.Name, deflate.Name, zstd.Name, s2.Name, xmlc.Name} {
		if _, err := encoding.NewCodec(encoding.Spec{Name: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := encoding.RegisterFactory(gzip.Name, func(encoding.Spec) (encoding.Codec, error) { return nil, nil }); !errors.Is(err, encoding.ErrDuplicate) {
		t.Errorf("second gzip factory: %v", err)
	}
	r, _ := encoding.NewRegistry()
	for _, name := range []string{"", "a:b", "a b"} {
		if err := r.RegisterFactory(name, func(encoding.Spec) (encoding.Codec, error) { return nil, nil }); !errors.Is(err, encoding.ErrBadOption) {
			t.Errorf("factory named %q: %v", name, err)
		}
	}
	if err := r.RegisterFactory("x", nil); !errors.Is(err, encoding.ErrBadOption) {
		t.Errorf("nil factory: %v", err)
	}
	if _, err := encoding.NewCodec(encoding.Spec{Name: "gzip"}, encoding.WithFactory("gzip", nil)); !errors.Is(err, encoding.ErrBadOption) {
		t.Errorf("WithFactory nil: %v", err)
	}
	wrong := encoding.WithFactory(gzip.Name, func(encoding.Spec) (encoding.Codec, error) { return identitycodec.New(), nil })
	if _, err := encoding.NewCodec(encoding.Spec{Name: "gzip"}, wrong); !errors.Is(err, encoding.ErrBadOption) {
		t.Errorf("factory building another codec: %v", err)
	}
}

// A caller gives seal its keys through the factory; the chain a receiver
// decodes needs no spec at all.
func ExampleNewChain() {
	key := bytes.Repeat([]byte{7}, seal.KeySize) // read from a file in practice
	chain, _ := encoding.ParseChain("zstd:9,seal")
	codecs, err := encoding.NewChain(chain, encoding.WithFactory(seal.Name, seal.Factory(seal.WithPSK("team", key))))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := encoding.New(codecs, encoding.WithPipeID("urn:jxta:pipe-1"))
	enc, _ := s.Encode(message.New(s.Producer().Text("", "note", "hello")))
	e, _ := enc.Get("", "note")
	h, _, _ := encoding.ParseHeader(e.Data)
	fmt.Println(h.Codec, h.Params.KeyID)

	// Without a key, seal is not built.
	_, err = encoding.NewChain(chain)
	fmt.Println(err)
	// Output:
	// seal psk:team
	// encoding: bad codec spec "seal": missing key: seal needs a key to seal with: a pre-shared key or a recipient
}
