package encoding_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// modelFiles trains an xml model (ID 7) and a zstd dictionary (ID 9) on
// the built-in employee samples and returns their files.
func modelFiles(t testing.TB) (xmlModel, zstdDict []byte) {
	t.Helper()
	samples, err := codecbench.ModelSamples("employees")
	if err != nil {
		t.Fatal(err)
	}
	m, err := xmlc.NewModel(7, samples...)
	if err != nil {
		t.Fatal(err)
	}
	if xmlModel, err = m.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	if zstdDict, err = zstd.TrainDictionary(9, samples); err != nil {
		t.Fatal(err)
	}
	return xmlModel, zstdDict
}

// roundTripModels encodes doc with spec under the models' build options
// and decodes it with dec's registry, returning the decode error.
func roundTripModels(t *testing.T, models *encoding.Models, spec string, reg *encoding.Registry, doc []byte) error {
	t.Helper()
	s, err := encoding.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := encoding.NewCodec(s, models.BuildOptions()...)
	if err != nil {
		t.Fatalf("%s: %v", spec, err)
	}
	sch, err := encoding.New([]encoding.Codec{c}, encoding.WithSelector(encoding.ByName("doc")))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := sch.Encode(message.New(message.Element{Name: "doc", MIME: message.XMLUTF8, Data: doc}))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.DictID()
	h, _, err := encoding.ParseHeader(enc.At(0).Data)
	if err != nil || h.Params.DictID != id {
		t.Fatalf("%s: header %+v, %v: want the model's ID recorded", spec, h, err)
	}
	dec, err := encoding.NewDecoder(encoding.WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.Decode(enc)
	if err == nil && !bytes.Equal(got.At(0).Data, doc) {
		t.Fatalf("%s: round trip differs", spec)
	}
	return err
}

func TestModels(t *testing.T) {
	xmlModel, zstdDict := modelFiles(t)
	var models encoding.Models
	for _, f := range []struct {
		file  []byte
		codec string
		id    uint32
	}{{xmlModel, xmlc.Name, 7}, {zstdDict, zstd.Name, 9}} {
		codec, id, err := models.Add(f.file)
		if err != nil || codec != f.codec || id != f.id {
			t.Fatalf("Add = %s %d %v, want %s %d", codec, id, err, f.codec, f.id)
		}
	}
	with, err := models.Registry()
	if err != nil {
		t.Fatal(err)
	}
	var none encoding.Models
	without, err := none.Registry()
	if err != nil {
		t.Fatal(err)
	}
	doc := datasets.Employees(1)
	for _, spec := range []string{"xml@7", "xml:4@7", "zstd@9", "zstd:19@9"} {
		t.Run(spec, func(t *testing.T) {
			if err := roundTripModels(t, &models, spec, with, doc); err != nil {
				t.Fatalf("with the models: %v", err)
			}
			err := roundTripModels(t, &models, spec, without, doc)
			if !errors.Is(err, encoding.ErrNoDictionary) {
				t.Fatalf("without the models: %v, want %v", err, encoding.ErrNoDictionary)
			}
		})
	}
	// Codecs without a model build as without the models.
	for _, spec := range []string{"xml", "zstd:3", "gzip"} {
		s, _ := encoding.ParseSpec(spec)
		c, err := encoding.NewCodec(s, models.BuildOptions()...)
		if err != nil || c.Params().DictID != 0 {
			t.Fatalf("%s: %v, dictionary %d", spec, err, c.Params().DictID)
		}
	}
	// An ID no model has.
	s, _ := encoding.ParseSpec("xml@8")
	if _, err := encoding.NewCodec(s, models.BuildOptions()...); !errors.Is(err, encoding.ErrNoDictionary) {
		t.Fatalf("xml@8: %v, want %v", err, encoding.ErrNoDictionary)
	}
}

func TestModelsAddErrors(t *testing.T) {
	xmlModel, zstdDict := modelFiles(t)
	zeroID := bytes.Clone(zstdDict)
	copy(zeroID[4:8], []byte{0, 0, 0, 0})
	badTables := bytes.Clone(zstdDict[:8])
	badTables = append(badTables, bytes.Repeat([]byte{0xff}, 64)...)
	badVersion := bytes.Clone(xmlModel)
	badVersion[4] = 2
	notXML, _ := xmlc.NewModel(5, []byte("<a>x</a>"))
	notXMLFile, _ := notXML.MarshalBinary()
	notXMLFile = bytes.Replace(notXMLFile, []byte("<a>x</a>"), []byte("<a>x</b>"), 1)
	tests := []struct {
		name    string
		file    []byte
		wantErr error
	}{
		{"empty", nil, encoding.ErrBadOption},
		{"wrong magic", []byte("PK\x03\x04 not a model"), encoding.ErrBadOption},
		{"xml model truncated", xmlModel[:len(xmlModel)/2], encoding.ErrBadOption},
		{"xml model trailing bytes", append(bytes.Clone(xmlModel), 0), encoding.ErrBadOption},
		{"xml model version", badVersion, encoding.ErrBadOption},
		{"xml model of no XML", notXMLFile, encoding.ErrBadOption},
		{"xml model magic only", []byte("P2XM"), encoding.ErrBadOption},
		{"zstd dictionary truncated", zstdDict[:40], encoding.ErrBadOption},
		{"zstd dictionary ID 0", zeroID, encoding.ErrBadOption},
		{"zstd dictionary tables", badTables, encoding.ErrBadOption},
		{"zstd dictionary header only", zstdDict[:8], encoding.ErrBadOption},
		{"huge sample count", append([]byte("P2XM\x01\x07"), 0xff, 0xff, 0xff, 0xff, 0x0f), encoding.ErrBadOption},
		{"huge sample", append([]byte("P2XM\x01\x07\x01"), 0xff, 0xff, 0xff, 0xff, 0x0f), encoding.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m encoding.Models
			if _, _, err := m.Add(tt.file); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Add: %v, want %v", err, tt.wantErr)
			}
			if len(m.BuildOptions()) != 0 {
				t.Fatal("a refused file left a model behind")
			}
		})
	}
	// Two models of one codec with one ID are ambiguous.
	var m encoding.Models
	for _, f := range [][]byte{xmlModel, zstdDict} {
		if _, _, err := m.Add(f); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.Add(f); !errors.Is(err, encoding.ErrBadOption) {
			t.Fatalf("second Add of one ID: %v, want %v", err, encoding.ErrBadOption)
		}
	}
}

func TestRegisterModelFormat(t *testing.T) {
	newLoader := func() encoding.ModelLoader { return nil }
	tests := []struct {
		codec, magic string
		wantErr      error
	}{
		{"xml", "ABCD", encoding.ErrDuplicate},       // xmlc registered it
		{"other", "P2XM", encoding.ErrDuplicate},     // so is its magic
		{"other", "P2XM1", encoding.ErrDuplicate},    // and any it begins
		{"other", "abc", encoding.ErrBadOption},      // too short
		{"bad name!", "WXYZ", encoding.ErrBadOption}, // not a codec name
	}
	for _, tt := range tests {
		if err := encoding.RegisterModelFormat(tt.codec, tt.magic, newLoader); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s %q: %v, want %v", tt.codec, tt.magic, err, tt.wantErr)
		}
	}
	if err := encoding.RegisterModelFormat("other", "WXYZ", nil); !errors.Is(err, encoding.ErrBadOption) {
		t.Errorf("nil loader: %v", err)
	}
}

// FuzzModelsAdd: model files never make Add panic or read past their
// bounds, and a model Add accepts encodes and decodes by its ID.
func FuzzModelsAdd(f *testing.F) {
	// Small real files (three samples), so that each run, which trains
	// the model again, is quick.
	samples, err := codecbench.ModelSamples("employees")
	if err != nil {
		f.Fatal(err)
	}
	m, err := xmlc.NewModel(7, samples[:3]...)
	if err != nil {
		f.Fatal(err)
	}
	xmlModel, _ := m.MarshalBinary()
	zstdDict, err := zstd.TrainDictionary(9, samples[:3])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(xmlModel)
	f.Add(zstdDict)
	f.Add([]byte("P2XM\x01\x07\x01\x08<a>1</a>"))
	doc := datasets.Employees(1)
	f.Fuzz(func(t *testing.T, file []byte) {
		var m encoding.Models
		codec, id, err := m.Add(file)
		if err != nil {
			if !errors.Is(err, encoding.ErrBadOption) {
				t.Fatalf("error %v does not wrap %v", err, encoding.ErrBadOption)
			}
			return
		}
		s := encoding.Spec{Name: codec, Model: fmt.Sprint(id)}
		c, err := encoding.NewCodec(s, m.BuildOptions()...)
		if err != nil {
			t.Fatalf("%s: accepted, but builds no codec: %v", s, err)
		}
		enc, err := c.Encode(nil, doc, encoding.Binding{})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := m.Registry()
		if err != nil {
			t.Fatal(err)
		}
		r, _ := reg.Lookup(codec)
		if got, err := r.Decode(nil, enc, c.Params(), encoding.Binding{}, len(doc)); err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("%s: round trip: %v", s, err)
		}
	})
}

// A model trained on a few documents of a schema makes a one-record
// document of it a few tens of bytes; the receiver loads the same file.
func ExampleModels() {
	// Train on records 100 to 139 of the employees schema, and save.
	samples, _ := codecbench.ModelSamples("employees")
	m, _ := xmlc.NewModel(7, samples...)
	file, _ := m.MarshalBinary()

	// Both peers load the file; a spec names the model by its ID.
	var models encoding.Models
	codec, id, _ := models.Add(file)
	fmt.Println("loaded", codec, "model", id)
	c, _ := encoding.NewCodec(encoding.Spec{Name: "xml", Model: "7"}, models.BuildOptions()...)
	doc := datasets.Employees(1)
	payload, _ := c.Encode(nil, doc, encoding.Binding{})
	fmt.Println(len(doc), "bytes in, at most 51 out:", len(payload) <= 51)

	reg, _ := models.Registry()
	receiver, _ := reg.Lookup("xml")
	got, _ := receiver.Decode(nil, payload, c.Params(), encoding.Binding{}, len(doc))
	fmt.Println("decoded exactly:", bytes.Equal(got, doc))

	var none encoding.Models
	reg, _ = none.Registry()
	receiver, _ = reg.Lookup("xml")
	_, err := receiver.Decode(nil, payload, c.Params(), encoding.Binding{}, len(doc))
	fmt.Println(err)
	// Output:
	// loaded xml model 7
	// 255 bytes in, at most 51 out: true
	// decoded exactly: true
	// encoding: missing dictionary: xml model 7
}
