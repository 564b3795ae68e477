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
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// PipeLayer measures unicast pipes: a message with one element holding
// the payload goes through an output pipe to the other node's input pipe,
// whose handler sends it back through an output pipe of a second pipe.
// As in the endpoint layer, the reply pipe's handler sends the next
// message of a run itself, and both handlers release each message.
type PipeLayer struct{}

// Name implements Layer.
func (PipeLayer) Name() string { return "pipe" }

// Open implements Layer.
func (l PipeLayer) Open(ctx context.Context, transport string) (Pair, error) {
	return openOwn(ctx, transport, l)
}

func (PipeLayer) openOn(ctx context.Context, s *stack) (Pair, error) {
	fail := func(p *pipePair, err error) (Pair, error) {
		if p != nil {
			p.Close()
		}
		return nil, fmt.Errorf("lab: pipe layer: %w", err)
	}
	if err := s.pipes(); err != nil {
		return fail(nil, err)
	}
	there, err1 := adv.New(adv.Unicast, "lab-echo", "")
	back, err2 := adv.New(adv.Unicast, "lab-reply", "")
	if err := errors.Join(err1, err2); err != nil {
		return fail(nil, err)
	}
	p := &pipePair{key: pipe.Key(there.ID)}
	var err error
	if p.reply, err = s.pa.NewInputPipe(back, pipe.WithHandler(p.onReply)); err != nil {
		return fail(p, err)
	}
	var echo atomic.Pointer[pipe.OutputPipe]
	if p.echo, err = s.pb.NewInputPipe(there, pipe.WithHandler(func(r *pipe.Received) {
		if out := echo.Load(); out != nil {
			out.Send(context.Background(), r.Message)
		}
		r.Release() // Send has written it
	})); err != nil {
		return fail(p, err)
	}
	if p.back, err = s.pb.NewOutputPipe(ctx, back); err != nil {
		return fail(p, err)
	}
	echo.Store(p.back)
	if p.out, err = s.pa.NewOutputPipe(ctx, there); err != nil {
		return fail(p, err)
	}
	return p, nil
}

type pipePair struct {
	out, back   *pipe.OutputPipe
	echo, reply *pipe.InputPipe
	key         string
	run         atomic.Pointer[endpointRun]
}

// Close closes the pair's pipes; the stack stays up.
func (p *pipePair) Close() error {
	var errs []error
	for _, o := range []*pipe.OutputPipe{p.out, p.back} {
		if o != nil {
			errs = append(errs, o.Close())
		}
	}
	for _, in := range []*pipe.InputPipe{p.echo, p.reply} {
		if in != nil {
			errs = append(errs, in.Close())
		}
	}
	return errors.Join(errs...)
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
// parameter) plus the JXTA message around the payload, for a message that
// leaves alone: one of a batch to the same pipe names neither.
func (p *pipePair) WireBytes(size int) int {
	n, _ := wire.Size(payloadMessage(make([]byte, size)))
	return int(n) - size + uvarintLen(len(pipe.DataService)+1) + len(pipe.DataService) +
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
func (l SocketLayer) Open(ctx context.Context, transport string) (Pair, error) {
	return openOwn(ctx, transport, l)
}

func (SocketLayer) openOn(ctx context.Context, s *stack) (Pair, error) {
	p := &socketPair{}
	fail := func(err error) (Pair, error) {
		p.Close()
		return nil, fmt.Errorf("lab: socket layer: %w", err)
	}
	if err := s.pipes(); err != nil {
		return fail(err)
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

// Close closes the connection and the socket services, and waits for
// the echo to end; the stack stays up.
func (p *socketPair) Close() error {
	if p.c != nil {
		p.c.Close()
	}
	for _, s := range []*socket.Service{p.sa, p.sb} {
		if s != nil {
			s.Close()
		}
	}
	p.wg.Wait()
	return nil
}
