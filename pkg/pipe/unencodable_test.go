package pipe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// unencodable is a message the wire format cannot carry: its element's
// MIME type is not one.
func unencodable() *message.Message {
	return message.New(message.Element{Name: "x", MIME: "not a mime", Data: []byte("x")})
}

// A message that cannot be encoded is refused before anything is sent:
// the Bidi stays open and the output pipe keeps its peer, where they
// ended the connection and forgot the binder (for an unnamed unicast pipe,
// the next Send could go to another peer claiming it). A propagate pipe's
// error names the pipe, as the others' do.
func TestUnencodableSendKeepsConnection(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])

	bi := newAdv(t, adv.Unicast)
	l, err := sb.Listen(bi)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *pipe.Bidi, 1)
	go func() {
		c, err := l.Accept(ctx(t))
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := sa.Connect(ctx(t), bi)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := <-accepted
	if srv == nil {
		t.FailNow()
	}
	defer srv.Close()
	err = c.Send(ctx(t), unencodable())
	if !errors.Is(err, wire.ErrUnencodable) || !strings.Contains(err.Error(), bi.ID.String()) {
		t.Fatalf("Bidi.Send of an unencodable message: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("the Bidi ended: %v", c.Err())
	}
	if err := c.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatalf("Send after the refused one: %v", err)
	}
	m, err := srv.Receive(ctx(t))
	if err != nil || text(m, "q") != "after" {
		t.Fatalf("other end: %v %v", m, err)
	}

	uni := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(uni)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := sa.NewOutputPipe(ctx(t), uni)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = out.Send(ctx(t), unencodable())
	if !errors.Is(err, wire.ErrUnencodable) || !strings.Contains(err.Error(), uni.ID.String()) {
		t.Fatalf("OutputPipe.Send of an unencodable message: %v", err)
	}
	if out.RemotePeer() != nodes[1].ID() {
		t.Fatalf("the output pipe forgot its peer: %q", out.RemotePeer())
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatal(err)
	}
	if err := out.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "q") != "after" {
		t.Fatalf("input pipe: %v %v", m, err)
	}

	room := newAdv(t, adv.Propagate)
	pout, err := sa.NewOutputPipe(ctx(t), room)
	if err != nil {
		t.Fatal(err)
	}
	defer pout.Close()
	err = pout.Send(ctx(t), unencodable())
	if !errors.Is(err, wire.ErrUnencodable) || !strings.Contains(err.Error(), room.ID.String()) {
		t.Fatalf("propagate Send of an unencodable message: %v", err)
	}
}

// A message over the receiving peer's limit is refused at the sender, once
// it knows the limit, before any of it is written: as for an unencodable
// one, the Bidi stays open and the output pipe keeps its peer.
func TestOversizedSendKeepsConnection(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa := newPipes(t, nodes[0])
	ep, err := endpoint.New(nodes[1], endpoint.WithMaxMessageSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(); ep.Close() })
	big := func() *message.Message { return message.New(message.Bytes("", "q", make([]byte, 512<<10))) }

	bi := newAdv(t, adv.Unicast)
	l, err := sb.Listen(bi)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *pipe.Bidi, 1)
	go func() {
		c, err := l.Accept(ctx(t))
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := sa.Connect(ctx(t), bi)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := <-accepted
	if srv == nil {
		t.FailNow()
	}
	defer srv.Close()
	if err := c.Send(ctx(t), message.New(message.Text("", "q", "before"))); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx(t)); err != nil { // the limit is known by now
		t.Fatal(err)
	}
	var le *endpoint.LimitError
	if err := c.Send(ctx(t), big()); !errors.As(err, &le) || !errors.Is(err, endpoint.ErrTooLarge) {
		t.Fatalf("Bidi.Send over the limit: %v", err)
	}
	if c.Err() != nil {
		t.Fatalf("the Bidi ended: %v", c.Err())
	}
	if err := c.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatalf("Send after the refused one: %v", err)
	}
	for _, want := range []string{"before", "after"} {
		if m, err := srv.Receive(ctx(t)); err != nil || text(m, "q") != want {
			t.Fatalf("other end, want %q: %v %v", want, m, err)
		}
	}

	uni := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(uni)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := sa.NewOutputPipe(ctx(t), uni)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.Send(ctx(t), big()); !errors.As(err, &le) {
		t.Fatalf("OutputPipe.Send over the limit: %v", err)
	}
	if out.RemotePeer() != nodes[1].ID() {
		t.Fatalf("the output pipe forgot its peer: %q", out.RemotePeer())
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatal(err)
	}
	if err := out.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "q") != "after" {
		t.Fatalf("input pipe: %v %v", m, err)
	}
}

// A Send whose ctx is already done, and a Send of a nil message, send
// nothing: the Bidi stays open and the output pipe keeps its peer. Before,
// a done ctx ended the Bidi whenever the Send had to wait for its stream's
// writer (the wait honoured the ctx), and went through when it did not;
// a nil message panicked in the endpoint.
func TestNothingSentKeepsConnection(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	l, err := sb.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	to := pipe.ToPeers(nodes[1].AddrInfo())
	c, srv := connected(t, sa, l, to)
	defer c.Close()
	done, cancel := context.WithCancel(ctx(t))
	cancel()
	for i := range 20 { // the old code ended the Bidi in about half of them
		if err := c.Send(done, message.New(message.Text("", "q", "x"))); !errors.Is(err, context.Canceled) {
			t.Fatalf("Bidi.Send %d with a done ctx: %v", i, err)
		}
		if c.Err() != nil {
			t.Fatalf("Bidi.Send %d with a done ctx ended the Bidi: %v", i, c.Err())
		}
	}
	if err := c.Send(ctx(t), nil); !errors.Is(err, wire.ErrUnencodable) || c.Err() != nil {
		t.Fatalf("Bidi.Send of nil: %v; Bidi's end %v", err, c.Err())
	}
	if err := c.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatal(err)
	}
	if m, err := srv.Receive(ctx(t)); err != nil || text(m, "q") != "after" {
		t.Fatalf("other end: %v %v (the done ctx's messages must not arrive)", m, err)
	}

	uni := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(uni)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := sa.NewOutputPipe(ctx(t), uni, to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	binder := out.RemotePeer()
	for i := range 20 {
		if err := out.Send(done, message.New(message.Text("", "q", "x"))); !errors.Is(err, context.Canceled) {
			t.Fatalf("OutputPipe.Send %d with a done ctx: %v", i, err)
		}
	}
	if err := out.Send(ctx(t), nil); !errors.Is(err, wire.ErrUnencodable) {
		t.Fatalf("OutputPipe.Send of nil: %v", err)
	}
	if out.RemotePeer() != binder {
		t.Fatalf("the output pipe forgot its peer: %q, was %q", out.RemotePeer(), binder)
	}
	if err := out.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatal(err)
	}
	if err := out.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "q") != "after" {
		t.Fatalf("input pipe: %v %v (the done ctx's messages must not arrive)", m, err)
	}
}
