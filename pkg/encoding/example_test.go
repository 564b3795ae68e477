package encoding_test

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func Example() {
	z, _ := zstd.New(zstd.WithLevel(3))
	s, _ := encoding.New([]encoding.Codec{z})

	// Elements made through the producer are encoded; the others are not.
	p := s.Producer()
	m := message.New(
		message.Text("", "greeting", "hello"),
		p.XML("", "staff", datasets.Employees(1000)),
	)
	enc, _ := s.Encode(m)
	for _, e := range enc.All() {
		fmt.Println(e.Name, e.MIME, encoding.IsEncoded(e))
	}

	// The receiver needs only the codec registered (zstd registers itself).
	d, _ := encoding.NewDecoder()
	dec, _ := d.Decode(enc)
	staff, _ := dec.Get("", "staff")
	fmt.Println(staff.MIME, len(staff.Data))
	// Output:
	// greeting text/plain;charset=UTF-8 false
	// staff application/x-p2pmsg-encoded true
	// text/xml;charset=UTF-8 172124
}
