package adv_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

const pipeID = "urn:jxta:cbid-59616261646162614E504720503250334104A45E43FD481DAA2D9BC13236A09504"

func doc(body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<!DOCTYPE jxta:PipeAdvertisement>` + "\n" +
		`<jxta:PipeAdvertisement xmlns:jxta="http://jxta.org">` + body + `</jxta:PipeAdvertisement>`
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		opts    []adv.Option
		want    adv.PipeAdvertisement
		wantErr error
	}{
		{"minimal", doc(`<Id>` + pipeID + `</Id><Type>JxtaUnicast</Type>`), nil,
			adv.PipeAdvertisement{ID: id.MustParse(pipeID), Type: adv.Unicast}, nil},
		{"any order, blanks, extras, entities", doc("\n\t<Desc> d &amp; &#65; </Desc><Extra>x</Extra><Type> JxtaPropagate </Type><Name>n &lt; m</Name><Id>\n" + pipeID + "\n</Id>"), nil,
			adv.PipeAdvertisement{ID: id.MustParse(pipeID), Type: adv.Propagate, Name: "n < m", Desc: "d & A"}, nil},
		{"secure", doc(`<Id>` + pipeID + `</Id><Type>JxtaUnicastSecure</Type><Name>é😀</Name>`), nil,
			adv.PipeAdvertisement{ID: id.MustParse(pipeID), Type: adv.UnicastSecure, Name: "é😀"}, nil},
		{"missing id", doc(`<Type>JxtaUnicast</Type>`), nil, adv.PipeAdvertisement{}, adv.ErrMissingID},
		{"not a pipe id", doc(`<Id>urn:jxta:jxta-NetGroup</Id><Type>JxtaUnicast</Type>`), nil, adv.PipeAdvertisement{}, adv.ErrBadID},
		{"garbage id", doc(`<Id>urn:jxta:cbid-XYZ</Id><Type>JxtaUnicast</Type>`), nil, adv.PipeAdvertisement{}, adv.ErrBadID},
		{"missing type", doc(`<Id>` + pipeID + `</Id>`), nil, adv.PipeAdvertisement{}, adv.ErrBadType},
		{"bad type", doc(`<Id>` + pipeID + `</Id><Type>Bogus</Type>`), nil, adv.PipeAdvertisement{}, adv.ErrBadType},
		{"wrong root", `<jxta:PeerAdvertisement xmlns:jxta="http://jxta.org"><Id>` + pipeID + `</Id></jxta:PeerAdvertisement>`, nil, adv.PipeAdvertisement{}, adv.ErrWrongRoot},
		{"no prefix", `<PipeAdvertisement><Id>` + pipeID + `</Id><Type>JxtaUnicast</Type></PipeAdvertisement>`, nil, adv.PipeAdvertisement{}, adv.ErrWrongRoot},
		{"empty", ``, nil, adv.PipeAdvertisement{}, adv.ErrWrongRoot},
		{"not xml", `{"id":1}`, nil, adv.PipeAdvertisement{}, adv.ErrWrongRoot},
		{"unclosed", doc(`<Id>` + pipeID), nil, adv.PipeAdvertisement{}, adv.ErrSyntax},
		{"billion laughs", `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><jxta:PipeAdvertisement xmlns:jxta="http://jxta.org"><Name>&lol2;</Name></jxta:PipeAdvertisement>`, nil, adv.PipeAdvertisement{}, adv.ErrEntity},
		{"external entity", `<!DOCTYPE x SYSTEM "file:///etc/passwd"><jxta:PipeAdvertisement xmlns:jxta="http://jxta.org"/>`, nil, adv.PipeAdvertisement{}, adv.ErrEntity},
		{"undefined entity", doc(`<Name>&xxe;</Name>`), nil, adv.PipeAdvertisement{}, adv.ErrEntity},
		{"deep", doc(strings.Repeat("<a>", 100) + strings.Repeat("</a>", 100)), nil, adv.PipeAdvertisement{}, adv.ErrTooDeep},
		{"huge", doc(`<Name>` + strings.Repeat("x", 70<<10) + `</Name>`), nil, adv.PipeAdvertisement{}, adv.ErrTooLarge},
		{"size option", doc(`<Id>` + pipeID + `</Id><Type>JxtaUnicast</Type>`), []adv.Option{adv.WithMaxSize(100)}, adv.PipeAdvertisement{}, adv.ErrTooLarge},
		{"bad option", doc(``), []adv.Option{adv.WithMaxDepth(0)}, adv.PipeAdvertisement{}, adv.ErrBadOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := adv.Parse([]byte(tt.in), tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("got %+v, want %+v", *got, tt.want)
			}
			// Read takes the same path with a bounded reader.
			if _, rerr := adv.Read(strings.NewReader(tt.in), tt.opts...); !errors.Is(rerr, tt.wantErr) {
				t.Fatalf("Read: error %v, want %v", rerr, tt.wantErr)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	a, err := adv.New(adv.Propagate, "chat <&> \"q\" 'a' é", "line one\nline two\ttab AT&T & ;")
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := adv.Parse(b)
	if err != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, a)
	}
	if !bytes.Contains(b, []byte("<Name>chat &lt;&amp;> \"q\" 'a' é</Name>")) {
		t.Fatalf("escaping differs from JXSE's:\n%s", b)
	}
}

func TestValidate(t *testing.T) {
	good, _ := adv.New(adv.Unicast, "n", "")
	for name, mutate := range map[string]func(*adv.PipeAdvertisement){
		"zero id":     func(a *adv.PipeAdvertisement) { a.ID = id.ID{} },
		"group id":    func(a *adv.PipeAdvertisement) { a.ID = id.NetPeerGroupID },
		"bad type":    func(a *adv.PipeAdvertisement) { a.Type = "JxtaMulticast" },
		"control":     func(a *adv.PipeAdvertisement) { a.Name = "a\x01b" },
		"cr":          func(a *adv.PipeAdvertisement) { a.Desc = "a\rb" },
		"padded":      func(a *adv.PipeAdvertisement) { a.Name = " a" },
		"invalid utf": func(a *adv.PipeAdvertisement) { a.Name = "\xff" },
		"cdata end":   func(a *adv.PipeAdvertisement) { a.Name = "a]]>b" },
		"reference":   func(a *adv.PipeAdvertisement) { a.Desc = "AT&amp;T" },
		"char ref":    func(a *adv.PipeAdvertisement) { a.Desc = "&#65;" },
	} {
		a := *good
		mutate(&a)
		if err := a.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := a.Marshal(); err == nil {
			t.Errorf("%s: marshalled", name)
		}
	}
}

// TestBinders: allowed binders round-trip as <Binder> elements, an
// advertisement without them is written as before, and bad ones are
// refused.
func TestBinders(t *testing.T) {
	a, err := adv.New(adv.UnicastSecure, "vault", "")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := a.Marshal()
	a.Binders = []string{"12D3KooWBVXX99f6arzRf2F5D5gTupvJmb9VNeSPeyJeAkSumagr", "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"}
	b, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(string(plain), "</jxta:PipeAdvertisement>",
		"<Binder>"+a.Binders[0]+"</Binder><Binder>"+a.Binders[1]+"</Binder></jxta:PipeAdvertisement>", 1); string(b) != want {
		t.Fatalf("wrote %q", b)
	}
	back, err := adv.Parse(b)
	if err != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("re-parse: %+v, %v", back, err)
	}
	for _, bad := range [][]string{{""}, {"not a peer id"}, {a.Binders[0], a.Binders[0]}, {strings.Repeat("a", 200)}, make([]string, adv.MaxBinders+1)} {
		c := *a
		c.Binders = bad
		if _, err := c.Marshal(); !errors.Is(err, adv.ErrBadBinder) {
			t.Errorf("binders %q: %v", bad, err)
		}
	}
	many := strings.Replace(string(plain), "</jxta:PipeAdvertisement>", strings.Repeat("<Binder>x</Binder>", adv.MaxBinders+1)+"</jxta:PipeAdvertisement>", 1)
	if _, err := adv.Parse([]byte(many)); !errors.Is(err, adv.ErrBadBinder) {
		t.Errorf("too many binders: %v", err)
	}
	// A propagate pipe is not resolved, so binders would restrict
	// nothing (its members are whoever subscribes): refused, written or
	// read, rather than trusted to.
	room := *a
	room.Type = adv.Propagate
	if _, err := room.Marshal(); !errors.Is(err, adv.ErrBadBinder) {
		t.Errorf("a propagate pipe with binders written: %v", err)
	}
	if _, err := adv.Parse([]byte(strings.Replace(string(b), "JxtaUnicastSecure", "JxtaPropagate", 1))); !errors.Is(err, adv.ErrBadBinder) {
		t.Errorf("a propagate pipe with binders read: %v", err)
	}
}
