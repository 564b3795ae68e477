package endpoint_test

import (
	"context"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

func ExampleParseAddress() {
	a, err := endpoint.ParseAddress("jxta://cbid-59616261646162614E50472050325033/chat/room-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Protocol, a.Service, a.Param)
	fmt.Println(a)
	// Output:
	// jxta chat room-1
	// jxta://cbid-59616261646162614E50472050325033/chat/room-1
}

func ExampleService_Send() {
	ctx := context.Background()
	loopback := node.WithListenAddrs("/ip4/127.0.0.1/tcp/0")
	na, _ := node.New(ctx, node.WithEphemeralKey(), loopback)
	defer na.Close()
	nb, _ := node.New(ctx, node.WithEphemeralKey(), loopback)
	defer nb.Close()
	if err := na.Connect(ctx, nb.AddrInfo()); err != nil {
		panic(err)
	}
	a, _ := endpoint.New(na)
	defer a.Close()
	b, _ := endpoint.New(nb)
	defer b.Close()

	got := make(chan string, 1)
	b.Register("chat", "room-1", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		el, _ := d.Message.Get("", "text")
		got <- fmt.Sprintf("%s from A: %v", el.Data, d.Source == na.ID())
	}))
	to := endpoint.PeerAddress(nb.ID(), "chat", "room-1")
	if err := a.Send(ctx, to, message.New(message.Text("", "text", "hello"))); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output: hello from A: true
}
