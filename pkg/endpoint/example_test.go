package endpoint_test

import (
	"context"
	"errors"
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

// A listener that keeps messages for later holds them on their sender's
// memory budget until it is done with them; one that will not take a
// message refuses it, and the sender learns of it.
func ExampleDelivery_Hold() {
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
	b, _ := endpoint.New(nb, endpoint.WithMemoryBudget(64<<20+1<<20, 256<<20))
	defer b.Close()

	type kept struct {
		text string
		d    *endpoint.Delivery
	}
	queue := make(chan kept, 1)
	b.Register("jobs", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		el, _ := d.Message.Get("", "text")
		select {
		case queue <- kept{string(el.Data), d}:
			d.Hold()
		default:
			d.Refuse("busy")
		}
	}))
	to := endpoint.PeerAddress(nb.ID(), "jobs", "")
	for _, s := range []string{"first", "second"} {
		if err := a.Send(ctx, to, message.New(message.Text("", "text", s))); err != nil {
			panic(err)
		}
	}
	err := a.Flush(ctx, nb.ID()) // everything sent was read, and refusals are in
	var refused *endpoint.RefusedError
	if errors.As(err, &refused) {
		fmt.Printf("%d refused: %s\n", refused.Count, refused.Reason)
	}
	k := <-queue
	fmt.Println("working on", k.text)
	k.d.Unhold() // done: the bytes leave the sender's budget
	// Output:
	// 1 refused: busy
	// working on first
}
