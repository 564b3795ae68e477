package s2_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// A sender compresses the element named "log" with S2, at the level its spec
// gives; the receiver restores it with the codecs its imports registered.
func Example() {
	c, _ := encoding.NewCodec(encoding.Spec{Name: s2.Name, Level: 3}) // s2.New() for level 1
	s, _ := encoding.New([]encoding.Codec{c}, encoding.WithSelector(encoding.ByName("log")))
	log := strings.Repeat("GET /index.html 200\n", 100)
	m, _ := s.Encode(message.New(message.Text("", "log", log)))
	e, _ := m.Get("", "log")
	h, _, _ := encoding.ParseHeader(e.Data)
	fmt.Println(e.MIME, h.Spec(), len(e.Data) < len(log)/10)

	d, _ := encoding.NewDecoder() // the default registry, which importing s2 filled
	got, err := d.Decode(m)
	e, _ = got.Get("", "log")
	fmt.Println(e.MIME, string(e.Data) == log, err)
	// Output:
	// application/x-p2pmsg-encoded s2:3 true
	// text/plain;charset=UTF-8 true <nil>
}

// Decode makes at most max bytes: a scheme passes the size the element's
// header records, and a block recording more fails with ErrTooLarge before
// anything is allocated. Bytes after the block are refused too.
func ExampleCodec_Decode() {
	c := s2.New()
	src := make([]byte, 1<<20) // 1 MiB of zeros
	enc, _ := c.Encode(nil, src, encoding.Binding{})
	dec, err := c.Decode(nil, enc, c.Params(), encoding.Binding{}, len(src))
	fmt.Println(len(enc) < len(src)/100, bytes.Equal(dec, src), err)

	_, err = c.Decode(nil, enc, c.Params(), encoding.Binding{}, 64<<10)
	fmt.Println(errors.Is(err, encoding.ErrTooLarge))

	_, err = c.Decode(nil, append(enc, enc...), c.Params(), encoding.Binding{}, 2*len(src))
	fmt.Println(errors.Is(err, encoding.ErrCorrupt))
	// Output:
	// true true <nil>
	// true
	// true
}
