package endpoint_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// benchStreamProtocol is the raw-stream baseline's protocol: 4-byte
// big-endian length prefix, then the payload, echoed back.
const benchStreamProtocol = "/p2pmsg/bench/echo/1.0.0"

var rttSizes = []int{1, 1 << 10, 64 << 10, 1 << 20}

// BenchmarkEndpointRTT measures one message/echo pair per iteration through
// the endpoint service, with listeners that keep each message and with
// listeners that release it (Delivery.Release), and, side by side, through a
// raw libp2p stream with a 4-byte length prefix between the same kind of
// nodes. Bytes count both directions.
func BenchmarkEndpointRTT(b *testing.B) {
	for _, size := range rttSizes {
		b.Run(fmt.Sprintf("layer=endpoint/size=%d", size), func(b *testing.B) { benchEndpoint(b, size, false) })
		b.Run(fmt.Sprintf("layer=endpoint+release/size=%d", size), func(b *testing.B) { benchEndpoint(b, size, true) })
		b.Run(fmt.Sprintf("layer=stream/size=%d", size), func(b *testing.B) { benchStream(b, size) })
	}
}

func benchEndpoint(b *testing.B, size int, release bool) {
	nodes := testutil.NewConnectedNodes(b, 2)
	sa, err := endpoint.New(nodes[0])
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	sb, err := endpoint.New(nodes[1])
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	back := endpoint.PeerAddress(nodes[0].ID(), "reply", "")
	if err := sb.Register("echo", "", endpoint.ListenerFunc(func(ctx context.Context, d *endpoint.Delivery) {
		sb.Send(ctx, back, d.Message)
		if release {
			d.Release()
		}
	})); err != nil {
		b.Fatal(err)
	}
	replies := make(chan int, 1)
	if err := sa.Register("reply", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		n := -1
		if el, ok := d.Message.Get("", "p"); ok {
			n = len(el.Data)
		}
		if release {
			d.Release()
		}
		replies <- n
	})); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	to := endpoint.PeerAddress(nodes[1].ID(), "echo", "")
	payload := bytes.Repeat([]byte{0xa5}, size)
	m := message.New(message.Bytes("", "p", payload))
	b.SetBytes(2 * int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if err := sa.Send(ctx, to, m); err != nil {
			b.Fatal(err)
		}
		if <-replies != size {
			b.Fatalf("echo lost the payload")
		}
	}
}

func benchStream(b *testing.B, size int) {
	nodes := testutil.NewConnectedNodes(b, 2)
	nodes[1].Host().SetStreamHandler(benchStreamProtocol, func(st network.Stream) {
		defer st.Close()
		r := bufio.NewReader(st)
		var buf []byte
		for {
			var hdr [4]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				st.Reset()
				return
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if cap(buf) < int(n)+4 {
				buf = make([]byte, n+4)
			}
			buf = buf[:n+4]
			copy(buf, hdr[:])
			if _, err := io.ReadFull(r, buf[4:]); err != nil {
				st.Reset()
				return
			}
			if _, err := st.Write(buf); err != nil {
				st.Reset()
				return
			}
		}
	})
	st, err := nodes[0].Host().NewStream(context.Background(), nodes[1].ID(), benchStreamProtocol)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Reset()
	out := make([]byte, 4+size)
	binary.BigEndian.PutUint32(out, uint32(size))
	copy(out[4:], bytes.Repeat([]byte{0xa5}, size))
	in := make([]byte, 4+size)
	b.SetBytes(2 * int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Write(out); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(st, in); err != nil {
			b.Fatal(err)
		}
		if binary.BigEndian.Uint32(in) != uint32(size) {
			b.Fatal("echo lost the frame")
		}
	}
}
