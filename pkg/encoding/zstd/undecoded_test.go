package zstd_test

import (
	"bytes"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Elements this receiver cannot open (a dictionary it lacks; sealed to
// another peer alike) cost their message's budget their payload's length,
// not the size their headers record: under DeliverEncoded they are
// delivered still encoded and the rest decoded. Charged their claimed
// sizes, an honest message whose undecodable elements recorded as much as
// the budget was refused whole. Scaled: limits 1 MiB an element, 4 MiB a
// message; four 1 MiB XML documents compressed with a dictionary the
// receiver lacks (a few KB each on the wire), then a 1 KiB note in plain
// zstd.
func TestUndecodableLayersCostTheirPayload(t *testing.T) {
	d := employeeDict(t)
	withDict, err := zstd.New(zstd.WithEncoderDictionary(d))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := zstd.New()
	doc := datasets.Employees(1)
	for len(doc) < 1<<20 {
		doc = append(doc, doc...)
	}
	doc = doc[:1<<20]
	sd, _ := encoding.New([]encoding.Codec{withDict}, encoding.WithSelector(encoding.ByName("doc1", "doc2", "doc3", "doc4")))
	sp, _ := encoding.New([]encoding.Codec{plain}, encoding.WithSelector(encoding.ByName("note")))
	var elems []message.Element
	wire := 0
	for i := range 4 {
		m, err := sd.Encode(message.New(message.Element{Name: "doc" + string(rune('1'+i)), MIME: message.XMLUTF8, Data: doc}))
		if err != nil {
			t.Fatal(err)
		}
		elems = append(elems, m.At(0))
		wire += len(m.At(0).Data)
	}
	note := bytes.Repeat([]byte("note "), 200)
	m, err := sp.Encode(message.New(message.Element{Name: "note", MIME: message.TextUTF8, Data: note}))
	if err != nil {
		t.Fatal(err)
	}
	elems = append(elems, m.At(0))
	msg := message.FromElements(elems)

	reg, _ := encoding.NewRegistry(plain) // no dictionary
	var errs []error
	dec, err := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPolicy(encoding.DeliverEncoded),
		encoding.WithLimits(1<<20, 4<<20), encoding.WithErrorHandler(func(e *encoding.ElementError) { errs = append(errs, e) }))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.Decode(msg)
	if err != nil {
		t.Fatalf("an honest message of %d bytes on the wire (4 elements needing a dictionary this peer lacks, delivered "+
			"encoded under DeliverEncoded, and a 1 KiB note it can decode) was refused whole: %v (element errors %v); "+
			"the undecoded layers were charged the 4 MiB their headers record, though the codec refused them before "+
			"decoding anything; want them delivered encoded and the note decoded, as before 7b15d54", wire+len(elems[4].Data), err, errs)
	}
	for _, e := range got.Elements() {
		t.Logf("%s encoded=%v len=%d", e.Name, encoding.IsEncoded(e), len(e.Data))
	}
	t.Logf("errs %v", errs)
	if n, _ := got.Get("", "note"); encoding.IsEncoded(n) {
		t.Fatalf("the decodable note was left encoded: %v", errs)
	}
}
