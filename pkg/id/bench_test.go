package id_test

import (
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

var benchIDs = []struct{ name, text string }{
	{"jxta", "urn:jxta:jxta-NetGroup"},
	{"uuid-group", uuidGroup},
	{"cbid-pipe", netPipe},
	{"cbid-codat-hash", hashCodat},
	{"max", "urn:jxta:cbid-" + strings.Repeat("FF", 63) + "03"},
}

func BenchmarkParse(b *testing.B) {
	for _, bb := range benchIDs {
		b.Run(bb.name, func(b *testing.B) {
			want := id.MustParse(bb.text)
			b.SetBytes(int64(len(bb.text)))
			b.ReportAllocs()
			for b.Loop() {
				x, err := id.Parse(bb.text)
				if err != nil || x != want {
					b.Fatalf("Parse = %v, %v", x, err)
				}
			}
		})
	}
}

func BenchmarkString(b *testing.B) {
	for _, bb := range benchIDs {
		b.Run(bb.name, func(b *testing.B) {
			x := id.MustParse(bb.text)
			b.SetBytes(int64(len(bb.text)))
			b.ReportAllocs()
			for b.Loop() {
				if s := x.String(); s != bb.text {
					b.Fatalf("String = %q", s)
				}
			}
		})
	}
}

func BenchmarkAppendText(b *testing.B) {
	x := id.MustParse(netPipe)
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(netPipe)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ := x.AppendText(buf[:0])
		if len(out) != len(netPipe) {
			b.Fatalf("AppendText = %q", out)
		}
	}
}

func BenchmarkPeerIDFromPublicKey(b *testing.B) {
	pub := fixedKey(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := id.PeerIDFromPublicKey(id.NetPeerGroupID, pub); err != nil {
			b.Fatal(err)
		}
	}
}
