package encoding

import (
	"context"
	"fmt"
	"sync"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Sender sends messages; an output pipe satisfies it.
type Sender interface {
	Send(ctx context.Context, m *message.Message) error
}

// Receiver receives messages; an input pipe satisfies it.
type Receiver interface {
	Receive(ctx context.Context) (*message.Message, error)
}

// SendReceiver is both, as a bidirectional pipe is.
type SendReceiver interface {
	Sender
	Receiver
}

// Observer is a Scheme that learns from how long its messages take to be
// acknowledged (package adaptive's does). Output calls Sending with each
// encoded message just before handing it to its Sender, and Delivered
// once everything handed over since the last Delivered is acknowledged:
// when Flush returns nil, or, on a Bidi, when a message comes back (the
// answer to a request). Delivered(false) says that a Send or Flush failed
// and what was handed over is not to be timed. Calls for one Output are
// not concurrent with each other when its user does not send concurrently.
type Observer interface {
	Sending(m *message.Message)
	Delivered(ok bool)
}

// Output is the paper's outgoing adapter: it encodes each message with its
// scheme and sends the result on the wrapped Sender.
type Output struct {
	next   Sender
	scheme Scheme
	obs    Observer // the scheme, if it observes deliveries
}

var _ Sender = (*Output)(nil)

// NewOutput wraps next with scheme.
func NewOutput(next Sender, scheme Scheme) (*Output, error) {
	if next == nil || scheme == nil {
		return nil, fmt.Errorf("%w: nil sender or scheme", ErrBadOption)
	}
	obs, _ := scheme.(Observer)
	return &Output{next: next, scheme: scheme, obs: obs}, nil
}

// Producer returns the element producer: elements it creates are encoded
// by Send.
func (o *Output) Producer() Producer { return Producer{} }

// Send encodes m (m itself is not modified) and sends the result. A nil m
// goes to the wrapped Sender as it is, unencoded: a pipe refuses it
// (wire.ErrUnencodable).
func (o *Output) Send(ctx context.Context, m *message.Message) error {
	if m == nil {
		return o.next.Send(ctx, nil)
	}
	enc, err := o.scheme.Encode(m)
	if err != nil {
		return err
	}
	if o.obs == nil {
		return o.next.Send(ctx, enc)
	}
	o.obs.Sending(enc)
	if err := o.next.Send(ctx, enc); err != nil {
		o.obs.Delivered(false)
		return err
	}
	return nil
}

// Flush waits until everything sent so far is acknowledged, if the
// wrapped Sender can tell (it has a Flush(ctx) error method, as output
// pipes do), and tells an Observer scheme how long that took; otherwise
// it returns nil at once.
func (o *Output) Flush(ctx context.Context) error {
	f, ok := o.next.(interface{ Flush(context.Context) error })
	if !ok {
		return nil
	}
	err := f.Flush(ctx)
	if o.obs != nil {
		o.obs.Delivered(err == nil)
	}
	return err
}

// Input is the paper's incoming adapter: it decodes each message received
// on the wrapped Receiver.
type Input struct {
	next   Receiver
	scheme Scheme
}

var _ Receiver = (*Input)(nil)

// NewInput wraps next with scheme.
func NewInput(next Receiver, scheme Scheme) (*Input, error) {
	if next == nil || scheme == nil {
		return nil, fmt.Errorf("%w: nil receiver or scheme", ErrBadOption)
	}
	return &Input{next: next, scheme: scheme}, nil
}

// Receive receives one message and decodes it. If the scheme's policy is
// DropMessage and an element fails, Receive returns the *ElementError for
// that message; the next call receives the next message. Only this side
// learns of the failure: the sender's Send and Flush succeed. For the
// sender to be told (a missing model or key), decode in the input pipe's
// handler (pipe.WithHandler) and refuse what fails (pipe.Received.Refuse),
// as the CLI's recv does.
func (i *Input) Receive(ctx context.Context) (*message.Message, error) {
	m, err := i.next.Receive(ctx)
	if err != nil {
		return nil, err
	}
	return i.scheme.Decode(m)
}

// Bidi is the bidirectional adapter: an Output and an Input over one
// SendReceiver with one scheme. A message it receives after sending is
// taken as the answer to what it sent (request and response), which an
// Observer scheme is told of (Observer.Delivered). A message it receives
// otherwise is a request, and what it sends next is the answer: that is
// not timed, since the time until the other side's next message is the
// other side's (a client's pause between requests), not the path's.
type Bidi struct {
	*Output
	*Input

	mu     sync.Mutex
	asked  bool // a message was sent, timed, and nothing came back since
	answer bool // a request came: the next Send answers it
}

// Send is Output.Send; a message that answers a request is not timed.
func (b *Bidi) Send(ctx context.Context, m *message.Message) error {
	if b.obs == nil || m == nil { // nothing timed: nothing to follow
		return b.Output.Send(ctx, m)
	}
	b.mu.Lock()
	answer := b.answer
	b.answer, b.asked = false, b.asked || !answer
	b.mu.Unlock()
	if !answer {
		return b.Output.Send(ctx, m)
	}
	enc, err := b.Output.scheme.Encode(m)
	if err != nil {
		return err
	}
	return b.Output.next.Send(ctx, enc)
}

// Receive is Input.Receive; a message received after a timed Send tells
// an Observer scheme that what was sent before it was delivered.
func (b *Bidi) Receive(ctx context.Context) (*message.Message, error) {
	m, err := b.Input.next.Receive(ctx)
	if err != nil {
		return nil, err
	}
	if b.obs != nil {
		b.mu.Lock()
		asked := b.asked
		b.asked, b.answer = false, !asked
		b.mu.Unlock()
		if asked {
			b.obs.Delivered(true)
		}
	}
	return b.Input.scheme.Decode(m)
}

var _ SendReceiver = (*Bidi)(nil)

// NewBidi wraps next with scheme in both directions.
func NewBidi(next SendReceiver, scheme Scheme) (*Bidi, error) {
	o, err := NewOutput(next, scheme)
	if err != nil {
		return nil, err
	}
	in, err := NewInput(next, scheme)
	if err != nil {
		return nil, err
	}
	return &Bidi{Output: o, Input: in}, nil
}
