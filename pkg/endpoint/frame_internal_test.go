package endpoint

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// FuzzFrameHeader: the header of a frame a peer sends on an endpoint
// stream is read by two paths, parseHeader from the stream's buffer and
// readHeaderSlow from the stream; on any bytes both take the same header
// or both refuse it, and what they take is within the bounds.
func FuzzFrameHeader(f *testing.F) {
	const maxMessage = 1 << 20
	for _, h := range []struct{ service, param string }{{"jxta.pipe", "urn:jxta:uuid-59616261646162614E50472050325033"}, {"s", ""}, {"", ""}} {
		b, _, err := appendFrame(nil, false, h.service, h.param, message.New(message.Text("ns", "e", "hello")))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// A frame repeating the destination: refused as a stream's first.
		if b, _, err = appendFrame(nil, true, h.service, h.param, message.New()); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x80, 0x08}) // a name of 1024 bytes, not there
	f.Add([]byte{0, 0, 0x81, 0x80, 0x40})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		svc := &Service{opts: options{maxMessage: maxMessage}}
		slow := newInStream(svc, &peerIn{}, nil)
		slow.br = bufio.NewReaderSize(bytes.NewReader(data), 64<<10)
		service, param, n, err := slow.readHeaderSlow()
		fast := newInStream(svc, &peerIn{}, nil)
		fService, fParam, fN, hl, ok := fast.parseHeader(data)
		if ok != (err == nil) {
			t.Fatalf("parseHeader ok %v, readHeaderSlow %v", ok, err)
		}
		if !ok {
			return
		}
		if fService != service || fParam != param || fN != n {
			t.Fatalf("parseHeader %q %q %d, readHeaderSlow %q %q %d", fService, fParam, fN, service, param, n)
		}
		if used := len(data) - slow.br.Buffered(); used != hl {
			t.Fatalf("header of %d bytes by parseHeader, %d by readHeaderSlow", hl, used)
		}
		if len(service) > MaxNameLen || len(param) > MaxNameLen || n < 0 || n > maxMessage {
			t.Fatalf("header over the bounds: %d, %d, %d bytes", len(service), len(param), n)
		}
		// The same header again, as the next frame on the stream, and a
		// frame repeating its destination.
		if s2, p2, n2, _, ok := fast.parseHeaderAgain(data); !ok || s2 != service || p2 != param || n2 != n {
			t.Fatalf("the same header read differently the second time")
		}
		if s3, p3, n3, hl3, ok := fast.parseHeader([]byte{0, 5}); !ok || s3 != service || p3 != param || n3 != 5 || hl3 != 2 {
			t.Fatalf("a frame repeating %q %q read as %q %q %d (%v)", service, param, s3, p3, n3, ok)
		}
	})
}

// parseHeaderAgain parses b with the last names remembered, as a stream's
// next frame is.
func (in *inStream) parseHeaderAgain(b []byte) (string, string, int64, int, bool) {
	s, p, _, _, _ := in.parseHeader(b)
	in.service, in.param, in.named = s, p, true
	return in.parseHeader(b)
}

// TestFrameRepeatingDestination: a frame may go where the stream's
// previous frame went without naming it, but not as the stream's first.
func TestFrameRepeatingDestination(t *testing.T) {
	svc := &Service{opts: options{maxMessage: 1 << 20}}
	m := message.New(message.Text("ns", "e", "hello"))
	var stream []byte
	for i, d := range []struct {
		service, param string
		same           bool
	}{{"jxta-pipe", "k1", false}, {"jxta-pipe", "k1", true}, {"jxta-pipe", "k2", false}, {"jxta-pipe", "k2", true}, {"", "", false}, {"", "", true}} {
		var err error
		if stream, _, err = appendFrame(stream, d.same, d.service, d.param, m); err != nil {
			t.Fatal(err)
		}
		in := newInStream(svc, &peerIn{}, nil)
		in.br = bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
		for j := 0; j <= i; j++ {
			service, param, n, err := in.readHeaderSlow()
			if err != nil {
				t.Fatalf("frame %d of %d: %v", j, i, err)
			}
			in.br.Discard(int(n))
			if j == i && (service != d.service || param != d.param) {
				t.Fatalf("frame %d: %q %q, want %q %q", i, service, param, d.service, d.param)
			}
		}
	}
	first, _, _ := appendFrame(nil, true, "s", "p", m)
	in := newInStream(svc, &peerIn{}, nil)
	in.br = bufio.NewReaderSize(bytes.NewReader(first), 64<<10)
	if _, _, _, err := in.readHeaderSlow(); !errors.Is(err, ErrFrame) {
		t.Fatalf("a first frame repeating no destination: %v, want ErrFrame", err)
	}
	if _, _, _, _, ok := in.parseHeader(first); ok {
		t.Fatal("parseHeader took a first frame repeating no destination")
	}
}
