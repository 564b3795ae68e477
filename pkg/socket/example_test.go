package socket_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

func startSockets(ctx context.Context) (*node.Node, *socket.Service, func()) {
	n, err := node.New(ctx, node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		panic(err)
	}
	ep, _ := endpoint.New(n)
	ps, _ := pipe.New(ep)
	s, _ := socket.New(ps)
	return n, s, func() { s.Close(); ps.Close(); ep.Close(); n.Close() }
}

// A socket is a net.Conn named by a pipe advertisement: the dialler
// finds the listening peer through pipe binding resolution.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, client, stopA := startSockets(ctx)
	defer stopA()
	srvNode, server, stopB := startSockets(ctx)
	defer stopB()
	a, _ := adv.New(adv.Unicast, "files", "")

	l, err := server.Listen(a)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "welcome\n")
	}()

	c, err := client.Dial(ctx, a, pipe.ToPeers(srvNode.AddrInfo()))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	b, _ := io.ReadAll(c)
	fmt.Print(string(b))
	// Output: welcome
}
