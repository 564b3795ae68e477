package node_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/p2pmsg/p2pmsg/pkg/node"
)

func ExampleNew() {
	n, err := node.New(context.Background(),
		node.WithEphemeralKey(),
		node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		panic(err)
	}
	defer n.Close()
	fmt.Println(strings.HasPrefix(n.JXTAPeerID().String(), "urn:jxta:cbid-"))
	fmt.Println(strings.HasSuffix(n.Addrs()[0].String(), "/p2p/"+n.ID().String()))
	// Output:
	// true
	// true
}
