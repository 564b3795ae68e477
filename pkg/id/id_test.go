package id_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// Strings JXSE 2.7 wrote or read (see interop_test.go for the live check).
const (
	netPipe   = "urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04"
	uuidGroup = "urn:jxta:uuid-7C7138FBC02047C99EC4CFCEC876137702"
	cbidGroup = "urn:jxta:cbid-27BE7F4F4F254522BC82EA7ADFA589F402"
	// a cbid group whose parent is the Net group
	netChild  = "urn:jxta:cbid-8C22BA1CC9C64EDDA754B6C36F764F3059616261646162614E5047205032503302"
	cbidClass = "urn:jxta:cbid-794A16BBE8CB4A789E43DDFE54E6B58805"
	cbidRole  = "urn:jxta:cbid-794A16BBE8CB4A789E43DDFE54E6B588FAE760EA1FD94E8AB4C2B7569B179C9F05"
	uuidSpec  = "urn:jxta:uuid-DD9AC86B5C3048A58416C6A1B3E94A4AFBE7FEE1E2294B72A010CAF97DC47A3B06"
	// a codat with the SHA-1 of its content
	hashCodat = "urn:jxta:cbid-27BE7F4F4F254522BC82EA7ADFA589F489DC2C2C2AC24EC98B038D31D2BE17F4022B97D374AB041BA88F41ECF2689DEF397AC4BE01"
	content   = "urn:jxta:uuid-27BE7F4F4F254522BC82EA7ADFA589F4E59B0DFBD79440D9BA25878B5E6F82758007"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the result; in itself when ""
		kind    id.Kind
		format  id.Format
		group   string // String() of Group(); "" for none
		wantErr error
	}{
		// The well-known IDs, in JXSE's spelling and others it accepts.
		{in: "urn:jxta:jxta-NetGroup", kind: id.KindPeerGroup, format: id.FormatJXTA, group: "urn:jxta:jxta-WorldGroup"},
		{in: "urn:jxta:jxta-WorldGroup", kind: id.KindPeerGroup, format: id.FormatJXTA},
		{in: "urn:jxta:jxta-Null", kind: id.KindNull, format: id.FormatJXTA},
		{in: "URN:JXTA:jxta-netgroup", want: "urn:jxta:jxta-NetGroup", kind: id.KindPeerGroup, format: id.FormatJXTA, group: "urn:jxta:jxta-WorldGroup"},
		{in: "Urn:Jxta:jxta-NULL", want: "urn:jxta:jxta-Null", kind: id.KindNull, format: id.FormatJXTA},
		{in: "urn:jxta:uuid-59616261646162614E5047205032503302", want: "urn:jxta:jxta-NetGroup", kind: id.KindPeerGroup, format: id.FormatJXTA, group: "urn:jxta:jxta-WorldGroup"},
		{in: "urn:jxta:uuid-59616261646162614a7874615032503302", want: "urn:jxta:jxta-WorldGroup", kind: id.KindPeerGroup, format: id.FormatJXTA},
		{in: "urn:jxta:cbid-59616261646162614E5047205032503302", want: "urn:jxta:jxta-NetGroup", kind: id.KindPeerGroup, format: id.FormatJXTA, group: "urn:jxta:jxta-WorldGroup"},
		// Every kind.
		{in: netPipe, kind: id.KindPipe, format: id.FormatCBID, group: "urn:jxta:jxta-NetGroup"},
		{in: strings.ToLower(netPipe), want: netPipe, kind: id.KindPipe, format: id.FormatCBID, group: "urn:jxta:jxta-NetGroup"},
		{in: uuidGroup, kind: id.KindPeerGroup, format: id.FormatUUID},
		{in: netChild, kind: id.KindPeerGroup, format: id.FormatCBID, group: "urn:jxta:jxta-NetGroup"},
		{in: "urn:jxta:cbid-27BE7F4F4F254522BC82EA7ADFA589F4227D18630844AD4DD124D8589256BAB903", kind: id.KindPeer, format: id.FormatCBID, group: cbidGroup},
		{in: "urn:jxta:uuid-7C7138FBC02047C99EC4CFCEC8761377736565640000400080008004", kind: id.KindPipe, format: id.FormatUUID, group: uuidGroup},
		{in: hashCodat, kind: id.KindCodat, format: id.FormatCBID, group: cbidGroup},
		{in: cbidClass, kind: id.KindModuleClass, format: id.FormatCBID},
		{in: cbidRole, kind: id.KindModuleClass, format: id.FormatCBID},
		{in: uuidSpec, kind: id.KindModuleSpec, format: id.FormatUUID},
		{in: content, kind: id.KindContent, format: id.FormatUUID, group: "urn:jxta:uuid-27BE7F4F4F254522BC82EA7ADFA589F402"},
		// JXSE prints cbid content IDs in the uuid format.
		{in: "urn:jxta:cbid-0107", want: "urn:jxta:uuid-0107", kind: id.KindContent, format: id.FormatUUID, group: "urn:jxta:uuid-0102"},
		// Short and padded values: at least one value byte is printed,
		// trailing zero bytes are not.
		{in: "urn:jxta:uuid-02", want: "urn:jxta:uuid-0002", kind: id.KindPeerGroup, format: id.FormatUUID},
		{in: "urn:jxta:uuid-000002", want: "urn:jxta:uuid-0002", kind: id.KindPeerGroup, format: id.FormatUUID},
		{in: "urn:jxta:uuid-0003", kind: id.KindPeer, format: id.FormatUUID, group: "urn:jxta:uuid-0002"},
		{in: "urn:jxta:cbid-AB0000000003", want: "urn:jxta:cbid-AB03", kind: id.KindPeer, format: id.FormatCBID, group: "urn:jxta:cbid-AB02"},
		{in: "urn:jxta:cbid-" + strings.Repeat("FF", 63) + "03", kind: id.KindPeer, format: id.FormatCBID, group: "urn:jxta:cbid-" + strings.Repeat("FF", 16) + "02"},

		// Rejected by JXSE and by Parse.
		{in: "", wantErr: id.ErrSyntax},
		{in: "jxta-NetGroup", wantErr: id.ErrSyntax},
		{in: "urn:jxta", wantErr: id.ErrSyntax},
		{in: "urn:jxta:", wantErr: id.ErrSyntax},
		{in: "urn:x:uuid-02", wantErr: id.ErrSyntax},
		{in: "urn://jxta:jxta-NetGroup", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid", wantErr: id.ErrSyntax},
		{in: "urn:jxta:jxta-Nothing", wantErr: id.ErrSyntax},
		{in: "urn:jxta:jxta-NetGroup/", wantErr: id.ErrSyntax},
		{in: "urn:jxta:jxta-Null ", wantErr: id.ErrSyntax},
		{in: " urn:jxta:jxta-Null", wantErr: id.ErrSyntax},
		{in: "urn:jxta:cbid-XYZ", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid-0G02", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid-0 02", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid-0102?x", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid-", wantErr: id.ErrLength},
		{in: "urn:jxta:uuid-ABC", wantErr: id.ErrLength},
		{in: "urn:jxta:uuid-" + strings.Repeat("00", 64) + "02", wantErr: id.ErrLength},
		{in: "urn:jxta:uuid-0100", wantErr: id.ErrType},
		{in: "urn:jxta:uuid-0108", wantErr: id.ErrType},
		{in: "urn:jxta:cbid-59616261646162614E50472050325033", wantErr: id.ErrType},
		// Accepted by JXSE, rejected by Parse (see the package doc).
		{in: "urn:jxta:foo-01", wantErr: id.ErrFormat},
		{in: "urn:jxta:CBID-0102", wantErr: id.ErrFormat},
		{in: "urn:jxta:JXTA-NetGroup", wantErr: id.ErrFormat},
		{in: "urn:jxta:-x", wantErr: id.ErrFormat},
		{in: "urn:jxta:uuid-%30%32", wantErr: id.ErrSyntax},
		{in: "urn:jxta:jxta-NetGroup#frag", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid-+F02", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid--F02", wantErr: id.ErrSyntax},
		{in: "urn:jxta:uuid-\u0660\u0662", wantErr: id.ErrSyntax},
	}
	for _, tt := range tests {
		got, err := id.Parse(tt.in)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Parse(%q) error = %v, want %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil {
			var pe *id.ParseError
			if !errors.As(err, &pe) || pe.Input != tt.in || pe.Offset < 0 || pe.Offset > len(tt.in) || pe.Reason == "" {
				t.Errorf("Parse(%q) error %#v is not a complete *ParseError", tt.in, err)
			}
			if !got.IsZero() {
				t.Errorf("Parse(%q) failed but returned %v", tt.in, got)
			}
			continue
		}
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if got.String() != want || got.Kind() != tt.kind || got.Format() != tt.format || got.Group().String() != tt.group {
			t.Errorf("Parse(%q) = %v (%v, %v, group %q), want %v (%v, %v, group %q)",
				tt.in, got, got.Kind(), got.Format(), got.Group(), want, tt.kind, tt.format, tt.group)
		}
		if again := id.MustParse(got.String()); again != got {
			t.Errorf("%q re-parses to a different ID %v", got, again)
		}
	}
}

func TestParseErrorOffset(t *testing.T) {
	tests := []struct {
		in      string
		offset  int
		wantErr error
	}{
		{"http://x", 0, id.ErrSyntax},
		{"urn:ietf:x", 4, id.ErrSyntax},
		{"urn:jxta:nodash", 9, id.ErrSyntax},
		{"urn:jxta:uuid4-02", 9, id.ErrFormat},
		{"urn:jxta:jxta-Nothing", 14, id.ErrSyntax},
		{"urn:jxta:uuid-0102g3", 18, id.ErrSyntax},
		{"urn:jxta:cbid-010", 14, id.ErrLength},
		{"urn:jxta:uuid-" + strings.Repeat("00", 65), 14 + 128, id.ErrLength},
		{"urn:jxta:uuid-AABB09", 18, id.ErrType},
	}
	for _, tt := range tests {
		_, err := id.Parse(tt.in)
		var pe *id.ParseError
		if !errors.As(err, &pe) || pe.Offset != tt.offset || !errors.Is(err, tt.wantErr) {
			t.Errorf("Parse(%q) = %v, want a %v at byte %d", tt.in, err, tt.wantErr, tt.offset)
		}
	}
	long := "urn:jxta:uuid-" + strings.Repeat("0", 200) + "x"
	_, err := id.Parse(long)
	if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, "...") {
		t.Errorf("long input not shortened in the message: %s", msg)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustParse accepted garbage")
		}
	}()
	id.MustParse("urn:jxta:garbage")
}

func TestGroupAndBaseClass(t *testing.T) {
	tests := []struct {
		in, group, base string
	}{
		{"urn:jxta:jxta-Null", "", ""},
		{"urn:jxta:jxta-WorldGroup", "", ""},
		{"urn:jxta:jxta-NetGroup", "urn:jxta:jxta-WorldGroup", ""},
		{uuidGroup, "", ""},
		{netChild, "urn:jxta:jxta-NetGroup", ""},
		{"urn:jxta:cbid-8C22BA1CC9C64EDDA754B6C36F764F3059616261646162614A7874615032503302", "urn:jxta:jxta-WorldGroup", ""},
		{"urn:jxta:uuid-8C22BA1CC9C64EDDA754B6C36F764F307C7138FBC02047C99EC4CFCEC876137702", uuidGroup, ""},
		{netPipe, "urn:jxta:jxta-NetGroup", ""},
		{hashCodat, cbidGroup, ""},
		{cbidClass, "", cbidClass},
		{cbidRole, "", cbidClass},
		{uuidSpec, "", "urn:jxta:uuid-DD9AC86B5C3048A58416C6A1B3E94A4A05"},
	}
	for _, tt := range tests {
		x := id.MustParse(tt.in)
		if g := x.Group(); g.String() != tt.group || g.IsZero() != (tt.group == "") {
			t.Errorf("%v.Group() = %q, want %q", x, g, tt.group)
		}
		if b := x.BaseClass(); b.String() != tt.base {
			t.Errorf("%v.BaseClass() = %q, want %q", x, b, tt.base)
		}
	}
	if g := (id.ID{}).Group(); !g.IsZero() {
		t.Errorf("zero ID has group %v", g)
	}
}

func TestZeroID(t *testing.T) {
	var z id.ID
	if !z.IsZero() || z.String() != "" || z.Kind() != id.KindNull || z.Format() != 0 || z == id.NullID {
		t.Errorf("zero ID: %q %v %v, equal to NullID: %v", z, z.Kind(), z.Format(), z == id.NullID)
	}
	for _, x := range []id.ID{id.NullID, id.NetPeerGroupID, id.WorldPeerGroupID, id.MustParse(netPipe)} {
		if x.IsZero() {
			t.Errorf("%v IsZero", x)
		}
	}
}

func TestText(t *testing.T) {
	pipe := id.MustParse(netPipe)
	type doc struct {
		Pipe  id.ID            `json:"pipe"`
		None  id.ID            `json:"none"`
		Peers map[id.ID]string `json:"peers"`
	}
	in := doc{Pipe: pipe, Peers: map[id.ID]string{id.NetPeerGroupID: "net"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"pipe":"` + netPipe + `","none":"","peers":{"urn:jxta:jxta-NetGroup":"net"}}`
	if string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil || out.Pipe != pipe || !out.None.IsZero() || out.Peers[id.NetPeerGroupID] != "net" {
		t.Fatalf("json round trip = %+v, %v", out, err)
	}
	var x id.ID
	if err := x.UnmarshalText([]byte("urn:jxta:uuid-0G02")); !errors.Is(err, id.ErrSyntax) {
		t.Errorf("UnmarshalText of a bad ID: %v", err)
	}
	got, err := pipe.AppendText([]byte("id="))
	if err != nil || string(got) != "id="+netPipe {
		t.Errorf("AppendText = %q, %v", got, err)
	}
}

func TestCompare(t *testing.T) {
	ids := []id.ID{
		id.MustParse(uuidSpec), id.MustParse(netPipe), id.NullID, id.NetPeerGroupID, id.WorldPeerGroupID,
		id.MustParse(cbidGroup), id.MustParse("urn:jxta:cbid-27BE7F4F4F254522BC82EA7ADFA589F403"), id.MustParse(uuidGroup),
		id.MustParse(cbidClass), id.MustParse(cbidRole), {},
	}
	for _, a := range ids {
		for _, b := range ids {
			if c := a.Compare(b); (c == 0) != (a == b) || c != -b.Compare(a) {
				t.Errorf("Compare(%v, %v) = %d, reverse %d", a, b, c, b.Compare(a))
			}
		}
	}
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, id.ID.Compare)
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1].Compare(sorted[i]) >= 0 {
			t.Errorf("not sorted at %d: %v, %v", i, sorted[i-1], sorted[i])
		}
	}
}

func TestKindAndFormatNames(t *testing.T) {
	for k, want := range map[id.Kind]string{id.KindNull: "null", id.KindCodat: "codat", id.KindPeerGroup: "peer group",
		id.KindPeer: "peer", id.KindPipe: "pipe", id.KindModuleClass: "module class", id.KindModuleSpec: "module spec",
		id.KindContent: "content", 9: "Kind(9)"} {
		if k.String() != want {
			t.Errorf("Kind %d prints %q, want %q", uint8(k), k, want)
		}
	}
	for f, want := range map[id.Format]string{id.FormatJXTA: "jxta", id.FormatUUID: "uuid", id.FormatCBID: "cbid", 0: "Format(0)"} {
		if f.String() != want {
			t.Errorf("Format %d prints %q, want %q", uint8(f), f, want)
		}
	}
}
