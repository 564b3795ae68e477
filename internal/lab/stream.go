package lab

import (
	"context"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// EchoProtocol is the libp2p protocol of the raw-stream baseline.
const EchoProtocol protocol.ID = "/p2pmsg/lab/echo/1.0.0"

// HostFactory makes a libp2p host listening on loopback over transport.
type HostFactory func(ctx context.Context, transport string) (host.Host, error)

// StreamLayer is the libp2p baseline: one raw stream between two hosts,
// each message preceded by a 4-byte length.
type StreamLayer struct {
	// NewHost builds the hosts; nil means DefaultHost, so the baseline
	// runs on go-libp2p's defaults restricted to loopback.
	NewHost HostFactory
}

// DefaultHost is a go-libp2p host with its default security and muxer,
// listening on 127.0.0.1 with only the chosen transport.
func DefaultHost(_ context.Context, transport string) (host.Host, error) {
	addr, err := LoopbackAddr(transport)
	if err != nil {
		return nil, err
	}
	return libp2p.New(libp2p.ListenAddrStrings(addr), libp2p.DisableRelay(), libp2p.ResourceManager(&network.NullResourceManager{}))
}

// LoopbackAddr is the listen multiaddr for transport on 127.0.0.1.
func LoopbackAddr(transport string) (string, error) {
	switch transport {
	case TransportTCP, "":
		return "/ip4/127.0.0.1/tcp/0", nil
	case TransportQUIC:
		return "/ip4/127.0.0.1/udp/0/quic-v1", nil
	}
	return "", fmt.Errorf("unknown transport %q (want tcp or quic)", transport)
}

// Name implements Layer.
func (StreamLayer) Name() string { return "stream" }

// Open implements Layer.
func (l StreamLayer) Open(ctx context.Context, transport string) (Pair, error) {
	newHost := l.NewHost
	if newHost == nil {
		newHost = DefaultHost
	}
	a, err := newHost(ctx, transport)
	if err != nil {
		return nil, err
	}
	b, err := newHost(ctx, transport)
	if err != nil {
		a.Close()
		return nil, err
	}
	p := &streamPair{a: a, b: b}
	b.SetStreamHandler(EchoProtocol, func(s network.Stream) {
		p.wg.Add(1)
		defer p.wg.Done()
		defer s.Close()
		if err := echoFramed(s, s); err != nil {
			s.Reset()
		}
	})
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		p.Close()
		return nil, err
	}
	s, err := a.NewStream(ctx, b.ID(), EchoProtocol)
	if err != nil {
		p.Close()
		return nil, err
	}
	p.s = s
	return p, nil
}

type streamPair struct {
	a, b host.Host
	s    network.Stream
	wg   sync.WaitGroup
	buf  []byte
}

func (p *streamPair) RoundTrip(ctx context.Context, payload []byte) error {
	return framedRoundTrip(ctx, p.s, p.s, payload, &p.buf)
}

func (p *streamPair) WireBytes(int) int { return 4 }

func (p *streamPair) Close() error {
	if p.s != nil {
		p.s.Close()
	}
	p.a.Close()
	p.b.Close()
	p.wg.Wait()
	return nil
}
