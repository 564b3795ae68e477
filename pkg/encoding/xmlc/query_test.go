package xmlc_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// oracle answers a query the slow way: encoding/xml over the document.
// Element values are their direct character data (whitespace-only text
// only when they have no child elements), attribute values as parsed.
func oracle(t testing.TB, doc []byte, path string) []string {
	t.Helper()
	steps := strings.Split(path[1:], "/")
	attr := ""
	if a := steps[len(steps)-1]; strings.HasPrefix(a, "@") {
		attr, steps = a[1:], steps[:len(steps)-1]
	}
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = false
	var stack []string
	var out []string
	var text, nows []byte
	var child []bool
	name := func(n xml.Name) string {
		if n.Space != "" {
			return n.Space + ":" + n.Local
		}
		return n.Local
	}
	at := func() bool { return slices.Equal(stack, steps) }
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if at() {
				child[len(child)-1] = true
			}
			stack = append(stack, name(tok.Name))
			child = append(child, false)
			if at() {
				text, nows = text[:0], nows[:0]
				if attr != "" {
					for _, a := range tok.Attr {
						if name(a.Name) == attr {
							// XML normalizes literal whitespace in attribute
							// values to spaces; encoding/xml does not.
							out = append(out, strings.NewReplacer("\r\n", " ", "\t", " ", "\n", " ", "\r", " ").Replace(a.Value))
						}
					}
				}
			}
		case xml.EndElement:
			if at() && attr == "" {
				if child[len(child)-1] {
					out = append(out, string(nows))
				} else {
					out = append(out, string(text))
				}
			}
			stack, child = stack[:len(stack)-1], child[:len(child)-1]
		case xml.CharData:
			if at() {
				text = append(text, tok...)
				if len(bytes.TrimLeft(tok, " \t\r\n")) > 0 {
					nows = append(nows, tok...)
				}
			}
		}
	}
}

func TestQuery(t *testing.T) {
	const root = "/soap:Envelope/soap:Body/GetOrdersResponse/GetOrdersResult/NewDataSet/Orders/"
	emp, ds := datasets.Employees(250), datasets.DataSet(300)
	mixed := []byte(`<r><p a="x &amp; y" b="1` + "\t" + `2">one <b>two</b> <![CDATA[<3>]]> &#233;&lt;</p><p/><p>  </p><p><q/>  </p></r>`)
	tests := []struct {
		doc  []byte
		path string
	}{
		{emp, "/employees/employee/lname"},
		{emp, "/employees/employee/@id"},
		{emp, "/employees/employee/phone"},
		{emp, "/employees/employee"},
		{emp, "/employees/nothing"},
		{emp, "/employees/employee/@nothing"},
		{ds, root + "OrderDate"},
		{ds, root + "ShippedDate"},
		{ds, root + "Comments"},
		{ds, root + "Freight"},
		{mixed, "/r/p"},
		{mixed, "/r/p/@a"},
		{mixed, "/r/p/@b"},
		{datasets.Employees(1), "/employees/employee/fname"}, // small: coded without the XML model
	}
	c := newCodec(t)
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			enc, _ := c.Encode(nil, tt.doc, bind)
			got, err := c.Query(enc, c.Params(), tt.path, len(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			want := oracle(t, tt.doc, tt.path)
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for i := range got {
				if string(got[i]) != want[i] {
					t.Fatalf("value %d: %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}

func TestQueryWithModel(t *testing.T) {
	m := employeeModel(t)
	c := newCodec(t, xmlc.WithEncoderModel(m))
	enc, _ := c.Encode(nil, datasets.Employees(1), bind)
	got, err := c.Query(enc, c.Params(), "/employees/employee/jobtitle", 1<<20)
	if err != nil || len(got) != 1 || string(got[0]) != "Cubical Farmer" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := newCodec(t).Query(enc, c.Params(), "/employees/employee/jobtitle", 1<<20); !errors.Is(err, encoding.ErrNoDictionary) {
		t.Fatalf("without the model: %v", err)
	}
}

func TestQueryErrors(t *testing.T) {
	c := newCodec(t)
	doc := datasets.Employees(10)
	enc, _ := c.Encode(nil, doc, bind)
	notXML, _ := c.Encode(nil, []byte("<a><b></a>"), bind)
	tests := []struct {
		name, path string
		src        []byte
		max        int
		wantErr    error
	}{
		{"relative", "employees/employee", enc, 1 << 20, xmlc.ErrBadPath},
		{"root only", "/", enc, 1 << 20, xmlc.ErrBadPath},
		{"empty step", "/employees//employee", enc, 1 << 20, xmlc.ErrBadPath},
		{"attribute inside", "/employees/@id/employee", enc, 1 << 20, xmlc.ErrBadPath},
		{"attribute of nothing", "/@id", enc, 1 << 20, xmlc.ErrBadPath},
		{"wildcard", "/employees/*", enc, 1 << 20, xmlc.ErrBadPath},
		{"too large", "/employees/employee/age", enc, len(doc) - 1, encoding.ErrTooLarge},
		{"truncated", "/employees/employee/age", enc[:len(enc)-5], 1 << 20, encoding.ErrCorrupt},
		{"not XML", "/a/b", notXML, 1 << 20, xmlc.ErrNotXML},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Query(tt.src, c.Params(), tt.path, tt.max); !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func ExampleCodec_Query() {
	c, _ := xmlc.New()
	enc, _ := c.Encode(nil, datasets.Employees(1000), encoding.Binding{})
	ids, _ := c.Query(enc, c.Params(), "/employees/employee/@id", 1<<20)
	names, _ := c.Query(enc, c.Params(), "/employees/employee/lname", 1<<20)
	fmt.Println(len(ids), string(ids[0]), string(names[0]), string(names[999]))
	// Output:
	// 1000 156201 McChomsky Delacroix
}
