package wire_test

import (
	"bytes"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

func Example() {
	m := message.New(
		message.Text("", "greeting", "hello"),
		message.Bytes("p2pmsg", "blob", []byte{1, 2, 3}),
	)
	var buf bytes.Buffer
	if err := wire.Encode(&buf, m); err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes, starting %q\n", buf.Len(), buf.Bytes()[:4])

	got, err := wire.Decode(&buf)
	if err != nil {
		panic(err)
	}
	for _, e := range got.Elements() {
		fmt.Printf("%q %q %s %q\n", e.Namespace, e.Name, e.Type(), e.Data)
	}
	// Output:
	// 87 bytes, starting "jxmg"
	// "" "greeting" text/plain;charset=UTF-8 "hello"
	// "p2pmsg" "blob" application/octet-stream "\x01\x02\x03"
}
