package encoding_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// chanPipe is an in-memory pipe end: it sends on out and receives from in,
// passing messages through the wire format like a real pipe.
type chanPipe struct {
	out chan<- []byte
	in  <-chan []byte
}

func (p chanPipe) Send(ctx context.Context, m *message.Message) error {
	b, err := wire.Marshal(m)
	if err != nil {
		return err
	}
	select {
	case p.out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p chanPipe) Receive(ctx context.Context) (*message.Message, error) {
	select {
	case b := <-p.in:
		return wire.Unmarshal(b)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func pipePair() (chanPipe, chanPipe) {
	ab, ba := make(chan []byte, 4), make(chan []byte, 4)
	return chanPipe{out: ab, in: ba}, chanPipe{out: ba, in: ab}
}

func TestBidiAdapters(t *testing.T) {
	ctx := t.Context()
	g := gzip.New()
	s, err := encoding.New([]encoding.Codec{g})
	if err != nil {
		t.Fatal(err)
	}
	a, b := pipePair()
	ba, err := encoding.NewBidi(a, s)
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := encoding.NewBidi(b, s)

	// The paper's steps: adapter -> producer -> selected elements -> send.
	p := ba.Producer()
	doc := datasets.Employees(500)
	m := message.New(p.XML("", "A", doc), message.Element{Name: "B", MIME: message.XMLUTF8, Data: doc})
	if err := ba.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(m.At(0).Data) != unsafe.SliceData(doc) {
		t.Fatal("Send modified the caller's message")
	}
	got, err := bb.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := got.Get("", "A"); a.MIME != message.XMLUTF8 || string(a.Data) != string(doc) {
		t.Fatal("element A not restored")
	}
	// Raw view: only A was encoded on the wire.
	if err := bb.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	raw, err := a.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !encoding.IsEncoded(raw.At(0)) || encoding.IsEncoded(raw.At(1)) || len(raw.At(0).Data) > len(doc)/4 {
		t.Fatal("wire message not selectively encoded")
	}
}

func TestAdapterErrors(t *testing.T) {
	s, _ := encoding.NewDecoder()
	if _, err := encoding.NewOutput(nil, s); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatal(err)
	}
	if _, err := encoding.NewInput(nil, s); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatal(err)
	}
	a, b := pipePair()
	in, _ := encoding.NewInput(b, s)
	bad := message.New(message.Element{Name: "x", MIME: encoding.MIME, Data: []byte("junk")})
	if err := a.Send(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Receive(t.Context()); !errors.Is(err, encoding.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := in.Receive(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	// A nil message goes to the pipe unencoded, which refuses it.
	out, _ := encoding.NewOutput(a, s)
	if err := out.Send(t.Context(), nil); !errors.Is(err, wire.ErrUnencodable) {
		t.Fatalf("Output.Send(nil): %v", err)
	}
	bidi, _ := encoding.NewBidi(a, &observer{Scheme: s})
	if err := bidi.Send(t.Context(), nil); !errors.Is(err, wire.ErrUnencodable) {
		t.Fatalf("Bidi.Send(nil): %v", err)
	}
}

// observer is a scheme that records what an Output tells it of its
// deliveries.
type observer struct {
	encoding.Scheme
	events []string
}

func (o *observer) Sending(*message.Message) { o.events = append(o.events, "sending") }

func (o *observer) Delivered(ok bool) {
	if ok {
		o.events = append(o.events, "delivered")
	} else {
		o.events = append(o.events, "lost")
	}
}

// flushPipe is a chanPipe that can be flushed, failing when told.
type flushPipe struct {
	chanPipe
	err error
}

func (p *flushPipe) Flush(context.Context) error { return p.err }

// An Output tells an Observer scheme when each message leaves and when
// what left was acknowledged (Flush, or a Bidi's answer), or lost; over a
// Sender that cannot flush, Flush tells nothing.
func TestOutputTellsTheObserver(t *testing.T) {
	ctx := context.Background()
	dec, _ := encoding.NewDecoder()
	for _, tc := range []struct {
		name string
		run  func(o *observer, a, b chanPipe) error
		want string
	}{
		{"flushed", func(o *observer, a, _ chanPipe) error {
			out, _ := encoding.NewOutput(&flushPipe{chanPipe: a}, o)
			out.Send(ctx, message.New(message.Text("", "x", "1")))
			out.Send(ctx, message.New(message.Text("", "x", "2")))
			return out.Flush(ctx)
		}, "sending sending delivered"},
		{"flush failed", func(o *observer, a, _ chanPipe) error {
			out, _ := encoding.NewOutput(&flushPipe{chanPipe: a, err: errors.New("gone")}, o)
			out.Send(ctx, message.New(message.Text("", "x", "1")))
			if err := out.Flush(ctx); err == nil {
				return errors.New("flush error lost")
			}
			return nil
		}, "sending lost"},
		{"cannot flush", func(o *observer, a, _ chanPipe) error {
			out, _ := encoding.NewOutput(a, o)
			out.Send(ctx, message.New(message.Text("", "x", "1")))
			return out.Flush(ctx)
		}, "sending"},
		{"answered", func(o *observer, a, b chanPipe) error {
			bidi, _ := encoding.NewBidi(a, o)
			bidi.Send(ctx, message.New(message.Text("", "x", "1")))
			b.Receive(ctx)
			b.Send(ctx, message.New(message.Text("", "ack", "1")))
			_, err := bidi.Receive(ctx)
			return err
		}, "sending delivered"},
		{"asked twice", func(o *observer, a, b chanPipe) error {
			bidi, _ := encoding.NewBidi(a, o)
			for i := range 2 {
				bidi.Send(ctx, message.New(message.Text("", "x", fmt.Sprint(i))))
				b.Receive(ctx)
				b.Send(ctx, message.New(message.Text("", "ack", fmt.Sprint(i))))
				if _, err := bidi.Receive(ctx); err != nil {
					return err
				}
			}
			return nil
		}, "sending delivered sending delivered"},
		// The answering side: the time from its answer to the next
		// request is the asking side's pause, not the path's.
		{"answering", func(o *observer, a, b chanPipe) error {
			bidi, _ := encoding.NewBidi(a, o)
			for i := range 2 {
				b.Send(ctx, message.New(message.Text("", "x", fmt.Sprint(i))))
				if _, err := bidi.Receive(ctx); err != nil {
					return err
				}
				bidi.Send(ctx, message.New(message.Text("", "ack", fmt.Sprint(i))))
				b.Receive(ctx)
			}
			return nil
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &observer{Scheme: dec}
			a, b := pipePair()
			if err := tc.run(o, a, b); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(o.events, " "); got != tc.want {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
		})
	}
}
