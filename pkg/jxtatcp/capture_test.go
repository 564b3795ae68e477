package jxtatcp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// captures is the JXTA wire study's captures beside the project.
var captures = filepath.Join("..", "..", "..", "shared", "jxta", "captures")

// requireCaptures skips without the captures, except under CI.
func requireCaptures(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(captures); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("JXTA captures missing under CI: %v", err)
		}
		t.Skipf("JXTA captures missing: %v", err)
	}
}

// TestCapturesDecode reads every connection of the captures between JXSE
// peers (and the study's Python peers) as this transport reads them:
// welcome, frames, messages, address elements, and with signing on every
// CBJX trailer verified and its signer the welcome's peer.
func TestCapturesDecode(t *testing.T) {
	requireCaptures(t)
	for _, tc := range []struct {
		dir    string
		signed bool
	}{
		{"all-default", true}, {"all-nocbjx", false}, {"variants", true},
		{"py-default", true}, {"pyserve-default", true}, {"py-nocbjx", false},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join(captures, tc.dir, "conn*-*to*.bin"))
			if len(files) == 0 {
				t.Fatal("no connections")
			}
			frames, fps := 0, 0
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				n, k := decodeCapture(t, filepath.Base(f), b, tc.signed)
				frames, fps = frames+n, fps+k
			}
			if frames == 0 || tc.dir == "all-default" && fps == 0 {
				t.Fatalf("%d frames, %d router fingerprints", frames, fps)
			}
			t.Logf("%d connections, %d frames, %d router fingerprints verified", len(files), frames, fps)
		})
	}
}

func decodeCapture(t *testing.T, name string, b []byte, signed bool) (frames, fingerprints int) {
	br := bufio.NewReader(bytes.NewReader(b))
	w, err := readWelcome(br)
	if err != nil {
		t.Fatalf("%s: welcome: %v", name, err)
	}
	peer, err := id.Parse(w.Peer)
	if err != nil {
		t.Fatalf("%s: welcome peer: %v", name, err)
	}
	var v verifier
	n, fingerprints := 0, 0
	for {
		l, err := readFrameHeader(br, DefaultMaxMessageSize)
		if errors.Is(err, io.EOF) {
			return n, fingerprints
		}
		if err != nil {
			t.Fatalf("%s frame %d: %v", name, n, err)
		}
		body := make([]byte, l)
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatalf("%s frame %d: %v", name, n, err)
		}
		r := bytes.NewReader(body)
		m, err := wire.Decode(r)
		if err != nil {
			t.Fatalf("%s frame %d: %v", name, n, err)
		}
		msg := body[:len(body)-r.Len()]
		if signed {
			tr, err := parseTrailer(body[len(msg):])
			if err != nil {
				t.Fatalf("%s frame %d: %v", name, n, err)
			}
			signer, err := v.verify(msg, tr)
			if err != nil {
				t.Fatalf("%s frame %d: %v", name, n, err)
			}
			if signer != peer {
				t.Fatalf("%s frame %d: signed by %v, welcome says %v", name, n, signer, peer)
			}
			// Any change to the message breaks the signature.
			bad := bytes.Clone(msg)
			bad[len(bad)-1] ^= 1
			if _, err := v.verify(bad, tr); !errors.Is(err, ErrSignature) {
				t.Fatalf("%s frame %d: altered message verified: %v", name, n, err)
			}
		} else if r.Len() != 0 {
			t.Fatalf("%s frame %d: %d bytes after an unsigned message", name, n, r.Len())
		}
		// Every message carries the address elements; its source is the
		// welcome's peer.
		src, ok := textOf(m, SourceElement)
		if !ok {
			t.Fatalf("%s frame %d: no source address", name, n)
		}
		if p, err := parsePeerAddress(src); err != nil || p != peer {
			t.Fatalf("%s frame %d: source %q (%v), welcome %v", name, n, src, err, peer)
		}
		dst, ok := textOf(m, DestinationElement)
		if !ok {
			t.Fatalf("%s frame %d: no destination", name, n)
		}
		_, _, svc, param, err := splitAddress(dst)
		if err != nil {
			t.Fatal(err)
		}
		svc, param, ok = unmangle(svc, param)
		if !ok {
			t.Fatalf("%s frame %d: destination %q not in the net group", name, n, dst)
		}
		if svc == RouterService {
			el, ok := m.Get(message.JXTANamespace, RouterElement)
			if !ok {
				t.Fatalf("%s frame %d: router message without its element", name, n)
			}
			r, err := parseERM(el.Data)
			if err != nil {
				t.Fatalf("%s frame %d: %v", name, n, err)
			}
			if r.src != peer || r.service == "" {
				t.Fatalf("%s frame %d: router element %+v", name, n, r)
			}
			_ = param
			if fp, ok := m.Get(message.JXTANamespace, FingerprintElement); ok {
				p, err := verifyFingerprint(fp.Data)
				if err != nil || p != peer {
					t.Fatalf("%s frame %d: fingerprint %v %v", name, n, p, err)
				}
				fingerprints++
			}
		}
		// The message re-encodes to the bytes JXSE signed.
		again, err := wire.Marshal(m)
		if err != nil || !bytes.Equal(again, msg) {
			t.Fatalf("%s frame %d: re-encoding differs (%v)", name, n, err)
		}
		n++
	}
}

// TestWelcomeRoundTrip parses what Append writes, and JXSE's welcome.
func TestWelcomeRoundTrip(t *testing.T) {
	requireCaptures(t)
	b, err := os.ReadFile(filepath.Join(captures, "all-nocbjx", "conn01-AtoB.bin"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\r\n")
	w, err := ParseWelcome(line)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(w.Append(nil)); got != line+"\r\n" {
		t.Fatalf("re-encoded %q, JXSE wrote %q", got, line)
	}
}
