package endpoint_test

import (
	"context"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestJXSEEndpointListenerAndSend: endpoint.Send and a registered listener
// work with a live JXSE 2.7 peer unchanged: Send to its tcp:// address,
// its messages (routed to the node's JXTA peer ID, and direct) reach the
// listener, and the listener answers the JXSE peer by its jxta:// ID.
func TestJXSEEndpointListenerAndSend(t *testing.T) {
	peer := jxse.StartPeer(t, jxse.PeerOptions{})
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	nodes := testutil.NewConnectedNodes(t, 1)
	s, err := endpoint.New(nodes[0], endpoint.WithJXTA(ident, "tcp://127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, l := collector(16)
	if err := s.Register("StudySvc", "ep", l); err != nil {
		t.Fatal(err)
	}
	to, err := endpoint.ParseAddress(peer.Addr() + "/StudySvc/ep")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx(t), to, message.New(message.Text("study", "text", "hello"))); err != nil {
		t.Fatal(err)
	}
	self := "jxta://" + strings.TrimPrefix(ident.ID().String(), "urn:jxta:")
	if r, err := peer.Next(ctx(t)); err != nil || r.Text != "hello" || r.Source != self {
		t.Fatalf("JXSE got %+v, %v", r, err)
	}
	for _, addr := range []string{self + "/StudySvc/ep", s.JXTA().Addrs()[0] + "/StudySvc/ep"} {
		if err := peer.Send(addr, "to "+addr); err != nil {
			t.Fatal(err)
		}
		d := recv(t, got)
		if e, _ := d.Message.Get("study", "text"); string(e.Data) != "to "+addr || d.Transport != endpoint.TransportJXTA ||
			d.SourceJXTA.String() != peer.ID || d.Unverified || d.Security != "" {
			t.Fatalf("listener got %q from %v over %q (unverified %v, security %q)", e.Data, d.SourceJXTA, d.Transport, d.Unverified, d.Security)
		}
		// Answer by the sender's peer ID.
		back := endpoint.Address{Protocol: endpoint.ProtocolJXTA, Addr: strings.TrimPrefix(d.SourceJXTA.String(), "urn:jxta:"), Service: "StudySvc", Param: "ep"}
		if err := s.Send(context.Background(), back, message.New(message.Text("study", "text", "re "+addr))); err != nil {
			t.Fatal(err)
		}
		if r, err := peer.Next(ctx(t)); err != nil || r.Text != "re "+addr {
			t.Fatalf("JXSE got %+v, %v", r, err)
		}
	}
}
