package jxtatcp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// captureSeeds returns the first bytes of each connection of a capture
// directory (welcome and first frames) and the bodies of its frames.
func captureSeeds(f *testing.F, dir string) (streams, bodies [][]byte) {
	files, _ := filepath.Glob(filepath.Join(captures, dir, "conn*-*to*.bin"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		streams = append(streams, b[:min(len(b), 8<<10)])
		br := bufio.NewReader(bytes.NewReader(b))
		if _, err := readWelcome(br); err != nil {
			continue
		}
		for range 6 {
			n, err := readFrameHeader(br, DefaultMaxMessageSize)
			if err != nil {
				break
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(br, body); err != nil {
				break
			}
			bodies = append(bodies, body)
		}
	}
	return streams, bodies
}

func FuzzParseWelcome(f *testing.F) {
	f.Add("JXTAHELLO tcp://127.0.0.1:19712 tcp://127.0.0.1:19711 urn:jxta:cbid-59616261646162614A787461503250336FB2084AADCB4D00FFC66D584DD14F3A03 0 1.1")
	f.Add("JXTAHELLO tcp://a:1 tcp://b:2 urn:jxta:x 1 7 3.0")
	f.Add("JXTAHELLO tcp://a:1 tcp://b:2 urn:jxta:foo-1234 0 2.0")
	f.Fuzz(func(t *testing.T, line string) {
		w, err := ParseWelcome(line)
		if err != nil {
			if !errors.Is(err, ErrWelcome) {
				t.Fatalf("ParseWelcome(%q): error %v does not wrap ErrWelcome", line, err)
			}
			return
		}
		// What parses re-encodes to a line that parses the same.
		again := w.Append(nil)
		w2, err := ParseWelcome(string(again[:len(again)-2]))
		if err != nil || w2 != w {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", line, w, again, w2, err)
		}
	})
}

// FuzzStream feeds bytes to a connection's reader as a peer would send
// them: welcome, frame headers, bodies, trailers, address and router
// elements. Whatever they are, the reader returns or closes the
// connection, within bounded memory, without panicking.
func FuzzStream(f *testing.F) {
	streams, _ := captureSeeds(f, "all-default")
	for _, s := range streams {
		f.Add(s)
	}
	f.Add([]byte("JXTAHELLO tcp://a:1 tcp://b:2 urn:jxta:x 0 1.1\r\n"))
	tr, err := New(testIdent, func(*Incoming) {}, WithAcceptUnsigned(), WithMaxMessageSize(1<<20))
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		a, z := net.Pipe()
		defer z.Close()
		go func() { io.Copy(io.Discard, z) }()
		c := newConn(tr, a, true)
		c.br = bufio.NewReader(bytes.NewReader(b))
		if _, err := readWelcome(c.br); err != nil {
			c.close(err)
			return
		}
		c.read()
	})
}

// FuzzHandle decodes and checks one frame body: message, CBJX trailer,
// address elements, router element and fingerprint.
func FuzzHandle(f *testing.F) {
	_, bodies := captureSeeds(f, "all-default")
	for _, b := range bodies {
		f.Add(b, true)
	}
	_, bodies = captureSeeds(f, "all-nocbjx")
	for _, b := range bodies {
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, body []byte, require bool) {
		var opts []Option
		if !require {
			opts = append(opts, WithAcceptUnsigned())
		}
		tr, err := New(testIdent, func(in *Incoming) {
			if in.Service == "" || in.Message == nil {
				t.Fatalf("delivered %+v", in)
			}
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		a, z := net.Pipe()
		defer z.Close()
		c := newConn(tr, a, true)
		c.handle(body, nil)
		c.close(nil)
	})
}

func FuzzParseERM(f *testing.F) {
	// JXSE's router elements, from the captures' frames.
	_, bodies := captureSeeds(f, "all-nocbjx")
	for _, b := range bodies {
		if m, err := wire.Decode(bytes.NewReader(b)); err == nil {
			if e, ok := m.Get(message.JXTANamespace, RouterElement); ok {
				f.Add(e.Data)
			}
		}
	}
	f.Add([]byte("<jxta:ERM><Src>jxta://x</Src></jxta:ERM>"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseERM(b)
		if err == nil && (r.service == "" || r.src.IsZero() || r.destPeer.IsZero()) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

// FuzzVerifyFingerprint: whatever a peer sends as a router element's
// fingerprint is refused with ErrSignature or names a peer.
func FuzzVerifyFingerprint(f *testing.F) {
	_, bodies := captureSeeds(f, "all-default")
	for _, b := range bodies {
		if i := bytes.Index(b, []byte("EndpointRouterMsg-fingerprint")); i >= 0 {
			f.Add(b[i+len("EndpointRouterMsg-fingerprint")+4:])
		}
	}
	f.Add([]byte{0, 0, 0, 1, 'x', 0, 0, 0, 1, 'y', 0, 0, 0, 1, 'z'})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := verifyFingerprint(b)
		if err != nil {
			if !errors.Is(err, ErrSignature) {
				t.Fatalf("error %v does not wrap ErrSignature", err)
			}
			return
		}
		if p.Kind() != id.KindPeer {
			t.Fatalf("fingerprint verified for %v, not a peer", p)
		}
	})
}

// FuzzUnmarshalSigned feeds a signing transport what a JXTA peer could put
// in a reliable JxtaBiDiPipe block: a message and a CBJX trailer.
func FuzzUnmarshalSigned(f *testing.F) {
	ident, err := NewIdentity()
	if err != nil {
		f.Fatal(err)
	}
	tr, err := New(ident, func(*Incoming) {})
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Close()
	signed, err := tr.MarshalSigned(message.New(message.Text("study", "text", "bidi message 1")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed)
	f.Add(signed[:len(signed)-1])
	f.Add(signed[:len(signed)-200])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, signer, err := tr.UnmarshalSigned(b)
		if err != nil {
			if !errors.Is(err, ErrFrame) && !errors.Is(err, ErrSignature) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps none of ErrFrame, ErrSignature, ErrTooLarge", err)
			}
			return
		}
		if m == nil || signer.Kind() != id.KindPeer {
			t.Fatalf("accepted a block without a verified signer: %v", signer)
		}
	})
}
