package pipe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// startPipes starts a loopback node with its endpoint and pipe services.
func startPipes(ctx context.Context) (*node.Node, *pipe.Service, func()) {
	n, err := node.New(ctx, node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		panic(err)
	}
	ep, err := endpoint.New(n)
	if err != nil {
		panic(err)
	}
	ps, err := pipe.New(ep)
	if err != nil {
		panic(err)
	}
	return n, ps, func() { ps.Close(); ep.Close(); n.Close() }
}

// A unicast pipe: one peer binds the input pipe, another finds it by
// asking its connected peers and sends.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, alice, stopA := startPipes(ctx)
	defer stopA()
	bobNode, bob, stopB := startPipes(ctx)
	defer stopB()
	if err := alice.Node().Connect(ctx, bobNode.AddrInfo()); err != nil {
		panic(err)
	}

	chat, _ := adv.New(adv.Unicast, "chat", "")
	in, err := bob.NewInputPipe(chat)
	if err != nil {
		panic(err)
	}
	defer in.Close()

	out, err := alice.NewOutputPipe(ctx, chat)
	if err != nil {
		panic(err)
	}
	defer out.Close()
	if err := out.Send(ctx, message.New(message.Text("", "text", "hello, bob"))); err != nil {
		panic(err)
	}

	r, err := in.ReceiveFrom(ctx)
	if err != nil {
		panic(err)
	}
	e, _ := r.Message.Get("", "text")
	fmt.Println(string(e.Data), "| from alice:", r.From == alice.Node().ID())
	// Output: hello, bob | from alice: true
}

// A bidirectional pipe: Listen and Accept on one side, Connect on the
// other; both ends send and receive.
func ExampleService_Connect() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, client, stopA := startPipes(ctx)
	defer stopA()
	srvNode, server, stopB := startPipes(ctx)
	defer stopB()
	client.Node().Connect(ctx, srvNode.AddrInfo())

	svc, _ := adv.New(adv.UnicastSecure, "echo", "")
	// A secure pipe names the peers allowed to bind it: a peer that
	// claims it without being named, or without proving it, is ignored.
	svc.Binders = []string{srvNode.ID().String()}
	l, err := server.Listen(svc)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				return
			}
			c.Send(ctx, m) // echo
		}
	}()

	c, err := client.Connect(ctx, svc)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Send(ctx, message.New(message.Text("", "q", "ping")))
	m, _ := c.Receive(ctx)
	e, _ := m.Get("", "q")
	fmt.Println(string(e.Data))
	// Output: ping
}

// A propagate pipe: a room. Every peer with an input pipe bound is a
// member and gets each message sent on the pipe; an output pipe waits
// until the members it is to reach are known before it sends, since
// gossipsub learns them from its neighbours' announcements.
func ExampleOutputPipe_WaitMembers() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aliceNode, alice, stopA := startPipes(ctx)
	defer stopA()
	room, _ := adv.New(adv.Propagate, "room", "")

	var members []*pipe.InputPipe
	for range 2 {
		n, ps, stop := startPipes(ctx)
		defer stop()
		if err := aliceNode.Connect(ctx, n.AddrInfo()); err != nil {
			panic(err)
		}
		in, err := ps.NewInputPipe(room)
		if err != nil {
			panic(err)
		}
		defer in.Close()
		members = append(members, in)
	}

	out, err := alice.NewOutputPipe(ctx, room)
	if err != nil {
		panic(err)
	}
	defer out.Close()
	if err := out.WaitMembers(ctx, len(members)); err != nil {
		panic(err)
	}
	if err := out.Send(ctx, message.New(message.Text("", "text", "hello, room"))); err != nil {
		panic(err)
	}
	for i, in := range members {
		r, err := in.ReceiveFrom(ctx)
		if err != nil {
			panic(err)
		}
		e, _ := r.Message.Get("", "text")
		fmt.Printf("member %d: %s | from alice: %v\n", i+1, e.Data, r.From == aliceNode.ID())
	}
	// Output:
	// member 1: hello, room | from alice: true
	// member 2: hello, room | from alice: true
}
