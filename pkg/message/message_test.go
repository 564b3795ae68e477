package message_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func names(m *message.Message) []string {
	var out []string
	for _, e := range m.All() {
		out = append(out, e.Namespace+":"+e.Name)
	}
	return out
}

func TestMutators(t *testing.T) {
	m := message.New(
		message.Text("", "a", "1"),
		message.Text("jxta", "a", "2"),
		message.Text("", "b", "3"),
		message.Text("", "a", "4"),
	)
	if e, ok := m.Get("", "a"); !ok || string(e.Data) != "1" {
		t.Fatalf("Get = %v, %v", e, ok)
	}
	if _, ok := m.Get("nope", "a"); ok {
		t.Fatal("Get found a missing element")
	}
	old, ok := m.Replace(message.Text("", "a", "new"))
	if !ok || string(old.Data) != "1" {
		t.Fatalf("Replace returned %v, %v", old, ok)
	}
	if got, want := names(m), []string{":a", "jxta:a", ":b"}; !slices.Equal(got, want) {
		t.Fatalf("after Replace: %v, want %v (later duplicates removed, position kept)", got, want)
	}
	if _, ok := m.Replace(message.Text("x", "c", "")); ok {
		t.Fatal("Replace of a missing element reported a replacement")
	}
	if got := names(m); got[len(got)-1] != "x:c" {
		t.Fatalf("Replace of a missing element did not append: %v", got)
	}
	if n := m.Remove("jxta", "a"); n != 1 {
		t.Fatalf("Remove = %d", n)
	}
	var inDefault []string
	for e := range m.Namespace("") {
		inDefault = append(inDefault, e.Name)
	}
	if !slices.Equal(inDefault, []string{"a", "b"}) {
		t.Fatalf("Namespace(\"\") = %v", inDefault)
	}
	if got := m.Namespaces(); !slices.Equal(got, []string{"", "x"}) {
		t.Fatalf("Namespaces = %v", got)
	}
}

// TestCloneSharesData: a clone shares payload bytes but not the list.
func TestCloneSharesData(t *testing.T) {
	data := []byte("payload")
	m := message.New(message.Bytes("", "a", data), message.Bytes("", "b", []byte("other")))
	c := m.Clone()
	c.Set(0, message.Bytes("", "a", []byte("encoded")))
	c.Add(message.Bytes("", "c", nil))
	if string(m.At(0).Data) != "payload" || m.Len() != 2 {
		t.Fatal("mutating the clone changed the original")
	}
	if &c.At(1).Data[0] != &m.At(1).Data[0] {
		t.Fatal("clone copied an untouched element's bytes")
	}
}

func TestEqual(t *testing.T) {
	a := message.New(message.Element{Name: "x", MIME: "", Data: []byte{1}})
	b := message.New(message.Element{Name: "x", MIME: "APPLICATION/octet-stream", Data: []byte{1}})
	if !a.Equal(b) {
		t.Fatal("empty MIME and application/octet-stream should be equal")
	}
	c := message.New(message.Element{Name: "x", MIME: "text/plain", Data: []byte{1}})
	if a.Equal(c) {
		t.Fatal("different MIME types compared equal")
	}
}

func TestCanonicalMIME(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  error
	}{
		{"", message.OctetStream, nil},
		{"text/plain", "text/plain", nil},
		{"Text/Plain", "text/plain", nil},
		{" text/xml ; Charset=\"utf-8\" ", "text/xml;charset=utf-8", nil},
		{"a/b;x=\"a b\"", "a/b;x=\"a b\"", nil},
		{"a/b;x=\"q\\\"\"", "a/b;x=\"q\\\"\"", nil},
		{"a/b (comment) ;y=2", "a/b;y=2", nil},
		{"a/b;x=", "a/b;x=", nil},
		{"foo", "", message.ErrMIME},
		{"a/", "", message.ErrMIME},
		{"/b", "", message.ErrMIME},
		{"a/b;x", "", message.ErrMIME},
		{"a/b;x=\"open", "", message.ErrMIME},
		{"a/b (open", "", message.ErrMIME},
		{"a/b;x=1=2", "", message.ErrMIME},
		{"a/\xff", "", message.ErrMIME},
	}
	for _, tt := range tests {
		got, err := message.CanonicalMIME(tt.in)
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("CanonicalMIME(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCanonicalMIMEFastPathAllocs(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := message.CanonicalMIME(message.TextUTF8); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("canonical input allocated %.0f times", allocs)
	}
}
