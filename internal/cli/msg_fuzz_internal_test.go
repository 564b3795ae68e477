package cli

import (
	"encoding/json"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// FuzzParseJSONMessage: the JSON msg encode reads never panics it; a
// message it accepts and wire encodes decodes to the same message, and
// msg decode's JSON of it reads back the same.
func FuzzParseJSONMessage(f *testing.F) {
	for _, s := range []string{
		`{"elements":[{"namespace":"","name":"hi","mime":"text/plain","data":"aGk="}]}`,
		`{"elements":[{"namespace":"jxta","name":"s","mime":"","data":"","signature":{"namespace":"jxta","name":"sig","mime":"application/octet-stream","data":"AAE="}}]}`,
		`{"elements":[]}`,
		`{"elements":[{"name":"a","data":"!"}]}`,
		`{"elements":[{"name":"a","data":""}]} {}`,
		`{"elements":[{"name":"a","data":"","extra":1}]}`,
		`{"elements":[{"name":"a","data":"","signature":{"name":"b","data":"","signature":{"name":"c","data":""}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := parseJSONMessage(in)
		if err != nil {
			return
		}
		b, err := wire.Marshal(m)
		if err != nil {
			return // a name or type the wire format cannot carry
		}
		back, err := wire.Unmarshal(b)
		if err != nil {
			t.Fatalf("encoded message does not decode: %v", err)
		}
		if !back.Equal(m) {
			t.Fatal("encoding changed the message")
		}
		js, err := json.Marshal(toJSON(back))
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseJSONMessage(js)
		if err != nil || !again.Equal(back) {
			t.Fatalf("msg decode's JSON %s reads back as %v, %v", js, again, err)
		}
	})
}

// TestJSONSignatureTakesItsElementsNamespace: a signature whose JSON
// names no namespace has its element's, as the wire format gives it, so
// msg encode writes it; one that names another is refused there.
func TestJSONSignatureTakesItsElementsNamespace(t *testing.T) {
	m, err := parseJSONMessage([]byte(`{"elements":[{"namespace":"jxta","name":"s","data":"","signature":{"name":"sig","data":"AAE="}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := m.Elements()[0]; e.Signature == nil || e.Signature.Namespace != "jxta" {
		t.Fatalf("signature %+v; want namespace jxta", e.Signature)
	}
	if _, err := wire.Marshal(m); err != nil {
		t.Fatalf("msg encode of a signature without a namespace: %v", err)
	}
}
