package encoding_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func TestUnmark(t *testing.T) {
	e := encoding.Producer{}.XML("ns", "doc", []byte("<a/>"))
	if e.MIME == message.XMLUTF8 {
		t.Fatal("a produced element is not marked")
	}
	u := encoding.Unmark(e)
	if u.MIME != message.XMLUTF8 || u.Name != "doc" || string(u.Data) != "<a/>" {
		t.Fatalf("unmarked: %+v", u)
	}
	if plain := message.Text("", "t", "x"); !encoding.Unmark(plain).Equal(plain) {
		t.Fatal("an unmarked element changed")
	}
}
