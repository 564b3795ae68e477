package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

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
// sends the same message back to the reply service. In a run of pairs the
// reply listener sends the next message itself, as the baselines' loops
// do, so the caller's goroutine only waits for the run to end. Both
// listeners release each message once done with it (Delivery.Release), as
// the baselines reuse their buffers.
type EndpointLayer struct{}

// Name implements Layer.
func (EndpointLayer) Name() string { return "endpoint" }

// Open implements Layer.
func (l EndpointLayer) Open(ctx context.Context, transport string) (Pair, error) {
	return openOwn(ctx, transport, l)
}

func (EndpointLayer) openOn(_ context.Context, s *stack) (Pair, error) {
	p := &endpointPair{a: s.ea, b: s.eb, dst: endpoint.PeerAddress(s.nb.ID(), echoService, "")}
	back := endpoint.PeerAddress(s.na.ID(), replyService, "")
	if err := p.b.Register(echoService, "", endpoint.ListenerFunc(func(ctx context.Context, d *endpoint.Delivery) {
		p.b.Send(ctx, back, d.Message)
		d.Release() // Send has written it: its buffers can take the next message
	})); err != nil {
		return nil, fmt.Errorf("lab: endpoint layer: %w", err)
	}
	if err := p.a.Register(replyService, "", endpoint.ListenerFunc(p.reply)); err != nil {
		p.b.Unregister(echoService, "")
		return nil, fmt.Errorf("lab: endpoint layer: %w", err)
	}
	return p, nil
}

type endpointPair struct {
	a, b *endpoint.Service
	dst  endpoint.Address
	run  atomic.Pointer[endpointRun] // the run in progress
}

// endpointRun is a run of consecutive message/echo pairs.
type endpointRun struct {
	ctx  context.Context
	msg  *message.Message
	size int
	left atomic.Int64 // echoes still to come
	done chan error   // gets the run's outcome, once
}

func payloadMessage(payload []byte) *message.Message {
	return message.New(message.Element{Name: "d", Data: payload})
}

// reply runs on A's reader for each echo: it checks it and sends the next
// message of the run, or ends the run.
func (p *endpointPair) reply(_ context.Context, d *endpoint.Delivery) {
	r := p.run.Load()
	if r == nil {
		return // an echo outliving its run
	}
	ok := d.Message.Len() == 1 && len(d.Message.At(0).Data) == r.size
	d.Release() // checked; nothing else reads the echo
	var err error
	if !ok {
		err = errors.New("lab: echo differs from the message sent")
	} else if r.left.Add(-1) > 0 {
		if err = p.a.Send(r.ctx, p.dst, r.msg); err == nil {
			return
		}
	}
	if p.run.CompareAndSwap(r, nil) {
		r.done <- err
	}
}

// RoundTrips implements Batcher.
func (p *endpointPair) RoundTrips(ctx context.Context, payload []byte, n int) error {
	return runPairs(ctx, &p.run, payload, n, func(m *message.Message) error { return p.a.Send(ctx, p.dst, m) })
}

// runPairs starts a run of n message/echo pairs in *run with the first
// send, and waits for the echo handler to end it.
func runPairs(ctx context.Context, run *atomic.Pointer[endpointRun], payload []byte, n int, send func(*message.Message) error) error {
	if n < 1 {
		return nil
	}
	r := &endpointRun{ctx: ctx, msg: payloadMessage(payload), size: len(payload), done: make(chan error, 1)}
	r.left.Store(int64(n))
	run.Store(r)
	if err := send(r.msg); err != nil {
		run.CompareAndSwap(r, nil)
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		run.CompareAndSwap(r, nil)
		return ctx.Err()
	}
}

func (p *endpointPair) RoundTrip(ctx context.Context, payload []byte) error {
	return p.RoundTrips(ctx, payload, 1)
}

// WireBytes is the frame header plus the JXTA message around the payload,
// for a message that leaves alone (one of a batch to the same destination
// names none: 1 byte instead of the service and param).
func (p *endpointPair) WireBytes(size int) int {
	n, _ := wire.Size(payloadMessage(make([]byte, size)))
	hdr := binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(echoService)+1)) + len(echoService) +
		1 + binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(n))
	return int(n) - size + hdr
}

// Close removes the echo's listeners; the stack stays up.
func (p *endpointPair) Close() error {
	p.b.Unregister(echoService, "")
	p.a.Unregister(replyService, "")
	return nil
}
