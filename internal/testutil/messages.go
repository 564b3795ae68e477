// Package testutil holds helpers shared by p2pmsg's tests: deterministic
// message corpora now, loopback nodes later. It is imported only by tests
// and test tools.
package testutil

import (
	"fmt"
	"math/rand/v2"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// MIMETypes lists media types that exercise JXSE's canonicalization:
// defaults, case, parameters, quoting and comments.
var MIMETypes = []string{
	"",
	"application/octet-stream",
	"APPLICATION/OCTET-STREAM",
	"application/octet-stream;x=1",
	"text/plain",
	"text/plain;charset=UTF-8",
	"text/xml;charset=UTF-8",
	"text/xml; charset=\"utf-8\"",
	"Text/HTML; Charset=\"UTF-8\"",
	"application/xml",
	"application/json",
	"image/jpeg",
	"image/png",
	"audio/ogg",
	"video/mp4",
	"multipart/mixed;boundary=\"a b\"",
	"application/vnd.p2pmsg+xml;q=0.5;level=1",
	"text/plain (a comment) ; a=b",
	"a/b;x=\"q\\\"uote\"",
	"application/x-java-serialized-object",
	"text/plain;charset=UTF-8;format=flowed",
}

var nameParts = []string{
	"a", "Name", "element", "x", "données", "名前", "ключ", "😀emoji", "space name", "dot.name",
	"tag:with:colons", "", "jxta", "EndpointSourceAddress", "MessageNumber", "ÆØÅ",
}

var namespaceParts = []string{
	"", "jxta", "p2pmsg", "urn:p2pmsg", "名前空間", "ns", "ns2", "ÿ", "emoji😀", "JXTA", "Jxta",
	"a/b", "x-long-namespace-used-by-someone",
}

// RandomMessage returns a message drawn from r: a mix of empty and
// non-empty elements, non-ASCII names, many namespaces and MIME types, and
// now and then large elements (over 64 KiB) or signatures.
func RandomMessage(r *rand.Rand) *message.Message {
	m := &message.Message{}
	n := r.IntN(8)
	if r.IntN(10) == 0 {
		n = r.IntN(60)
	}
	extraNS := r.IntN(4)
	if r.IntN(8) == 0 {
		extraNS = r.IntN(40)
	}
	for i := 0; i < n; i++ {
		var ns string
		if j := r.IntN(len(namespaceParts) + extraNS); j < len(namespaceParts) {
			ns = namespaceParts[j]
		} else {
			ns = fmt.Sprintf("ns-%d-%s", j, nameParts[r.IntN(len(nameParts))])
		}
		name := nameParts[r.IntN(len(nameParts))]
		if r.IntN(3) == 0 {
			name += fmt.Sprint(r.IntN(100))
		}
		e := message.Element{Namespace: ns, Name: name, MIME: MIMETypes[r.IntN(len(MIMETypes))]}
		switch k := r.IntN(20); {
		case k == 0:
			e.Data = []byte{}
		case k == 1:
			e.Data = RandomBytes(r, 64<<10+1+r.IntN(128<<10))
		default:
			e.Data = RandomBytes(r, r.IntN(300))
		}
		if r.IntN(15) == 0 {
			e.Signature = &message.Element{Namespace: ns, Name: "sig", MIME: "application/x-signature", Data: RandomBytes(r, 20)}
		}
		m.Add(e)
	}
	return m
}

// ManyNamespaces returns a message with n declared namespaces (n <= 253),
// each holding one element, in an order that makes JXSE's HashMap resize.
func ManyNamespaces(n int) *message.Message {
	m := &message.Message{}
	m.AddBytes("", "first", "", []byte("0"))
	for i := 0; i < n; i++ {
		m.AddBytes(fmt.Sprintf("namespace-%03d", i), fmt.Sprintf("e%d", i), "text/plain", []byte(fmt.Sprint(i)))
	}
	m.AddBytes("jxta", "last", "", nil)
	return m
}

// RandomBytes returns n bytes from r.
func RandomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
