package xmlc_test

import (
	"errors"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// FuzzDecode: hostile payloads never panic, never exceed the limit, and
// whatever decodes re-encodes and decodes to the same bytes.
func FuzzDecode(f *testing.F) {
	c := newCodec(f)
	raw := newCodec(f)
	xmlc.RawMain(raw)
	for _, s := range seedDocs() {
		enc, _ := raw.Encode(nil, s, bind)
		f.Add(enc)
	}
	// Lying sizes, within the fuzz target's limit: the plain-zstd mode,
	// and an XML payload of 60,000 bytes whose main stream is, with a
	// frame recording 60,000 bytes of content and holding one byte.
	lying := []byte{0xE0, 0x60, 0xea, 0, 0, 0, 0, 0, 0, 9, 0, 0, 'x'}
	f.Add(append([]byte{1}, lying...))
	f.Add(append([]byte{2, 0xe0, 0xd4, 0x03, 0, 0, 0, 0, byte(len(lying))}, lying...))
	codectest.Fuzz(f, c)
}

// FuzzRoundTrip: any bytes round-trip.
func FuzzRoundTrip(f *testing.F) {
	c := newCodec(f)
	for _, s := range [][]byte{datasets.Employees(2), []byte("<a><b></a>"), []byte("<r a='1'>x<![CDATA[y]]><!--z--></r>"), {0, 1, 2}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		roundTrip(t, c, src)
	})
}

// FuzzXML: generated well-formed documents take the XML model and
// round-trip byte-exactly.
func FuzzXML(f *testing.F) {
	c := newCodec(f)
	xmlc.ForceXML(c)
	for _, s := range []string{"", "\x01\x00\x05\x02\x07\x09\x03\x01", "element soup with text 0123456789", "\xff\xfe\xfd\xfc\xfb\xfa"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		doc := genXML(prog)
		if enc := roundTrip(t, c, doc); !xmlc.IsXMLMode(enc) {
			t.Fatalf("not coded with the XML model:\n%s", doc)
		}
	})
}

// FuzzQuery: Query on hostile payloads never panics, fails only with an
// error wrapping its own or encoding's sentinels, and never returns more
// than the limit, nor more than the document holds where it decodes.
func FuzzQuery(f *testing.F) {
	c := newCodec(f)
	raw := newCodec(f)
	xmlc.RawMain(raw)
	for _, s := range seedDocs() {
		enc, _ := raw.Encode(nil, s, bind)
		f.Add(enc, "/employees/employee/@id")
		f.Add(enc, "/r/a")
	}
	f.Fuzz(func(t *testing.T, src []byte, path string) {
		const max = 1 << 16
		vals, err := c.Query(src, c.Params(), path, max)
		if err != nil {
			for _, s := range []error{xmlc.ErrBadPath, xmlc.ErrNotXML, encoding.ErrCorrupt, encoding.ErrTooLarge, encoding.ErrNoDictionary} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v wraps none of the sentinels", err)
		}
		n := 0
		for _, v := range vals {
			n += len(v)
		}
		if n > max {
			t.Fatalf("%d bytes of values, limit %d", n, max)
		}
		if dec, err := c.Decode(nil, src, c.Params(), bind, max); err == nil && n > len(dec) {
			t.Fatalf("%d bytes of values from a document of %d", n, len(dec))
		}
	})
}

// seedDocs are small documents touching every op and column mode.
func seedDocs() [][]byte {
	return [][]byte{
		datasets.Employees(3), datasets.DataSet(2), genXML([]byte("seed program 1")),
		[]byte("<r><a x='1'>t</a><a/></r>"),
		[]byte("<?xml version='1.0'?><!DOCTYPE r><r a = 'x' b=\"2\" ><!--c--><![CDATA[d]]><e>1</e><e>22</e><e>007</e><e>4.5</e></r >"),
		[]byte("<r><n>10</n><n>11</n><n>12</n><n>13</n><n>200</n><n>201</n><n>202</n><n>9999</n><n>5</n><n>5</n><n>5</n><n>5</n></r>"),
	}
}
