package encoding

import (
	"context"
	"fmt"

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

// Output is the paper's outgoing adapter: it encodes each message with its
// scheme and sends the result on the wrapped Sender.
type Output struct {
	next   Sender
	scheme Scheme
}

var _ Sender = (*Output)(nil)

// NewOutput wraps next with scheme.
func NewOutput(next Sender, scheme Scheme) (*Output, error) {
	if next == nil || scheme == nil {
		return nil, fmt.Errorf("%w: nil sender or scheme", ErrBadOption)
	}
	return &Output{next: next, scheme: scheme}, nil
}

// Producer returns the element producer: elements it creates are encoded
// by Send.
func (o *Output) Producer() Producer { return Producer{} }

// Send encodes m (m itself is not modified) and sends the result.
func (o *Output) Send(ctx context.Context, m *message.Message) error {
	enc, err := o.scheme.Encode(m)
	if err != nil {
		return err
	}
	return o.next.Send(ctx, enc)
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
// that message; the next call receives the next message.
func (i *Input) Receive(ctx context.Context) (*message.Message, error) {
	m, err := i.next.Receive(ctx)
	if err != nil {
		return nil, err
	}
	return i.scheme.Decode(m)
}

// Bidi is the bidirectional adapter: an Output and an Input over one
// SendReceiver with one scheme.
type Bidi struct {
	*Output
	*Input
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
