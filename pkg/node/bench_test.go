package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

const benchEcho = "/p2pmsg/bench/node-echo/1.0.0"

// BenchmarkSecurity measures a message/echo pair on a raw libp2p stream
// (4-byte length prefix) between two loopback TCP nodes offering only TLS
// or only Noise: small-message round trips and bulk bandwidth, the figures
// behind DefaultSecurity. Bytes count both directions.
func BenchmarkSecurity(b *testing.B) {
	for _, sec := range []string{node.SecurityTLS, node.SecurityNoise} {
		for _, size := range []int{1, 1 << 20} {
			b.Run(fmt.Sprintf("security=%s/size=%d", sec, size), func(b *testing.B) {
				benchEchoRTT(b, size, map[string]string{node.SecurityTLS: "/tls/1.0.0", node.SecurityNoise: "/noise"}[sec],
					node.WithSecurity(sec))
			})
		}
	}
}

func benchEchoRTT(b *testing.B, size int, security string, opts ...node.Option) {
	a := testutil.NewNode(b, opts...)
	z := testutil.NewNode(b, opts...)
	z.Host().SetStreamHandler(benchEcho, func(st network.Stream) {
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
	ctx := context.Background()
	if err := a.Connect(ctx, z.AddrInfo()); err != nil {
		b.Fatal(err)
	}
	if c := a.Host().Network().ConnsToPeer(z.ID()); len(c) != 1 || string(c[0].ConnState().Security) != security {
		b.Fatalf("want one connection secured by %s, have %v", security, c)
	}
	st, err := a.Host().NewStream(ctx, z.ID(), benchEcho)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Reset()
	out := make([]byte, 4+size)
	binary.BigEndian.PutUint32(out, uint32(size))
	copy(out[4:], bytes.Repeat([]byte{0x5a}, size))
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
		if !bytes.Equal(in, out) {
			b.Fatal("echo differs")
		}
	}
}

const benchSink = "/p2pmsg/bench/node-sink/1.0.0"

// BenchmarkStreamWrites measures one-way writes on a raw libp2p stream
// between two loopback TCP nodes, one Write per message, through the
// node's muxer (yamux with its writes coalesced) and through go-libp2p's
// own yamux side by side: what coalescing does for a protocol that
// writes small frames, and that it costs large ones nothing.
func BenchmarkStreamWrites(b *testing.B) {
	stock := node.WithLibp2pOptions(libp2p.Muxer(yamux.ID, yamux.DefaultTransport))
	for _, size := range []int{100, 16 << 10} {
		for _, mux := range []struct {
			name string
			opts []node.Option
		}{{"node", nil}, {"go-libp2p", []node.Option{stock}}} {
			b.Run(fmt.Sprintf("muxer=%s/size=%d", mux.name, size), func(b *testing.B) {
				benchStreamWrites(b, size, mux.opts...)
			})
		}
	}
}

func benchStreamWrites(b *testing.B, size int, opts ...node.Option) {
	a := testutil.NewNode(b, opts...)
	z := testutil.NewNode(b, opts...)
	read := make(chan int64, 1)
	z.Host().SetStreamHandler(benchSink, func(st network.Stream) {
		n, _ := io.Copy(io.Discard, st)
		st.Close()
		read <- n
	})
	ctx := context.Background()
	if err := a.Connect(ctx, z.AddrInfo()); err != nil {
		b.Fatal(err)
	}
	st, err := a.Host().NewStream(ctx, z.ID(), benchSink)
	if err != nil {
		b.Fatal(err)
	}
	msg := bytes.Repeat([]byte{0x5a}, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := st.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	st.CloseWrite() // timed until the peer has read everything
	if n := <-read; n != int64(b.N*size) {
		b.Fatalf("the peer read %d bytes of %d", n, b.N*size)
	}
	b.StopTimer()
	st.Close()
}
