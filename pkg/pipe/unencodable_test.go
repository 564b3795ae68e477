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

// sendFunc is a Bidi's or an output pipe's Send.
type sendFunc func(context.Context, *message.Message) error

// keepsConnection runs refuse, Sends that must fail with nothing sent, on
// a Bidi from sa to sb and on a unicast output pipe from sa to sb (a its
// advertisement, for the error to name), and checks that each is usable
// after: the Bidi still open, the output pipe at the same peer, and a
// message sent next the first to arrive.
func keepsConnection(t *testing.T, sa, sb *pipe.Service, to pipe.ResolveOption, refuse func(a *adv.PipeAdvertisement, what string, send sendFunc)) {
	t.Helper()
	l, err := sb.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, srv := connected(t, sa, l, to)
	defer c.Close()
	refuse(l.Adv(), "Bidi.Send", c.Send)
	if c.Err() != nil {
		t.Fatalf("the Bidi ended: %v", c.Err())
	}
	if err := c.Send(ctx(t), message.New(message.Text("", "q", "after"))); err != nil {
		t.Fatalf("Bidi.Send after the refused ones: %v", err)
	}
	if m, err := srv.Receive(ctx(t)); err != nil || text(m, "q") != "after" {
		t.Fatalf("the Bidi's other end: %v %v, want the message sent after", m, err)
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
	refuse(uni, "OutputPipe.Send", out.Send)
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
		t.Fatalf("input pipe: %v %v, want the message sent after", m, err)
	}
}

// A message that cannot be encoded is refused before anything is sent:
// the Bidi stays open and the output pipe keeps its peer, where they
// ended the connection and forgot the binder (for an unnamed unicast pipe,
// the next Send could go to another peer claiming it). A propagate pipe's
// error names the pipe, as the others' do.
func TestUnencodableSendKeepsConnection(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	keepsConnection(t, sa, sb, pipe.ToPeers(nodes[1].AddrInfo()), func(a *adv.PipeAdvertisement, what string, send sendFunc) {
		if err := send(ctx(t), unencodable()); !errors.Is(err, wire.ErrUnencodable) || !strings.Contains(err.Error(), a.ID.String()) {
			t.Fatalf("%s of an unencodable message: %v", what, err)
		}
	})

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
	big := message.New(message.Bytes("", "q", make([]byte, 512<<10)))
	keepsConnection(t, sa, sb, pipe.ToPeers(nodes[1].AddrInfo()), func(_ *adv.PipeAdvertisement, what string, send sendFunc) {
		var le *endpoint.LimitError
		if err := send(ctx(t), big); !errors.As(err, &le) || !errors.Is(err, endpoint.ErrTooLarge) {
			t.Fatalf("%s over the limit: %v", what, err)
		}
	})
}

// A Send whose ctx is already done, and a Send of a nil message, send
// nothing: the Bidi stays open and the output pipe keeps its peer. Before,
// a done ctx ended the Bidi whenever the Send had to wait for its stream's
// writer (the wait honoured the ctx), and went through when it did not;
// a nil message panicked in the endpoint.
func TestNothingSentKeepsConnection(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	done, cancel := context.WithCancel(ctx(t))
	cancel()
	keepsConnection(t, sa, sb, pipe.ToPeers(nodes[1].AddrInfo()), func(_ *adv.PipeAdvertisement, what string, send sendFunc) {
		for i := range 20 { // the old code ended the Bidi in about half of them
			if err := send(done, message.New(message.Text("", "q", "x"))); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s %d with a done ctx: %v", what, i, err)
			}
		}
		if err := send(ctx(t), nil); !errors.Is(err, wire.ErrUnencodable) {
			t.Fatalf("%s of nil: %v", what, err)
		}
	})
}
