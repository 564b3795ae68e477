package zstd_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// A sender compresses the element named "log" with zstd, at the level its
// spec gives; the receiver restores it with the codecs its imports
// registered.
func Example() {
	c, _ := encoding.NewCodec(encoding.Spec{Name: zstd.Name, Level: 19}) // or zstd.New(zstd.WithLevel(19))
	s, _ := encoding.New([]encoding.Codec{c}, encoding.WithSelector(encoding.ByName("log")))
	log := strings.Repeat("GET /index.html 200\n", 100)
	m, _ := s.Encode(message.New(message.Text("", "log", log)))
	e, _ := m.Get("", "log")
	h, _, _ := encoding.ParseHeader(e.Data)
	fmt.Println(e.MIME, h.Spec(), len(e.Data) < len(log)/10)

	d, _ := encoding.NewDecoder() // the default registry, which importing zstd filled
	got, err := d.Decode(m)
	e, _ = got.Get("", "log")
	fmt.Println(e.MIME, string(e.Data) == log, err)
	// Output:
	// application/x-p2pmsg-encoded zstd:19 true
	// text/plain;charset=UTF-8 true <nil>
}

// Decode makes at most max bytes: a scheme passes the size the element's
// header records, and a frame recording more fails with ErrTooLarge before
// it is decoded. The payload must be exactly one frame.
func ExampleCodec_Decode() {
	c, _ := zstd.New()
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

// record is one of many small documents alike in shape, as peers exchange.
func record(i int) []byte {
	return fmt.Appendf(nil, `{"id":%d,"user":"user%d@example.org","status":"active","roles":["reader","writer"],"created":"2026-11-%02dT10:%02d:00Z"}`,
		1000+i, i*7, 1+i%28, i%60)
}

// Peers that exchange small documents alike in shape share a dictionary
// trained on samples of them: a document too small to compress well on its
// own compresses against the dictionary. A receiver needs the same
// dictionary, which the element's header names by its ID.
func ExampleTrainDictionary() {
	var samples [][]byte
	for i := range 50 {
		samples = append(samples, record(i))
	}
	dict, err := zstd.TrainDictionary(7, samples)
	fmt.Println(err)

	sender, _ := zstd.New(zstd.WithEncoderDictionary(dict))
	plain, _ := zstd.New()
	doc := record(1000)
	small, _ := sender.Encode(nil, doc, encoding.Binding{})
	alone, _ := plain.Encode(nil, doc, encoding.Binding{})
	fmt.Println(sender.Params().DictID, len(small) < len(alone)/2)

	receiver, _ := zstd.New(zstd.WithDictionaries(dict))
	got, err := receiver.Decode(nil, small, sender.Params(), encoding.Binding{}, len(doc))
	fmt.Println(bytes.Equal(got, doc), err)
	_, err = plain.Decode(nil, small, sender.Params(), encoding.Binding{}, len(doc))
	fmt.Println(errors.Is(err, encoding.ErrNoDictionary))
	// Output:
	// <nil>
	// 7 true
	// true <nil>
	// true
}

// A spec names a dictionary by its ID (zstd:19@7) among those the factory
// given to NewCodec holds; the default registry's factory holds none.
func ExampleFactory() {
	var samples [][]byte
	for i := range 50 {
		samples = append(samples, record(i))
	}
	dict, _ := zstd.TrainDictionary(7, samples)
	withDicts := encoding.WithFactory(zstd.Name, zstd.Factory(zstd.WithDictionaries(dict)))

	for _, spec := range []string{"zstd:19@7", "zstd@8"} {
		s, _ := encoding.ParseSpec(spec)
		c, err := encoding.NewCodec(s, withDicts)
		if err != nil {
			fmt.Println(spec, errors.Is(err, encoding.ErrNoDictionary))
			continue
		}
		fmt.Printf("%s %+v\n", spec, c.Params())
	}
	s, _ := encoding.ParseSpec("zstd:19@7")
	_, err := encoding.NewCodec(s)
	fmt.Println("default", errors.Is(err, encoding.ErrNoDictionary))
	// Output:
	// zstd:19@7 {Level:19 DictID:7 KeyID:}
	// zstd@8 true
	// default true
}
