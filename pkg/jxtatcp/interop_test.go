package jxtatcp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestJXSEEndpointMessages exchanges endpoint messages with a live,
// unmodified JXSE 2.7 peer, in both roles, signed (JXSE's default) and
// with CBJX disabled: this transport dials JXSE; JXSE dials this
// transport's listener (a tcp:// address); JXSE routes a jxta:// message
// back over the connection this transport opened (router element).
func TestJXSEEndpointMessages(t *testing.T) {
	for _, unsigned := range []bool{false, true} {
		name := "signed"
		if unsigned {
			name = "unsigned"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			peer := jxse.StartPeer(t, jxse.PeerOptions{Unsigned: unsigned})
			ident, err := jxtatcp.NewIdentity()
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *jxtatcp.Incoming, 16)
			var opts []jxtatcp.Option
			if unsigned {
				opts = append(opts, jxtatcp.WithUnsigned())
			}
			tr, err := jxtatcp.New(ident, func(in *jxtatcp.Incoming) { got <- in }, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if err := tr.Listen("tcp://127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			self := "jxta://" + strings.TrimPrefix(ident.ID().String(), "urn:jxta:")

			// p2pmsg → JXSE, on a connection p2pmsg opens.
			if err := tr.Send(ctx, peer.Addr(), "StudySvc", "ep", message.New(message.Text("study", "text", "hello from go"))); err != nil {
				t.Fatal(err)
			}
			r, err := peer.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Text != "hello from go" || r.Source != self || r.Service != "StudySvc" || r.Param != "ep" {
				t.Fatalf("JXSE received %+v, want hello from go from %s", r, self)
			}

			expect := func(text string) {
				t.Helper()
				select {
				case in := <-got:
					if in.Service != "StudySvc" || in.Param != "ep" || in.Source.String() != peer.ID || in.Signed == unsigned {
						t.Fatalf("received %s/%s from %v (signed %v), want StudySvc/ep from %s", in.Service, in.Param, in.Source, in.Signed, peer.ID)
					}
					e, ok := in.Message.Get("study", "text")
					if !ok || string(e.Data) != text {
						t.Fatalf("received %q, want %q", e.Data, text)
					}
					if in.Message.Len() != 1 {
						t.Fatalf("%d elements reached the listener, want only the application's", in.Message.Len())
					}
				case <-ctx.Done():
					t.Fatalf("no %q from JXSE: %v (stats %+v)", text, ctx.Err(), tr.Stats())
				}
			}
			// JXSE → p2pmsg, routed to the peer ID over p2pmsg's connection.
			if err := peer.Send(self+"/StudySvc/ep", "routed from jxse"); err != nil {
				t.Fatal(err)
			}
			expect("routed from jxse")
			// JXSE → p2pmsg, direct, on a connection JXSE opens.
			if err := peer.Send(tr.Addrs()[0]+"/StudySvc/ep", "direct from jxse"); err != nil {
				t.Fatal(err)
			}
			expect("direct from jxse")
			if s := tr.Stats(); s.BadSignatures+s.Unsigned+s.Spoofed+s.Malformed+s.NotForUs != 0 {
				t.Fatalf("refusals: %+v", s)
			}
		})
	}
}
