package xmlc_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// employeeModel is trained on employee records 100 to 139, each as a
// one-record document: the vocabulary, not the records measured.
func employeeModel(t testing.TB) *xmlc.Model { return trainedModel(t, "employees", 42) }

// trainedModel is model id trained on corpus's model samples
// (codecbench.ModelSamples).
func trainedModel(t testing.TB, corpus string, id uint32) *xmlc.Model {
	t.Helper()
	samples, err := codecbench.ModelSamples(corpus)
	if err != nil {
		t.Fatal(err)
	}
	m, err := xmlc.NewModel(id, samples...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestModelSmallMessage(t *testing.T) {
	m := employeeModel(t)
	sender := newCodec(t, xmlc.WithEncoderModel(m))
	src := datasets.Employees(1)
	enc := roundTrip(t, sender, src)
	plain, _ := newCodec(t).Encode(nil, src, bind)
	t.Logf("1-record document, %d bytes: %d with the model, %d without", len(src), len(enc), len(plain))
	if len(enc) > 51 {
		t.Errorf("%d bytes with the model, target 51", len(enc))
	}
	if sender.Params().DictID != 42 {
		t.Fatalf("dictionary ID %d", sender.Params().DictID)
	}

	// Through the encoding layer: the receiver needs the model by ID.
	s, _ := encoding.New([]encoding.Codec{sender}, encoding.WithSelector(encoding.ByName("doc")))
	msg, err := s.Encode(message.New(message.Element{Name: "doc", MIME: message.XMLUTF8, Data: src}))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("encoded element with its header: %d bytes", len(msg.At(0).Data))
	regNo, _ := encoding.NewRegistry(newCodec(t))
	regYes, _ := encoding.NewRegistry(newCodec(t, xmlc.WithModels(m)))
	tests := []struct {
		name    string
		reg     *encoding.Registry
		wantErr error
	}{
		{"without the model", regNo, encoding.ErrNoDictionary},
		{"with the model", regYes, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, _ := encoding.NewDecoder(encoding.WithRegistry(tt.reg))
			got, err := dec.Decode(msg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err == nil && !bytes.Equal(got.At(0).Data, src) {
				t.Fatal("round trip differs")
			}
		})
	}
}

func TestModelRoundTripsEverything(t *testing.T) {
	c := newCodec(t, xmlc.WithEncoderModel(employeeModel(t)))
	for _, d := range append(datasets.EmployeeDocs(), datasets.DataSetDocs()...) {
		roundTrip(t, c, d.Data)
	}
	for _, p := range [][]byte{genXML([]byte("some program bytes")), []byte("<employees><employee id='x'/></employees>"), []byte("not xml")} {
		roundTrip(t, c, p)
	}
}

func TestModelSerialization(t *testing.T) {
	m := employeeModel(t)
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := xmlc.ParseModel(b)
	if err != nil {
		t.Fatal(err)
	}
	if m2.ID() != m.ID() {
		t.Fatalf("ID %d, want %d", m2.ID(), m.ID())
	}
	// A model parsed from bytes decodes what the original encoded.
	enc, _ := newCodec(t, xmlc.WithEncoderModel(m)).Encode(nil, datasets.Employees(3), bind)
	c2 := newCodec(t, xmlc.WithModels(m2))
	if dec, err := c2.Decode(nil, enc, encoding.Params{DictID: m.ID()}, bind, 1<<20); err != nil || !bytes.Equal(dec, datasets.Employees(3)) {
		t.Fatalf("parsed model: %v", err)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", []byte("P2XX\x01\x01\x01\x01x")},
		{"truncated", b[:len(b)-1]},
		{"trailing", append(bytes.Clone(b), 0)},
		{"ID 0", []byte("P2XM\x01\x00\x01\x03<a/>")},
		{"not XML", []byte("P2XM\x01\x07\x01\x07<a></b>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := xmlc.ParseModel(tt.b); !errors.Is(err, encoding.ErrBadOption) {
				t.Fatalf("got %v, want ErrBadOption", err)
			}
		})
	}
	if _, err := xmlc.NewModel(1); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatalf("no samples: %v", err)
	}
}

func ExampleNewModel() {
	// Both peers build the model from the same samples (or one sends the
	// other its MarshalBinary form); its ID travels in each header.
	samples := [][]byte{
		[]byte(`<order id="17"><item sku="A-100" qty="2"/><note>gift wrap</note></order>`),
		[]byte(`<order id="18"><item sku="B-220" qty="1"/><note>leave at door</note></order>`),
	}
	m, _ := xmlc.NewModel(7, samples...)
	sender, _ := xmlc.New(xmlc.WithEncoderModel(m))
	receiver, _ := xmlc.New(xmlc.WithModels(m))

	doc := []byte(`<order id="19"><item sku="A-100" qty="3"/><note>gift wrap</note></order>`)
	enc, _ := sender.Encode(nil, doc, encoding.Binding{})
	dec, _ := receiver.Decode(nil, enc, sender.Params(), encoding.Binding{}, 1<<20)
	plain, _ := receiver.Encode(nil, doc, encoding.Binding{})
	fmt.Println(len(doc), len(enc) < len(plain)/2, bytes.Equal(dec, doc))
	// Output:
	// 72 true true
}

// A spec names a model by its ID among those the factory is given.
func TestFactoryModel(t *testing.T) {
	m := employeeModel(t)
	f := encoding.WithFactory(xmlc.Name, xmlc.Factory(xmlc.WithModels(m)))
	tests := []struct {
		spec    string
		want    encoding.Params
		wantErr error
	}{
		{"xml:2@42", encoding.Params{Level: 2, DictID: 42}, nil},
		{"xml", encoding.Params{Level: 3}, nil},
		{"xml@43", encoding.Params{}, encoding.ErrNoDictionary},
		{"xml@employees", encoding.Params{}, encoding.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, _ := encoding.ParseSpec(tt.spec)
			c, err := encoding.NewCodec(s, f)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("%v, want %v", err, tt.wantErr)
			}
			if err == nil && c.Params() != tt.want {
				t.Fatalf("params %+v, want %+v", c.Params(), tt.want)
			}
		})
	}
}

// A header naming a model the receiver lacks is refused, even when the
// payload turned out not to use it (input that is not XML), as zstd
// refuses a dictionary ID it lacks: the refusal does not depend on the
// document.
func TestModelNamedButUnused(t *testing.T) {
	m := employeeModel(t)
	sender := newCodec(t, xmlc.WithEncoderModel(m))
	src := []byte("not XML at all, not XML at all, not XML at all")
	enc, _ := sender.Encode(nil, src, bind)
	if _, err := newCodec(t).Decode(nil, enc, sender.Params(), bind, len(src)); !errors.Is(err, encoding.ErrNoDictionary) {
		t.Fatalf("without the model: %v, want %v", err, encoding.ErrNoDictionary)
	}
	if got, err := newCodec(t, xmlc.WithModels(m)).Decode(nil, enc, sender.Params(), bind, len(src)); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("with the model: %v", err)
	}
}
