package message_test

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func Example() {
	m := message.New(
		message.Text("", "greeting", "hello"),
		message.Element{Namespace: "app", Name: "doc", MIME: "Text/XML; Charset=\"UTF-8\"", Data: []byte("<a/>")},
	)
	// A layer that rewrites one element works on a clone: the original and
	// the other elements' bytes are untouched.
	enc := m.Clone()
	enc.Replace(message.Element{Namespace: "app", Name: "doc", MIME: "application/gzip", Data: []byte{0x1f, 0x8b}})

	for _, e := range m.All() {
		fmt.Printf("original %q %q %s\n", e.Namespace, e.Name, e.Type())
	}
	e, _ := enc.Get("app", "doc")
	fmt.Println("clone has", e.Type())
	c, _ := message.CanonicalMIME("Text/XML; Charset=\"UTF-8\"")
	fmt.Println("canonical:", c)
	// Output:
	// original "" "greeting" text/plain;charset=UTF-8
	// original "app" "doc" Text/XML; Charset="UTF-8"
	// clone has application/gzip
	// canonical: text/xml;charset=UTF-8
}
