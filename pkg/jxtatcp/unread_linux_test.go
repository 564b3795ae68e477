package jxtatcp

import (
	"net"
	"testing"
	"time"
)

// unreadBytes sees bytes that arrived and nothing read, and only those.
func TestUnreadBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if unreadBytes(b) {
		t.Fatal("unread bytes before any was sent")
	}
	if _, err := a.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !unreadBytes(b); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the byte sent not seen in 30 s")
		}
	}
	if _, err := b.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if unreadBytes(b) {
		t.Fatal("unread bytes once all were read")
	}
}
