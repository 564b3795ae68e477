package encoding_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// TestJXSEParsesEncodedMessages: a message whose element was compressed
// and sealed is still a JXTA message JXSE 2.7 reads, with every element's
// namespace, name, MIME type and bytes as sent.
func TestJXSEParsesEncodedMessages(t *testing.T) {
	jxse.Require(t)
	z, err := zstd.New(zstd.WithLevel(9))
	if err != nil {
		t.Fatal(err)
	}
	sl, err := seal.New(seal.WithPSK("team", bytes.Repeat([]byte{7}, seal.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := encoding.New([]encoding.Codec{z, sl}, encoding.WithPipeID("urn:jxta:uuid-0"))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Producer()
	m, err := s.Encode(message.New(message.Text("app", "note", "hello"), p.XML("app", "staff", datasets.Employees(100))))
	if err != nil {
		t.Fatal(err)
	}
	b, err := wire.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// MsgOracle decode: base64 message in, one line of elements out, each
	// ns.name.mime.data in base64.
	out := strings.TrimSpace(string(jxse.Run(t, "MsgOracle", []byte(base64.StdEncoding.EncodeToString(b)+"\n"), "decode")))
	if strings.HasPrefix(out, "ERR") {
		t.Fatalf("JXSE: %s", out)
	}
	var got []string
	for _, el := range strings.Split(out, " ") {
		var parts []string
		for _, f := range strings.Split(el, ".")[:4] {
			v, err := base64.StdEncoding.DecodeString(f)
			if err != nil {
				t.Fatalf("oracle output %q: %v", out, err)
			}
			parts = append(parts, string(v))
		}
		got = append(got, strings.Join(parts, "|"))
	}
	var want []string
	for _, e := range m.Elements() {
		want = append(want, e.Namespace+"|"+e.Name+"|"+e.MIME+"|"+string(e.Data))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("JXSE read %d elements differently from what was sent", len(got))
	}
	if e, _ := m.Get("app", "staff"); !encoding.IsEncoded(e) {
		t.Fatal("the staff element was not encoded")
	}
}
