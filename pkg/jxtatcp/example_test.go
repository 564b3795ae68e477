package jxtatcp_test

import (
	"context"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Two JXTA peers on loopback: one listens, the other sends it a signed
// endpoint message to StudySvc/ep, as a JXSE 2.7 peer would.
func Example() {
	got := make(chan *jxtatcp.Incoming, 1)
	a, _ := jxtatcp.NewIdentity()
	server, err := jxtatcp.New(a, func(in *jxtatcp.Incoming) { got <- in })
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.Listen("tcp://127.0.0.1:0"); err != nil {
		panic(err)
	}

	b, _ := jxtatcp.NewIdentity()
	client, err := jxtatcp.New(b, func(*jxtatcp.Incoming) {})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	m := message.New(message.Text("study", "text", "hello"))
	if err := client.Send(context.Background(), server.Addrs()[0], "StudySvc", "ep", m); err != nil {
		panic(err)
	}
	in := <-got
	e, _ := in.Message.Get("study", "text")
	fmt.Println(in.Service, in.Param, string(e.Data), in.Signed, in.Source == b.ID())
	// Output: StudySvc ep hello true true
}
