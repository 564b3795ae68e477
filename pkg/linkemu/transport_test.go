package linkemu_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// TestLibp2pTransportShapes runs a real libp2p stream over a shaped TCP
// transport: the transfer cannot beat the link's serialization time (a
// physical lower bound, not a timing guess), and arrives intact.
func TestLibp2pTransportShapes(t *testing.T) {
	l := linkemu.Link{
		Up:   linkemu.Shape{Bandwidth: 200_000, Latency: 5 * time.Millisecond},
		Down: linkemu.Shape{Bandwidth: 200_000, Latency: 5 * time.Millisecond},
	}
	plain, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	infoB := peer.AddrInfo{ID: plain.ID(), Addrs: plain.Addrs()}
	const n = 100_000
	got := make(chan int, 1)
	plain.SetStreamHandler("/test/1", func(s network.Stream) {
		b, _ := io.ReadAll(s)
		got <- len(b)
		s.Close()
	})
	shaped, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay(),
		libp2p.NoTransports, libp2p.Transport(linkemu.NewTCPTransport(l)))
	if err != nil {
		t.Fatal(err)
	}
	defer shaped.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shaped.Connect(ctx, infoB); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := shaped.NewStream(ctx, infoB.ID, "/test/1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	s.CloseWrite()
	if m := <-got; m != n {
		t.Fatalf("received %d bytes, sent %d", m, n)
	}
	if el, floor := time.Since(start), l.Up.SerializationTime(n); el < floor {
		t.Fatalf("%d bytes crossed a %d B/s link in %v, faster than its serialization time %v", n, l.Up.Bandwidth, el, floor)
	}
	s.Close()
}
