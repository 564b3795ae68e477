package endpoint

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzBackRecord: whatever a receiver writes on the back channel, reading
// it ends in a record or an error, within the bounds; refusals read back
// re-encode to the same bytes.
func FuzzBackRecord(f *testing.F) {
	s := &Service{opts: options{maxMessage: 64 << 20}}
	f.Add(s.hello())
	f.Add(appendRefusal(nil, RefusedNoListener, "jxta.pipe", "urn:jxta:uuid-59616261646162614E504720503250338B7E27AF5B7A4A9BA7C8C1E9E0A2F3C504", ""))
	f.Add(appendRefusal(s.hello(), RefusedByListener, "svc", "", "queue full"))
	f.Add(appendRefusal(s.hello(), RefusedForged, "svc", "p", ""))
	f.Add(append(appendRefusal(nil, RefusedNoListener, "s", "", ""), 'S', 'S'))
	f.Add([]byte{'S'})
	f.Add(append(s.hello(), 'G', 'G'))
	f.Add([]byte{'R', 3, 0, 0, 0})
	f.Add([]byte{'R', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			rec, err := readBackRecord(r)
			if err != nil {
				return
			}
			switch rec.kind {
			case recRefusal:
				if len(rec.service) > MaxNameLen || len(rec.param) > MaxNameLen || len(rec.reason) > MaxReasonLen {
					t.Fatalf("record over the bounds: %d, %d, %d bytes", len(rec.service), len(rec.param), len(rec.reason))
				}
				again := appendRefusal(nil, rec.code, rec.service, rec.param, rec.reason)
				back, err := readBackRecord(bufio.NewReader(bytes.NewReader(again)))
				if err != nil || back != rec {
					t.Fatalf("%+v re-encoded read back as %+v, %v", rec, back, err)
				}
			case recSame, recGoAway: // nothing more to read; the sender checks where they come
			case recHello:
				if rec.version == 0 || rec.max == 0 {
					t.Fatalf("hello %+v accepted", rec)
				}
			default:
				t.Fatalf("record kind %q accepted", rec.kind)
			}
		}
	})
}

// TestRefusalReasonCut: a long reason is cut to MaxReasonLen bytes without
// splitting a character.
func TestRefusalReasonCut(t *testing.T) {
	long := string(bytes.Repeat([]byte("é"), MaxReasonLen)) // two bytes each
	rec, err := readBackRecord(bufio.NewReader(bytes.NewReader(appendRefusal(nil, RefusedByListener, "s", "p", "x"+long))))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.reason) > MaxReasonLen || len(rec.reason) < MaxReasonLen-1 || rec.reason[0] != 'x' {
		t.Fatalf("reason of %d bytes", len(rec.reason))
	}
}
