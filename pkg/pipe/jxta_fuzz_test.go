package pipe

import (
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// jxseQuery is a resolver query as JXSE 2.7 writes it (wire study,
// all-nocbjx), its credential left out.
const jxseQuery = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE jxta:ResolverQuery>
<jxta:ResolverQuery xmlns:jxta="http://jxta.org">
	<HandlerName>
		JxtaPipeResolver
	</HandlerName>
	<QueryID>
		0
	</QueryID>
	<HC>
		0
	</HC>
	<SrcPeerID>
		urn:jxta:cbid-59616261646162614A787461503250336FB2084AADCB4D00FFC66D584DD14F3A03
	</SrcPeerID>
	<Query>
		&lt;?xml version="1.0" encoding="UTF-8"?>
&lt;!DOCTYPE jxta:PipeResolver>
&lt;jxta:PipeResolver xmlns:jxta="http://jxta.org">
	&lt;MsgType>
		Query
	&lt;/MsgType>
	&lt;PipeId>
		urn:jxta:cbid-59616261646162614E5047205032503331E83A03D56945ABBE20C5A487C20B9E04
	&lt;/PipeId>
	&lt;Type>
		JxtaUnicast
	&lt;/Type>
	&lt;Peer>
		urn:jxta:cbid-59616261646162614A78746150325033D3F7B6D192EB7503F4EE0B485B49CD4D03
	&lt;/Peer>
&lt;/jxta:PipeResolver>
	</Query>
</jxta:ResolverQuery>
`

func TestParseJXSEQuery(t *testing.T) {
	q, err := parsePBPQuery([]byte(jxseQuery))
	if err != nil {
		t.Fatal(err)
	}
	if q.typ != "JxtaUnicast" || !q.directed || len(q.peers) != 1 || q.pipe.Kind() != id.KindPipe || q.src.Kind() != id.KindPeer {
		t.Fatalf("%+v", q)
	}
}

// seedDocs are this package's own query and answer documents.
func seedDocs(f *testing.F) (query, answer []byte) {
	pid, _ := id.PipeIDFromSeed(id.NetPeerGroupID, []byte("fuzz"))
	self, _ := id.Parse("urn:jxta:cbid-59616261646162614A78746150325033D3F7B6D192EB7503F4EE0B485B49CD4D03")
	r := &jxtaResolver{self: self}
	a := &adv.PipeAdvertisement{ID: pid, Type: adv.Unicast}
	get := func(m *message.Message, name string) []byte {
		e, _ := m.Get(message.JXTANamespace, name)
		return e.Data
	}
	q := get(r.queryMessage(7, a), jxtaQueryParam)
	pdoc, pr := newDoc("PipeResolver")
	pr.CreateElement("MsgType").SetText("Answer")
	pr.CreateElement("PipeId").SetText(pid.String())
	pr.CreateElement("Type").SetText("JxtaUnicast")
	pr.CreateElement("Peer").SetText(self.String())
	pr.CreateElement("Found").SetText("true")
	doc, rr := newDoc("ResolverResponse")
	rr.CreateElement("HandlerName").SetText(jxtaPipeHandler)
	rr.CreateElement("QueryID").SetText("7")
	rr.CreateElement("Response").SetText(string(docBytes(pdoc)))
	return q, docBytes(doc)
}

// FuzzParsePBPQuery: a pipe binding query a JXTA peer sends is refused
// or read within the bounds, and the query it names, written as this
// package writes queries, reads back the same.
func FuzzParsePBPQuery(f *testing.F) {
	q, _ := seedDocs(f)
	f.Add(q)
	f.Add([]byte(jxseQuery))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parsePBPQuery(b)
		if err != nil {
			return
		}
		if q.pipe.Kind() != id.KindPipe || q.src.Kind() != id.KindPeer || len(q.peers) > 64 {
			t.Fatalf("accepted %+v", q)
		}
		r := &jxtaResolver{self: q.src}
		e, _ := r.queryMessage(q.qid, &adv.PipeAdvertisement{ID: q.pipe, Type: adv.PipeType(q.typ)}).Get(message.JXTANamespace, jxtaQueryParam)
		if len(e.Data) > maxJXTADoc {
			return // the type, escaped twice, takes more room than it did
		}
		back, err := parsePBPQuery(e.Data)
		if err != nil || back.qid != q.qid || back.src != q.src || back.pipe != q.pipe || back.typ != q.typ || back.directed {
			t.Fatalf("query %+v written again read back as %+v, %v", q, back, err)
		}
	})
}

func FuzzParsePBPAnswer(f *testing.F) {
	_, a := seedDocs(f)
	f.Add(a)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, a, err := parsePBPAnswer(b)
		if err == nil && (a.pipe.Kind() != id.KindPipe || a.peer.Kind() != id.KindPeer) {
			t.Fatalf("accepted %+v", a)
		}
	})
}

// TestResolverDocumentsBounded: a resolver document over 64 KiB is
// refused before it is parsed, however valid.
func TestResolverDocumentsBounded(t *testing.T) {
	big := strings.Replace(jxseQuery, "</HandlerName>", "</HandlerName><Pad>"+strings.Repeat("x", maxJXTADoc)+"</Pad>", 1)
	if _, err := parsePBPQuery([]byte(big)); err == nil {
		t.Fatal("a 64 KiB resolver query was parsed")
	}
	if _, err := parsePBPQuery([]byte(jxseQuery)); err != nil {
		t.Fatal(err)
	}
}

// jxsePA is a JXSE peer advertisement as it travels in remPeer (wire
// study, all-default), its route and services left out.
const jxsePA = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE jxta:PA>
<jxta:PA xml:space="preserve" xmlns:jxta="http://jxta.org">
	<PID>urn:jxta:cbid-59616261646162614A787461503250336FB2084AADCB4D00FFC66D584DD14F3A03</PID>
	<GID>urn:jxta:jxta-NetGroup</GID>
	<Name>A</Name>
</jxta:PA>`

// FuzzParseJXTAHandshake feeds the JxtaBiDiPipe and JxtaSocket handshake
// parser what a JXTA peer could put in reqPipe and remPeer.
func FuzzParseJXTAHandshake(f *testing.F) {
	a, err := adv.New(adv.Unicast, "study-socket.remote", "")
	if err != nil {
		f.Fatal(err)
	}
	pa, _ := a.Marshal()
	f.Add(pa, []byte(jxsePA), "true")
	f.Add([]byte("<jxta:PipeAdvertisement/>"), []byte("<jxta:PA><PID>urn:jxta:jxta-NetGroup</PID></jxta:PA>"), "false")
	f.Add([]byte{}, []byte("<!DOCTYPE x [<!ENTITY a 'b'>]><jxta:PA>&a;</jxta:PA>"), "")
	f.Fuzz(func(t *testing.T, pipeDoc, peerDoc []byte, reliable string) {
		m := message.New(
			message.Element{Namespace: "JXTASOC", Name: "reqPipe", MIME: message.XMLUTF8, Data: pipeDoc},
			message.Element{Namespace: "JXTASOC", Name: "remPeer", MIME: message.XMLUTF8, Data: peerDoc},
			message.Text("JXTASOC", "stream", reliable))
		h, err := ParseJXTAHandshake(m, "JXTASOC", "reqPipe", "stream")
		if err != nil {
			return
		}
		if h.Pipe == nil || h.Pipe.Type != adv.Unicast || h.Peer.Kind() != id.KindPeer {
			t.Fatalf("accepted %+v", h)
		}
	})
}

// FuzzParseJXTAPeerAdv feeds the peer advertisement reader what a JXTA
// peer could send as one; an accepted advertisement names a peer, and
// one written with that peer ID reads back the same.
func FuzzParseJXTAPeerAdv(f *testing.F) {
	f.Add([]byte(jxsePA))
	f.Add([]byte("<jxta:PA><PID>urn:jxta:jxta-NetGroup</PID></jxta:PA>"))
	f.Add([]byte("<jxta:PA><PID></PID><PID>x</PID></jxta:PA>"))
	f.Add([]byte("<!DOCTYPE x [<!ENTITY a 'b'>]><jxta:PA>&a;</jxta:PA>"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := ParseJXTAPeerAdv(doc)
		if err != nil {
			return
		}
		if p.Kind() != id.KindPeer {
			t.Fatalf("accepted %v, not a peer ID", p)
		}
		d, pa := newDoc("PA")
		pa.CreateElement("PID").SetText(p.String())
		if q, err := ParseJXTAPeerAdv(docBytes(d)); err != nil || q != p {
			t.Fatalf("%v written, %v, %v read back", p, q, err)
		}
	})
}
