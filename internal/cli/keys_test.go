package cli

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestBuiltinModelsBuiltWhenNamed: the registry recv and codec decode
// decode with builds the built-in models when a frame first names one,
// not when it is made (before: at every recv start, 4.3 of its 8.6 MB
// allocated); they are built once, frames naming them decode, and a
// frame naming an ID no model has is still refused naming the ID.
func TestBuiltinModelsBuiltWhenNamed(t *testing.T) {
	var built atomic.Int32
	files := builtinModelFiles
	builtinModelFiles = func() ([][]byte, error) { built.Add(1); return files() }
	t.Cleanup(func() { builtinModelFiles = files })

	var k codecKeys
	reg, err := k.registry()
	if err != nil {
		t.Fatal(err)
	}
	if n := built.Load(); n != 0 {
		t.Fatalf("the registry built the built-in models %d times before any frame named one", n)
	}
	doc := datasets.Employees(3)
	decode := func(frame []byte) ([]byte, error) {
		e, err := encoding.DecodeElement(message.Element{MIME: encoding.MIME, Data: frame}, encoding.DefaultMaxElementSize,
			encoding.WithRegistry(reg), encoding.WithoutPipeBinding())
		return e.Data, err
	}
	for _, tc := range []struct {
		spec  string
		built int32 // times built once it is decoded
	}{
		{"zstd:3", 0},
		{"xml", 0},
		{"xml@employees", 1},
		{"zstd:19@dataset", 1}, // one build serves every codec
		{"xml@dataset", 1},
	} {
		got, err := decode(encodeFrame(t, tc.spec, doc, codecbench.ModelOptions()...))
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("%s: decoded %d bytes, %v; want the document", tc.spec, len(got), err)
		}
		if n := built.Load(); n != tc.built {
			t.Fatalf("after decoding %s: built-in models built %d times, want %d", tc.spec, n, tc.built)
		}
	}

	// A model of an ID that is neither given nor built in: refused, named.
	samples, err := codecbench.ModelSamples("employees")
	if err != nil {
		t.Fatal(err)
	}
	m, err := xmlc.NewModel(77, samples...)
	if err != nil {
		t.Fatal(err)
	}
	frame := encodeFrame(t, "xml@77", doc, encoding.WithFactory(xmlc.Name, xmlc.Factory(xmlc.WithModels(m))))
	if _, err := decode(frame); !errors.Is(err, encoding.ErrNoDictionary) || !strings.Contains(err.Error(), "xml model 77") {
		t.Fatalf("a frame naming model 77: %v; want ErrNoDictionary naming xml model 77", err)
	}
}

// encodeFrame encodes doc with the codec spec names, as codec encode does.
func encodeFrame(t *testing.T, spec string, doc []byte, opts ...encoding.BuildOption) []byte {
	t.Helper()
	s, err := encoding.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := encoding.NewCodec(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := encoding.New([]encoding.Codec{c}, encoding.WithoutPipeBinding())
	if err != nil {
		t.Fatal(err)
	}
	e, err := sch.EncodeElement(message.Element{MIME: "application/xml", Data: doc})
	if err != nil {
		t.Fatal(err)
	}
	return e.Data
}

// TestCalibrationRegistryIsItsOwn: the codecs recv measures its decodes
// on are its registry's, at the same levels, but built afresh, so that the
// encoders measuring builds (xml's best-level tables: 34 MB) go with them
// rather than stay in the process's default codecs, which recv decodes
// with, for its life; seal, which holds the keys, is the registry's own,
// and identity, which holds nothing, is one value.
func TestCalibrationRegistryIsItsOwn(t *testing.T) {
	k := codecKeys{psk: bytes.Repeat([]byte{7}, 32)}
	reg, err := k.registry()
	if err != nil {
		t.Fatal(err)
	}
	calib, err := calibrationRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := calib.Names(), reg.Names(); !slices.Equal(got, want) {
		t.Fatalf("calibration registry of %v, want %v", got, want)
	}
	for _, name := range reg.Names() {
		c, _ := calib.Lookup(name)
		r, _ := reg.Lookup(name)
		d, _ := encoding.Default().Lookup(name)
		if c.Params() != r.Params() {
			t.Errorf("%s: measured at %+v, decoding codec at %+v", name, c.Params(), r.Params())
		}
		if shared := c == r || c == d; shared != (name == seal.Name || name == "identity") {
			t.Errorf("%s: shared with the decoding registry: %v", name, shared)
		}
	}
}
