package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// Services the endpoint layer's echo uses.
const (
	echoService  = "lab-echo"
	replyService = "lab-reply"
)

// NewNode starts a p2pmsg node listening on loopback over transport, with
// an ephemeral identity: what the libp2p-based layers run on.
func NewNode(ctx context.Context, transport string, opts ...node.Option) (*node.Node, error) {
	addr, err := LoopbackAddr(transport)
	if err != nil {
		return nil, err
	}
	return node.New(ctx, append([]node.Option{node.WithEphemeralKey(), node.WithListenAddrs(addr)}, opts...)...)
}

// NodeHost is a HostFactory for StreamLayer that builds the same hosts as
// the p2pmsg layers, so the baseline differs from them only by the layer.
func NodeHost(ctx context.Context, transport string) (host.Host, error) {
	n, err := NewNode(ctx, transport)
	if err != nil {
		return nil, err
	}
	return n.Host(), nil
}

// EndpointLayer measures the endpoint service: a message with one element
// holding the payload goes to the echo service of the other node, which
// sends the same message back to the reply service.
type EndpointLayer struct{}

// Name implements Layer.
func (EndpointLayer) Name() string { return "endpoint" }

// Open implements Layer.
func (EndpointLayer) Open(ctx context.Context, transport string) (Pair, error) {
	p := &endpointPair{replies: make(chan *message.Message, 1)}
	var err error
	if p.na, err = NewNode(ctx, transport); err != nil {
		return nil, err
	}
	if p.nb, err = NewNode(ctx, transport); err != nil {
		p.Close()
		return nil, err
	}
	if err = p.na.Connect(ctx, p.nb.AddrInfo()); err != nil {
		p.Close()
		return nil, err
	}
	if p.a, err = endpoint.New(p.na); err != nil {
		p.Close()
		return nil, err
	}
	if p.b, err = endpoint.New(p.nb); err != nil {
		p.Close()
		return nil, err
	}
	back := endpoint.PeerAddress(p.na.ID(), replyService, "")
	p.b.Register(echoService, "", endpoint.ListenerFunc(func(ctx context.Context, d *endpoint.Delivery) {
		p.b.Send(ctx, back, d.Message)
	}))
	p.a.Register(replyService, "", endpoint.ListenerFunc(func(ctx context.Context, d *endpoint.Delivery) {
		select {
		case p.replies <- d.Message:
		case <-ctx.Done():
		}
	}))
	p.dst = endpoint.PeerAddress(p.nb.ID(), echoService, "")
	return p, nil
}

type endpointPair struct {
	na, nb  *node.Node
	a, b    *endpoint.Service
	dst     endpoint.Address
	replies chan *message.Message
}

func payloadMessage(payload []byte) *message.Message {
	return message.New(message.Element{Name: "d", Data: payload})
}

func (p *endpointPair) RoundTrip(ctx context.Context, payload []byte) error {
	if err := p.a.Send(ctx, p.dst, payloadMessage(payload)); err != nil {
		return err
	}
	select {
	case m := <-p.replies:
		if m.Len() != 1 || len(m.At(0).Data) != len(payload) {
			return errors.New("lab: echo differs from the message sent")
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WireBytes is the frame header plus the JXTA message around the payload.
func (p *endpointPair) WireBytes(size int) int {
	n, _ := wire.Size(payloadMessage(make([]byte, size)))
	hdr := binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(echoService))) + len(echoService) +
		1 + binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(n))
	return int(n) - size + hdr
}

func (p *endpointPair) Close() error {
	var errs []error
	for _, s := range []*endpoint.Service{p.a, p.b} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	for _, n := range []*node.Node{p.na, p.nb} {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab: closing endpoint pair: %w", err)
	}
	return nil
}
