package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// stack is two connected nodes with endpoint and pipe services: what the
// pipe and socket layers run on.
type stack struct {
	na, nb *node.Node
	ea, eb *endpoint.Service
	pa, pb *pipe.Service
}

func openStack(ctx context.Context, transport string) (*stack, error) {
	s := &stack{}
	var err error
	if s.na, err = NewNode(ctx, transport); err != nil {
		return nil, err
	}
	if s.nb, err = NewNode(ctx, transport); err != nil {
		s.Close()
		return nil, err
	}
	if err = s.na.Connect(ctx, s.nb.AddrInfo()); err != nil {
		s.Close()
		return nil, err
	}
	if s.ea, err = endpoint.New(s.na); err == nil {
		if s.eb, err = endpoint.New(s.nb); err == nil {
			if s.pa, err = pipe.New(s.ea); err == nil {
				s.pb, err = pipe.New(s.eb)
			}
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *stack) Close() error {
	var errs []error
	for _, p := range []*pipe.Service{s.pa, s.pb} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	for _, e := range []*endpoint.Service{s.ea, s.eb} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	for _, n := range []*node.Node{s.na, s.nb} {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	return errors.Join(errs...)
}

// PipeLayer measures unicast pipes: a message with one element holding
// the payload goes through an output pipe to the other node's input pipe,
// whose handler sends it back through an output pipe of a second pipe.
// As in the endpoint layer, the reply pipe's handler sends the next
// message of a run itself, and both handlers release each message.
type PipeLayer struct{}

// Name implements Layer.
func (PipeLayer) Name() string { return "pipe" }

// Open implements Layer.
func (PipeLayer) Open(ctx context.Context, transport string) (Pair, error) {
	s, err := openStack(ctx, transport)
	if err != nil {
		return nil, err
	}
	p := &pipePair{stack: s}
	fail := func(err error) (Pair, error) {
		p.Close()
		return nil, fmt.Errorf("lab: pipe layer: %w", err)
	}
	there, err1 := adv.New(adv.Unicast, "lab-echo", "")
	back, err2 := adv.New(adv.Unicast, "lab-reply", "")
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	if p.reply, err = s.pa.NewInputPipe(back, pipe.WithHandler(p.onReply)); err != nil {
		return fail(err)
	}
	var echo atomic.Pointer[pipe.OutputPipe]
	if p.echo, err = s.pb.NewInputPipe(there, pipe.WithHandler(func(r *pipe.Received) {
		if out := echo.Load(); out != nil {
			out.Send(context.Background(), r.Message)
		}
		r.Release() // Send has written it
	})); err != nil {
		return fail(err)
	}
	out, err := s.pb.NewOutputPipe(ctx, back)
	if err != nil {
		return fail(err)
	}
	echo.Store(out)
	if p.out, err = s.pa.NewOutputPipe(ctx, there); err != nil {
		return fail(err)
	}
	p.key = pipe.Key(there.ID)
	return p, nil
}

type pipePair struct {
	*stack
	out         *pipe.OutputPipe
	echo, reply *pipe.InputPipe
	key         string
	run         atomic.Pointer[endpointRun]
}

// onReply runs for each echo: it checks it and sends the next message of
// the run, or ends the run.
func (p *pipePair) onReply(rcv *pipe.Received) {
	r := p.run.Load()
	if r == nil {
		rcv.Release()
		return // an echo outliving its run
	}
	ok := rcv.Message.Len() == 1 && len(rcv.Message.At(0).Data) == r.size
	rcv.Release()
	var err error
	if !ok {
		err = errors.New("lab: echo differs from the message sent")
	} else if r.left.Add(-1) > 0 {
		if err = p.out.Send(r.ctx, r.msg); err == nil {
			return
		}
	}
	if p.run.CompareAndSwap(r, nil) {
		r.done <- err
	}
}

// RoundTrips implements Batcher.
func (p *pipePair) RoundTrips(ctx context.Context, payload []byte, n int) error {
	return runPairs(ctx, &p.run, payload, n, func(m *message.Message) error { return p.out.Send(ctx, m) })
}

func (p *pipePair) RoundTrip(ctx context.Context, payload []byte) error {
	return p.RoundTrips(ctx, payload, 1)
}

// WireBytes is the endpoint frame (service DataService, the pipe's key as
// parameter) plus the JXTA message around the payload.
func (p *pipePair) WireBytes(size int) int {
	n, _ := wire.Size(payloadMessage(make([]byte, size)))
	return int(n) - size + uvarintLen(len(pipe.DataService)) + len(pipe.DataService) +
		uvarintLen(len(p.key)) + len(p.key) + uvarintLen(int(n))
}

func uvarintLen(n int) int {
	return len(binary.AppendUvarint(nil, uint64(n)))
}

// SocketLayer measures sockets: the payload is written on a socket
// connection and the other node echoes every byte back.
type SocketLayer struct{}

// Name implements Layer.
func (SocketLayer) Name() string { return "socket" }

// Open implements Layer.
func (SocketLayer) Open(ctx context.Context, transport string) (Pair, error) {
	s, err := openStack(ctx, transport)
	if err != nil {
		return nil, err
	}
	p := &socketPair{stack: s}
	fail := func(err error) (Pair, error) {
		p.Close()
		return nil, fmt.Errorf("lab: socket layer: %w", err)
	}
	a, err := adv.New(adv.Unicast, "lab-socket", "")
	if err != nil {
		return fail(err)
	}
	if p.sa, err = socket.New(s.pa); err != nil {
		return fail(err)
	}
	if p.sb, err = socket.New(s.pb); err != nil {
		return fail(err)
	}
	l, err := p.sb.Listen(a)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	if p.c, err = p.sa.Dial(ctx, a); err != nil {
		return fail(err)
	}
	srv, err := l.AcceptContext(ctx)
	if err != nil {
		return fail(err)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer srv.Close()
		io.CopyBuffer(srv, srv, make([]byte, 256<<10))
	}()
	return p, nil
}

type socketPair struct {
	*stack
	sa, sb *socket.Service
	c      *socket.Conn
	wg     sync.WaitGroup
	buf    []byte
}

func (p *socketPair) RoundTrip(ctx context.Context, payload []byte) error {
	if cap(p.buf) < len(payload) {
		p.buf = make([]byte, len(payload))
	}
	stop := context.AfterFunc(ctx, func() { p.c.Close() })
	defer stop()
	// Small payloads are written before reading; large ones are written
	// while the echo is read, or both sides' windows fill and stall.
	if len(payload) <= 64<<10 {
		if _, err := p.c.Write(payload); err != nil {
			return err
		}
		_, err := io.ReadFull(p.c, p.buf[:len(payload)])
		return err
	}
	werr := make(chan error, 1)
	go func() {
		_, err := p.c.Write(payload)
		werr <- err
	}()
	_, rerr := io.ReadFull(p.c, p.buf[:len(payload)])
	return errors.Join(rerr, <-werr)
}

// WireBytes is zero: a socket writes the payload and nothing else.
func (p *socketPair) WireBytes(int) int { return 0 }

func (p *socketPair) Close() error {
	if p.c != nil {
		p.c.Close()
	}
	for _, s := range []*socket.Service{p.sa, p.sb} {
		if s != nil {
			s.Close()
		}
	}
	err := p.stack.Close()
	p.wg.Wait()
	return err
}
