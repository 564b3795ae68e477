package id_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in, want string
		kind     id.Kind
		group    string
		wantErr  error
	}{
		{"urn:jxta:jxta-NetGroup", "urn:jxta:jxta-NetGroup", id.KindPeerGroup, "urn:jxta:jxta-WorldGroup", nil},
		{"URN:JXTA:jxta-netgroup", "urn:jxta:jxta-NetGroup", id.KindPeerGroup, "urn:jxta:jxta-WorldGroup", nil},
		{"urn:jxta:jxta-Null", "urn:jxta:jxta-Null", id.KindNull, "urn:jxta:jxta-Null", nil},
		{"urn:jxta:cbid-59616261646162614e50472050325033eb4f5b5183454c03b3fbb0e378148f9d04",
			"urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04", id.KindPipe, "urn:jxta:jxta-NetGroup", nil},
		{"urn:jxta:uuid-0B0D6F76A95942AB81E9E1145C83D3F602", "urn:jxta:uuid-0B0D6F76A95942AB81E9E1145C83D3F602", id.KindPeerGroup, "urn:jxta:jxta-Null", nil},
		{"urn:jxta:uuid-0B0D6F76A95942AB81E9E1145C83D3F6A82BB0EEC81045C1A37CCE4DF09BD4B203",
			"urn:jxta:uuid-0B0D6F76A95942AB81E9E1145C83D3F6A82BB0EEC81045C1A37CCE4DF09BD4B203", id.KindPeer, "urn:jxta:uuid-0B0D6F76A95942AB81E9E1145C83D3F602", nil},
		{"urn:jxta:uuid-02", "urn:jxta:uuid-0002", id.KindPeerGroup, "urn:jxta:jxta-Null", nil},
		{"urn:jxta:cbid-E45D464D035642B78FD5C7397F61B0BE05", "urn:jxta:cbid-E45D464D035642B78FD5C7397F61B0BE05", id.KindModuleClass, "urn:jxta:jxta-Null", nil},
		{"", "", 0, "", id.ErrSyntax},
		{"jxta-NetGroup", "", 0, "", id.ErrSyntax},
		{"urn:jxta:", "", 0, "", id.ErrSyntax},
		{"urn:jxta:jxta-Nothing", "", 0, "", id.ErrSyntax},
		{"urn:jxta:foo-01", "", 0, "", id.ErrFormat},
		{"urn:jxta:CBID-0102", "", 0, "", id.ErrFormat},
		{"urn:jxta:uuid-ABC", "", 0, "", id.ErrSyntax},
		{"urn:jxta:uuid-zz02", "", 0, "", id.ErrSyntax},
		{"urn:jxta:uuid-0B0D00", "", 0, "", id.ErrSyntax},
		{"urn:jxta:uuid-0107", "", 0, "", id.ErrSyntax},
		{"urn:jxta:uuid-" + strings.Repeat("00", 64) + "02", "", 0, "", id.ErrSyntax},
	}
	for _, tt := range tests {
		got, err := id.Parse(tt.in)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Parse(%q) error %v, want %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil {
			var pe *id.ParseError
			if !errors.As(err, &pe) {
				t.Errorf("Parse(%q): error %T is not a *ParseError", tt.in, err)
			}
			continue
		}
		if got.String() != tt.want || got.Kind() != tt.kind || got.Group().String() != tt.group {
			t.Errorf("Parse(%q) = %v (%v, group %v), want %v (%v, group %v)", tt.in, got, got.Kind(), got.Group(), tt.want, tt.kind, tt.group)
		}
	}
}

func TestNewAndSeeded(t *testing.T) {
	p, err := id.NewPipeID(id.NetPeerGroupID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind() != id.KindPipe || p.Format() != id.FormatCBID || p.Group() != id.NetPeerGroupID {
		t.Fatalf("NewPipeID = %v", p)
	}
	q, _ := id.NewPipeID(id.NetPeerGroupID)
	if p == q {
		t.Fatal("two new pipe IDs are equal")
	}
	// Vectors written by JXSE 2.7: newPipeID/newPeerID(NetGroup, "seed").
	sp, _ := id.PipeIDFromSeed(id.NetPeerGroupID, []byte("seed"))
	if want := "urn:jxta:cbid-59616261646162614E5047205032503392713D47093741118F31F2A71986C41104"; sp.String() != want {
		t.Errorf("PipeIDFromSeed = %v, JXSE %v", sp, want)
	}
	g := id.NewPeerGroupID()
	if _, err := id.NewPipeID(p); !errors.Is(err, id.ErrKind) {
		t.Errorf("a pipe ID accepted as a group: %v", err)
	}
	child, _ := id.PeerIDFromSeed(g, []byte("x"))
	if child.Group() != g {
		t.Errorf("peer in %v reports group %v", g, child.Group())
	}
	var m = map[id.ID]bool{p: true}
	if !m[id.MustParse(p.String())] {
		t.Error("a re-parsed ID is not the same map key")
	}
}

func TestPeerIDFromPublicKey(t *testing.T) {
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, other, _ := crypto.GenerateEd25519Key(nil)
	pid, err := id.PeerIDFromPublicKey(id.NetPeerGroupID, pub)
	if err != nil {
		t.Fatal(err)
	}
	if pid.Kind() != id.KindPeer || pid.Group() != id.NetPeerGroupID {
		t.Fatalf("peer ID %v", pid)
	}
	if err := id.VerifyPeerID(pid, pub); err != nil {
		t.Fatalf("own key rejected: %v", err)
	}
	if err := id.VerifyPeerID(pid, other); !errors.Is(err, id.ErrMismatch) {
		t.Fatalf("another key accepted: %v", err)
	}
	if err := id.VerifyPeerID(id.NetPeerGroupID, pub); !errors.Is(err, id.ErrKind) {
		t.Fatalf("group ID accepted as peer ID: %v", err)
	}
}

func TestText(t *testing.T) {
	var x id.ID
	if err := x.UnmarshalText([]byte("urn:jxta:jxta-WorldGroup")); err != nil || x != id.WorldPeerGroupID {
		t.Fatalf("UnmarshalText = %v, %v", x, err)
	}
	if _, err := (id.ID{}).MarshalText(); err == nil {
		t.Fatal("zero ID marshalled")
	}
}
