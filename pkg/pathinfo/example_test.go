package pathinfo_test

import (
	"context"
	"fmt"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pathinfo"
)

// A sender measures its path to a receiver and fetches the receiver's
// decode profile, then gives both to an adaptive scheme.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	loopback := node.WithListenAddrs("/ip4/127.0.0.1/tcp/0")
	snd, _ := node.New(ctx, node.WithEphemeralKey(), loopback)
	defer snd.Close()
	rcv, _ := node.New(ctx, node.WithEphemeralKey(), loopback)
	defer rcv.Close()
	snd.Connect(ctx, rcv.AddrInfo())

	// The receiver serves probes and its decode profile: what its models
	// learn of its decodes, here measured before it decodes any.
	z, _ := zstd.New()
	reg, _ := encoding.NewRegistry(z)
	rmodels := adaptive.NewModels()
	rmodels.CalibrateDecode(reg)
	rs, _ := pathinfo.New(rcv.Host(), rmodels)
	defer rs.Close()

	ss, _ := pathinfo.New(snd.Host(), adaptive.NewModels())
	defer ss.Close()
	mon := ss.Monitor(rcv.ID())
	if err := mon.Ensure(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("bandwidth measured:", mon.Path().Bandwidth > 0)
	fmt.Println("receiver decodes:", mon.ReceiverProfile().Codecs())

	_, err := adaptive.New([]encoding.Codec{z}, adaptive.WithPeer(mon))
	fmt.Println("scheme:", err == nil)
	// Output:
	// bandwidth measured: true
	// receiver decodes: [zstd]
	// scheme: true
}
