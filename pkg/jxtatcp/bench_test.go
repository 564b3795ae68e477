package jxtatcp

import (
	"testing"
)

// BenchmarkSign is the CBJX cost of sending one small message: a
// SHA256withRSA signature with a 2048-bit key (KeyBits).
func BenchmarkSign(b *testing.B) {
	msg := make([]byte, 300)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := testIdent.appendTrailer(nil, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is the CBJX cost of receiving one small message from
// a peer whose certificate the connection has seen before.
func BenchmarkVerify(b *testing.B) {
	msg := make([]byte, 300)
	t, err := testIdent.appendTrailer(nil, msg)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := parseTrailer(t)
	if err != nil {
		b.Fatal(err)
	}
	var v verifier
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.verify(msg, tr); err != nil {
			b.Fatal(err)
		}
	}
}
