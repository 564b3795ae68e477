package endpoint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// BenchmarkEndpointLarge measures one-way large messages, from Send to
// the receiver's listener, one sender sending as fast as it can, over
// each security protocol (on TCP; P2PMSG_TEST_TRANSPORT=quic runs it on
// QUIC, where security is QUIC's own). Bytes are the payloads.
func BenchmarkEndpointLarge(b *testing.B) {
	for _, sec := range []string{node.SecurityTLS, node.SecurityNoise} {
		for _, size := range []int{1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("security=%s/size=%d", sec, size), func(b *testing.B) { benchLarge(b, sec, size) })
		}
	}
}

func benchLarge(b *testing.B, sec string, size int) {
	sa, sb := testutil.NewNode(b, node.WithSecurity(sec)), testutil.NewNode(b, node.WithSecurity(sec))
	if err := sa.Connect(context.Background(), peer.AddrInfo{ID: sb.ID(), Addrs: sb.Host().Addrs()}); err != nil {
		b.Fatal(err)
	}
	a, err := endpoint.New(sa)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	r, err := endpoint.New(sb)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	got := make(chan int, 64)
	if err := r.Register("sink", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		n := len(d.Message.At(0).Data)
		d.Release()
		got <- n
	})); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	to := endpoint.PeerAddress(sb.ID(), "sink", "")
	m := message.New(message.Bytes("", "p", make([]byte, size)))
	if err := a.Send(ctx, to, m); err != nil { // the stream opens and the windows grow
		b.Fatal(err)
	}
	<-got
	b.SetBytes(int64(size))
	b.ReportAllocs()
	sent, recvd := 0, 0
	for b.Loop() {
		if err := a.Send(ctx, to, m); err != nil {
			b.Fatal(err)
		}
		sent++
		for sent-recvd > 4 { // at most four in flight: within the receiver's budget
			if n := <-got; n != size {
				b.Fatalf("received %d bytes, sent %d", n, size)
			}
			recvd++
		}
	}
	for ; recvd < sent; recvd++ {
		if n := <-got; n != size {
			b.Fatalf("received %d bytes, sent %d", n, size)
		}
	}
}
