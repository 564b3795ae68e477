package wire

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// FuzzAppendPlain holds the one-pass encoder to the planned one: for every
// message it takes, the bytes are the same.
func FuzzAppendPlain(f *testing.F) {
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.bin"))
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m := message.New(message.Element{Name: "d", Data: []byte("hi")},
		message.Element{Namespace: message.JXTANamespace, Name: "EndpointSourceAddress", MIME: message.OctetStream, Data: []byte("x")})
	b, _ := appendPlanned(nil, m)
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Unmarshal(in, WithMaxMessageSize(1<<20))
		if err != nil {
			return
		}
		plain, ok := appendPlain([]byte("pre"), m)
		if !ok {
			return
		}
		planned, err := appendPlanned([]byte("pre"), m)
		if err != nil {
			t.Fatalf("the plain encoder took a message the planned one refuses: %v", err)
		}
		if !bytes.Equal(plain, planned) {
			t.Fatalf("plain %x\nplanned %x", plain, planned)
		}
	})
}
