package pipe

import (
	"errors"
	"strings"
	"testing"

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
