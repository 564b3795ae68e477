package id_test

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// fixedKey returns a deterministic libp2p Ed25519 key.
func fixedKey(t testing.TB, b byte) crypto.PubKey {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{b}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestPeerIDFromPublicKey(t *testing.T) {
	pub := fixedKey(t, 1)
	raw, err := crypto.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(raw)
	for _, g := range []id.ID{id.NetPeerGroupID, id.WorldPeerGroupID, id.MustParse(cbidGroup), id.MustParse(netChild), id.MustParse(uuidGroup)} {
		pid, err := id.PeerIDFromPublicKey(g, pub)
		if err != nil {
			t.Fatal(err)
		}
		// The rule: cbid-<group UUID><SHA-1(key)[:16]>03 ...
		gs := g.String()
		guuid := gs[len("urn:jxta:cbid-") : len(gs)-2]
		switch g {
		case id.NetPeerGroupID:
			guuid = hex.EncodeToString([]byte("YabadabaNPG P2P3"))
		case id.WorldPeerGroupID:
			guuid = hex.EncodeToString([]byte("YabadabaJxtaP2P3"))
		}
		want := "urn:jxta:cbid-" + guuid[:32] + hex.EncodeToString(sum[:16]) + "03"
		if !bytes.EqualFold([]byte(pid.String()), []byte(want)) {
			t.Errorf("in %v: %v, want %v", g, pid, want)
		}
		// ... which is JXSE's seeded cbid peer ID.
		if seeded, _ := id.PeerIDFromSeed(g, raw); g.Format() != id.FormatUUID && seeded != pid {
			t.Errorf("in %v: %v, seeded with the key %v", g, pid, seeded)
		}
		if pid.Kind() != id.KindPeer || pid.Format() != id.FormatCBID {
			t.Errorf("in %v: %v is a %v %v ID", g, pid, pid.Format(), pid.Kind())
		}
		if err := id.VerifyPeerID(pid, pub); err != nil {
			t.Errorf("own key rejected: %v", err)
		}
	}
	// A uuid group's peers get the cbid group of the same UUID.
	ug := id.MustParse(uuidGroup)
	pid, _ := id.PeerIDFromPublicKey(ug, pub)
	if want := "urn:jxta:cbid" + uuidGroup[len("urn:jxta:uuid"):]; pid.Group().String() != want {
		t.Errorf("peer in %v has group %v, want %v", ug, pid.Group(), want)
	}
}

func TestVerifyPeerID(t *testing.T) {
	pub, other := fixedKey(t, 1), fixedKey(t, 2)
	pid, err := id.PeerIDFromPublicKey(id.NetPeerGroupID, pub)
	if err != nil {
		t.Fatal(err)
	}
	seeded, _ := id.PeerIDFromSeed(id.NetPeerGroupID, []byte("not a key"))
	padded := id.MustParse(pid.String()[:len(pid.String())-2] + "0103") // an extra byte after the UUID
	uuidPeer := id.MustParse("urn:jxta:uuid" + pid.String()[len("urn:jxta:cbid"):])
	tests := []struct {
		name    string
		id      id.ID
		pub     crypto.PubKey
		wantErr error
	}{
		{"own key", pid, pub, nil},
		{"another key", pid, other, id.ErrMismatch},
		{"a seeded ID", seeded, pub, id.ErrMismatch},
		{"trailing bytes", padded, pub, id.ErrMismatch},
		{"uuid format", uuidPeer, pub, id.ErrKind},
		{"a group ID", id.NetPeerGroupID, pub, id.ErrKind},
		{"the zero ID", id.ID{}, pub, id.ErrKind},
		{"nil key", pid, nil, id.ErrKey},
	}
	for _, tt := range tests {
		if err := id.VerifyPeerID(tt.id, tt.pub); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: VerifyPeerID(%v) = %v, want %v", tt.name, tt.id, err, tt.wantErr)
		}
	}
	if _, err := id.PeerIDFromPublicKey(id.NetPeerGroupID, nil); !errors.Is(err, id.ErrKey) {
		t.Errorf("nil key: %v", err)
	}
	if _, err := id.PeerIDFromPublicKey(pid, pub); !errors.Is(err, id.ErrKind) {
		t.Errorf("peer ID as group: %v", err)
	}
}

// TestPeerIDFromSPKI derives the peer IDs of the two JXSE peers of the
// JXTA wire study from their certificates (../shared/jxta/captures).
func TestPeerIDFromSPKI(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "jxta", "captures", "all-default")
	for _, p := range []string{"A", "B"} {
		der, err := os.ReadFile(filepath.Join(dir, p+".cert.der"))
		if err != nil {
			t.Skipf("captures not beside the project: %v", err)
		}
		want, err := os.ReadFile(filepath.Join(dir, p+".peerid"))
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if got := id.PeerIDFromSPKI(cert.RawSubjectPublicKeyInfo).String(); got != strings.TrimSpace(string(want)) {
			t.Errorf("peer %s: %s, JXSE says %s", p, got, want)
		}
	}
}
