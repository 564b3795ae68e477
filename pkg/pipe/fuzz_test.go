package pipe

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

func FuzzBidiParam(f *testing.F) {
	for _, s := range []string{"c/KEY/conn", "d/abc", "x/abc", "a/abc", "r/abc", "c//x", "c/k/", "d/", "q/abc", "d/a/b", "", "d", "c/k/" + strings.Repeat("z", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, key, conn, ok := parseBidiParam(s)
		if !ok {
			return
		}
		if conn == "" || len(conn) > maxConnID || strings.Contains(conn, "/") {
			t.Fatalf("%q gave connection %q", s, conn)
		}
		want := string(op) + "/" + conn
		if op == opConnect {
			want = string(op) + "/" + key + "/" + conn
		}
		if want != s {
			t.Fatalf("%q parsed as %c %q %q", s, op, key, conn)
		}
	})
}

func FuzzQuery(f *testing.F) {
	p, _ := id.NewPipeID(id.NetPeerGroupID)
	good, _ := wire.Marshal(message.New(message.Text(message.JXTANamespace, "PipeId", p.String()), message.Text(message.JXTANamespace, "Role", RoleInput)))
	notPipe, _ := wire.Marshal(message.New(message.Text(message.JXTANamespace, "PipeId", id.NetPeerGroupID.String()), message.Text(message.JXTANamespace, "Role", RoleBidi)))
	f.Add(good)
	f.Add(notPipe)
	f.Add(good[:len(good)/2])
	f.Add([]byte("jxmg"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wire.Unmarshal(b, wire.WithMaxMessageSize(maxQuerySize))
		if err != nil {
			return
		}
		pipe, role, err := parseQuery(m)
		if err != nil {
			if !errors.Is(err, ErrQuery) {
				t.Fatalf("error %v does not wrap ErrQuery", err)
			}
			return
		}
		if pipe.Kind() != id.KindPipe || role == "" || len(role) > 64 {
			t.Fatalf("accepted %v as %q", pipe, role)
		}
	})
}

func FuzzBinding(f *testing.F) {
	p, _ := id.NewPipeID(id.NetPeerGroupID)
	for _, bound := range []string{"true", "false", "yes", ""} {
		b, _ := wire.Marshal(message.New(message.Text(message.JXTANamespace, "PipeId", p.String()), message.Text(message.JXTANamespace, "Role", RoleInput),
			message.Text(message.JXTANamespace, "Bound", bound)))
		f.Add(b)
	}
	noBound, _ := wire.Marshal(message.New(message.Text(message.JXTANamespace, "PipeId", p.String()), message.Text(message.JXTANamespace, "Role", RoleBidi)))
	f.Add(noBound)
	f.Add([]byte("jxmg"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wire.Unmarshal(b, wire.WithMaxMessageSize(maxQuerySize))
		if err != nil {
			return
		}
		pipe, role, bound, err := parseBinding(m)
		if err != nil {
			if !errors.Is(err, ErrBinding) {
				t.Fatalf("error %v does not wrap ErrBinding", err)
			}
			return
		}
		if pipe.Kind() != id.KindPipe || role == "" || len(role) > 64 {
			t.Fatalf("accepted %v as %q", pipe, role)
		}
		e, _ := m.Get(message.JXTANamespace, "Bound")
		if string(e.Data) != strconv.FormatBool(bound) {
			t.Fatalf("Bound %q read as %v", e.Data, bound)
		}
	})
}

// FuzzReferrals: whatever an answer carries, at most maxReferrals peers
// with at most maxReferralAddrs addresses each come out, each with an
// ID; referrals as referralElements writes them come back as they went.
func FuzzReferrals(f *testing.F) {
	_, pub, _ := crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{1}))
	pid, _ := peer.IDFromPublicKey(pub)
	self, _ := ma.NewComponent("p2p", pid.String())
	a1, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/4001")
	a2, _ := ma.NewMultiaddr("/ip6/::1/udp/4001/quic-v1")
	f.Add(a1.Encapsulate(self).Bytes(), a2.Encapsulate(self).Bytes(), self.Bytes(), uint8(3))
	f.Add(a1.Bytes(), []byte{}, []byte("garbage"), uint8(40))
	f.Fuzz(func(t *testing.T, r1, r2, r3 []byte, copies uint8) {
		m := message.New(message.Text(message.JXTANamespace, "Found", "false"))
		for range int(copies % 64) {
			for _, r := range [][]byte{r1, r2, r3} {
				m.Add(message.Bytes(message.JXTANamespace, "Referral", r))
			}
		}
		refs := parseReferrals(m)
		if len(refs) > maxReferrals {
			t.Fatalf("%d referrals", len(refs))
		}
		for _, ai := range refs {
			if ai.ID == "" || len(ai.Addrs) > maxReferralAddrs {
				t.Fatalf("referral %v", ai)
			}
		}
		// Round trip: what came out, written again, reads the same.
		again := message.New()
		for _, ai := range refs {
			c, err := ma.NewComponent("p2p", ai.ID.String())
			if err != nil {
				t.Fatal(err)
			}
			if len(ai.Addrs) == 0 {
				again.Add(message.Bytes(message.JXTANamespace, "Referral", c.Bytes()))
			}
			for _, a := range ai.Addrs {
				again.Add(message.Bytes(message.JXTANamespace, "Referral", a.Encapsulate(c).Bytes()))
			}
		}
		back := parseReferrals(again)
		if len(back) != len(refs) {
			t.Fatalf("%d referrals came back as %d", len(refs), len(back))
		}
		for i := range refs {
			if back[i].ID != refs[i].ID || len(back[i].Addrs) != len(refs[i].Addrs) {
				t.Fatalf("referral %v came back as %v", refs[i], back[i])
			}
			for j := range refs[i].Addrs {
				if !back[i].Addrs[j].Equal(refs[i].Addrs[j]) {
					t.Fatalf("address %v came back as %v", refs[i].Addrs[j], back[i].Addrs[j])
				}
			}
		}
	})
}
