package adaptive_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

const timedPipe = "urn:jxta:uuid-59616261646162614E50472050325033C0FFEE04"

// elementHeader is an encoded element's header, written by hand as a
// hostile peer would (package encoding's doc gives the layout).
func elementHeader(codec string, p encoding.Params, mime string, size int) []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	h := str([]byte("P2E\x01"), codec)
	h = binary.AppendVarint(h, int64(p.Level))
	h = binary.AppendUvarint(h, uint64(p.DictID))
	h = str(str(h, p.KeyID), mime)
	return binary.AppendUvarint(h, uint64(size))
}

// TestRefusedDecodesTeachNothing: a decode whose element the encoding
// layer refuses is not timed into the profile a receiver serves its
// senders. A zstd frame that does not record its content size decoded its
// 128 KiB without error, so its time was recorded, although the header
// claimed 16 MiB and the element was refused: a hostile peer chose what
// the profile said of zstd (up to ten times its real decode time). Neither
// that element nor one sealed around it teaches anything now; an element
// accepted teaches both its layers.
func TestRefusedDecodesTeachNothing(t *testing.T) {
	var zbuf bytes.Buffer
	zw, _ := kzstd.NewWriter(&zbuf) // streaming: no content size in the frame
	zw.Write(bytes.Repeat([]byte("p2pmsg "), 128<<10/7))
	zw.Close()
	z, _ := zstd.New()
	key := bytes.Repeat([]byte{7}, seal.KeySize)
	sl, _ := seal.New(seal.WithPSK("k", key))
	lying := append(elementHeader(zstd.Name, z.Params(), "text/plain", 16<<20-1), zbuf.Bytes()...)
	// The same element sealed: its seal layer decodes, its zstd layer is
	// refused.
	b := encoding.Binding{Name: "e", PipeID: timedPipe}
	b.Header = elementHeader(seal.Name, sl.Params(), encoding.MIME, len(lying))
	sealed, err := sl.Encode(bytes.Clone(b.Header), lying, b)
	if err != nil {
		t.Fatal(err)
	}
	models := adaptive.NewModels()
	receiver, _ := seal.New(seal.WithPSK("k", key))
	dec, err := encoding.NewDecoder(encoding.WithRegistry(mustRegistry(z, receiver)), encoding.WithPipeID(timedPipe),
		models.TimeDecodes())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"zstd": lying, "sealed zstd": sealed} {
		_, err := dec.Decode(message.New(message.Element{Name: "e", MIME: encoding.MIME, Data: data}))
		var ee *encoding.ElementError
		if !errors.As(err, &ee) || ee.Codec != zstd.Name || !errors.Is(err, encoding.ErrCorrupt) {
			t.Fatalf("%s: %v, want its zstd layer refused (ErrCorrupt)", name, err)
		}
		if c := models.Profile().Codecs(); len(c) != 0 {
			t.Fatalf("after a refused %s element the profile knows %v, want nothing", name, c)
		}
	}
	honest, err := encoding.New([]encoding.Codec{z, sl}, encoding.WithPipeID(timedPipe), encoding.WithSelector(encoding.ByName("e")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := honest.Encode(message.New(message.Text("", "e", "hello, hello, hello")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Decode(m); err != nil {
		t.Fatal(err)
	}
	if c := models.Profile().Codecs(); !slices.Equal(c, []string{seal.Name, zstd.Name}) {
		t.Fatalf("after an accepted sealed zstd element the profile knows %v, want both", c)
	}
}
