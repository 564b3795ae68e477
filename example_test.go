package p2pmsg_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/p2pmsg/p2pmsg"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// Two peers in one process: bob binds an input pipe, alice sends to it
// through an output pipe, naming bob as the peer to find it at.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loopback := p2pmsg.WithListenAddrs("/ip4/127.0.0.1/tcp/0")
	bob, err := p2pmsg.New(ctx, loopback)
	if err != nil {
		panic(err)
	}
	defer bob.Close()
	alice, err := p2pmsg.New(ctx, loopback)
	if err != nil {
		panic(err)
	}
	defer alice.Close()

	chat, _ := adv.New(adv.Unicast, "chat", "")
	in, err := bob.Pipes().NewInputPipe(chat)
	if err != nil {
		panic(err)
	}
	out, err := alice.Pipes().NewOutputPipe(ctx, chat, pipe.ToPeers(bob.AddrInfo()))
	if err != nil {
		panic(err)
	}
	if err := out.Send(ctx, message.New(message.Text("", "text", "hello, bob"))); err != nil {
		panic(err)
	}

	r, err := in.ReceiveFrom(ctx)
	if err != nil {
		panic(err)
	}
	e, _ := r.Message.Get("", "text")
	fmt.Println(string(e.Data), "| from alice:", r.From == alice.ID())
	// Output: hello, bob | from alice: true
}

// A socket is a net.Conn named by a pipe advertisement: the server peer
// listens on the pipe, the client dials it.
func ExamplePeer_Sockets() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loopback := p2pmsg.WithListenAddrs("/ip4/127.0.0.1/tcp/0")
	server, err := p2pmsg.New(ctx, loopback)
	if err != nil {
		panic(err)
	}
	defer server.Close()
	client, err := p2pmsg.New(ctx, loopback)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	files, _ := adv.New(adv.Unicast, "files", "")
	l, err := server.Sockets().Listen(files)
	if err != nil {
		panic(err)
	}
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "welcome\n")
	}()

	c, err := client.Sockets().Dial(ctx, files, pipe.ToPeers(server.AddrInfo()))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	b, _ := io.ReadAll(c)
	fmt.Print(string(b))
	// Output: welcome
}

// A receiver that is done shuts down rather than closes: the sender's
// Flush, which waits for the receiver to have handed over every message,
// then succeeds instead of seeing its stream reset by the exit.
func ExamplePeer_Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loopback := p2pmsg.WithListenAddrs("/ip4/127.0.0.1/tcp/0")
	bob, err := p2pmsg.New(ctx, loopback)
	if err != nil {
		panic(err)
	}
	defer bob.Close() // does nothing after Shutdown
	alice, err := p2pmsg.New(ctx, loopback)
	if err != nil {
		panic(err)
	}
	defer alice.Close()

	jobs, _ := adv.New(adv.Unicast, "jobs", "")
	in, err := bob.Pipes().NewInputPipe(jobs)
	if err != nil {
		panic(err)
	}
	out, err := alice.Pipes().NewOutputPipe(ctx, jobs, pipe.ToPeers(bob.AddrInfo()))
	if err != nil {
		panic(err)
	}
	for _, job := range []string{"one", "two", "three"} {
		if err := out.Send(ctx, message.New(message.Text("", "job", job))); err != nil {
			panic(err)
		}
	}
	flushed := make(chan error, 1)
	go func() { flushed <- out.Flush(ctx) }()

	for range 3 {
		m, err := in.Receive(ctx)
		if err != nil {
			panic(err)
		}
		e, _ := m.Get("", "job")
		fmt.Println("bob:", string(e.Data))
	}
	if err := bob.Shutdown(ctx); err != nil {
		panic(err)
	}
	fmt.Println("alice's Flush:", <-flushed)
	// Output:
	// bob: one
	// bob: two
	// bob: three
	// alice's Flush: <nil>
}
