package encoding

import (
	"errors"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Scheme encodes selected elements of outgoing messages and decodes the
// encoded elements of incoming ones. Implementations are safe for
// concurrent use and never modify their argument.
type Scheme interface {
	Encode(m *message.Message) (*message.Message, error)
	Decode(m *message.Message) (*message.Message, error)
}

// Policy says what Decode does with an element it cannot decode.
type Policy int

const (
	// DropMessage makes Decode fail with an *ElementError and return no
	// message. It is the default.
	DropMessage Policy = iota
	// DeliverEncoded makes Decode leave the element encoded (IsEncoded
	// reports true, its MIME is MIME) and deliver the rest of the message;
	// the error is passed to the WithErrorHandler function, if any.
	DeliverEncoded
)

// Default limits.
const (
	DefaultMaxElementSize = 16 << 20
	DefaultMaxMessageSize = 64 << 20
	// MaxDepth is how many encodings may be nested in one element.
	MaxDepth = 4
)

// Option configures a Codecs scheme.
type Option func(*config) error

type config struct {
	sel     Selector
	reg     *Registry
	maxElem int
	maxMsg  int
	policy  Policy
	pipeID  string
	onErr   func(*ElementError)
}

// WithSelector sets which elements Encode encodes, in addition to those
// created through a Producer. Default: only Producer-marked elements.
func WithSelector(s Selector) Option {
	return func(c *config) error {
		if s == nil {
			return fmt.Errorf("%w: nil selector", ErrBadOption)
		}
		c.sel = Any(Marked(), s)
		return nil
	}
}

// WithRegistry sets the registry Decode looks codecs up in. Default:
// Default().
func WithRegistry(r *Registry) Option {
	return func(c *config) error {
		if r == nil {
			return fmt.Errorf("%w: nil registry", ErrBadOption)
		}
		c.reg = r
		return nil
	}
}

// WithLimits sets the maximum decoded size of one element and of all the
// decoded elements of one message, in bytes. Both must be positive and
// element <= message. Default: 16 MiB and 64 MiB.
func WithLimits(element, message int) Option {
	return func(c *config) error {
		if element <= 0 || message <= 0 || element > message {
			return fmt.Errorf("%w: limits %d/%d", ErrBadOption, element, message)
		}
		c.maxElem, c.maxMsg = element, message
		return nil
	}
}

// WithPolicy sets what Decode does with undecodable elements. Default:
// DropMessage.
func WithPolicy(p Policy) Option {
	return func(c *config) error {
		if p != DropMessage && p != DeliverEncoded {
			return fmt.Errorf("%w: policy %d", ErrBadOption, p)
		}
		c.policy = p
		return nil
	}
}

// WithPipeID binds encoded elements to a pipe: authenticating codecs
// include it in the associated data, so an element sealed for one pipe
// does not open on another. Default: "".
func WithPipeID(id string) Option {
	return func(c *config) error { c.pipeID = id; return nil }
}

// WithErrorHandler sets a function called with each element Decode leaves
// encoded under DeliverEncoded. Default: none.
func WithErrorHandler(f func(*ElementError)) Option {
	return func(c *config) error { c.onErr = f; return nil }
}

// Codecs is a Scheme that encodes each selected element with its codecs in
// order (compress, then encrypt), each encoding wrapping the previous one.
type Codecs struct {
	codecs []Codec
	config
}

var _ Scheme = (*Codecs)(nil)

// New returns a scheme encoding selected elements with codecs applied in
// order. Decode needs no codecs of its own: it decodes every encoded
// element with the codecs found in the registry by the names the headers
// record. At least one codec is required.
func New(codecs []Codec, opts ...Option) (*Codecs, error) {
	if len(codecs) == 0 || len(codecs) > MaxDepth {
		return nil, fmt.Errorf("%w: need 1 to %d codecs, got %d", ErrBadOption, MaxDepth, len(codecs))
	}
	for _, c := range codecs {
		if c == nil {
			return nil, fmt.Errorf("%w: nil codec", ErrBadOption)
		}
		if n := c.Name(); n == "" || len(n) > MaxCodecName {
			return nil, fmt.Errorf("%w: codec name %q", ErrBadOption, n)
		}
	}
	s := &Codecs{codecs: codecs, config: config{
		sel: Marked(), reg: defaultRegistry,
		maxElem: DefaultMaxElementSize, maxMsg: DefaultMaxMessageSize,
	}}
	for _, o := range opts {
		if err := o(&s.config); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Producer returns the scheme's element producer.
func (s *Codecs) Producer() Producer { return Producer{} }

// Encode returns a copy of m whose selected elements are encoded. The
// other elements are shared with m, data and all; if nothing is selected,
// m itself is returned.
func (s *Codecs) Encode(m *message.Message) (*message.Message, error) {
	var out *message.Message
	for i, e := range m.All() {
		if IsEncoded(e) || !s.sel.Select(e) {
			continue
		}
		enc, err := s.EncodeElement(e)
		if err != nil {
			return nil, &ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Err: err}
		}
		if out == nil {
			out = m.Clone()
		}
		out.Set(i, enc)
	}
	if out == nil {
		return m, nil
	}
	return out, nil
}

// EncodeElement encodes one element with the scheme's codecs, whatever
// the selector says.
func (s *Codecs) EncodeElement(e message.Element) (message.Element, error) {
	data, mime := e.Data, stripMark(e.MIME)
	for _, c := range s.codecs {
		if len(mime) > MaxMIME {
			return e, fmt.Errorf("%w: MIME type longer than %d", ErrBadOption, MaxMIME)
		}
		h := Header{Codec: c.Name(), Params: c.Params(), MIME: mime, Size: uint64(len(data))}
		buf := AppendHeader(make([]byte, 0, 64+len(data)/2), h)
		hl := len(buf)
		b := Binding{Namespace: e.Namespace, Name: e.Name, PipeID: s.pipeID, Header: buf[:hl:hl]}
		var err error
		buf, err = c.Encode(buf, data, b)
		if err != nil {
			return e, fmt.Errorf("codec %s: %w", c.Name(), err)
		}
		data, mime = buf, MIME
	}
	return message.Element{Namespace: e.Namespace, Name: e.Name, MIME: MIME, Data: data, Signature: e.Signature}, nil
}

// Decode returns a copy of m with its encoded elements restored. Elements
// that are not encoded are shared with m; if none is encoded, m itself is
// returned. See Policy for what happens to elements that fail.
func (s *Codecs) Decode(m *message.Message) (*message.Message, error) {
	return decode(m, &s.config)
}

// NewDecoder returns a Scheme with no codecs of its own, for receivers:
// its Decode restores encoded elements with the registry's codecs and its
// Encode returns messages unchanged. It takes the same options as New
// (WithSelector has no effect).
func NewDecoder(opts ...Option) (*Decoder, error) {
	d := &Decoder{config{sel: Marked(), reg: defaultRegistry, maxElem: DefaultMaxElementSize, maxMsg: DefaultMaxMessageSize}}
	for _, o := range opts {
		if err := o(&d.config); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Decoder decodes encoded elements; it encodes nothing.
type Decoder struct{ config }

var _ Scheme = (*Decoder)(nil)

// Encode returns m unchanged.
func (d *Decoder) Encode(m *message.Message) (*message.Message, error) { return m, nil }

// Decode is Codecs.Decode.
func (d *Decoder) Decode(m *message.Message) (*message.Message, error) { return decode(m, &d.config) }

func decode(m *message.Message, c *config) (*message.Message, error) {
	var out *message.Message
	budget := c.maxMsg
	for i, e := range m.All() {
		if !IsEncoded(e) {
			continue
		}
		dec, codec, err := c.decodeElement(e, min(c.maxElem, budget))
		if err != nil {
			ee := &ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Codec: codec, Err: err}
			if c.policy == DropMessage {
				return nil, ee
			}
			if c.onErr != nil {
				c.onErr(ee)
			}
			continue
		}
		budget -= len(dec.Data)
		if out == nil {
			out = m.Clone()
		}
		out.Set(i, dec)
	}
	if out == nil {
		return m, nil
	}
	return out, nil
}

// DecodeElement restores one encoded element, within max decoded bytes.
func DecodeElement(e message.Element, r *Registry, pipeID string, max int) (message.Element, error) {
	c := config{reg: r, pipeID: pipeID}
	d, _, err := c.decodeElement(e, max)
	return d, err
}

func (c *config) decodeElement(e message.Element, max int) (message.Element, string, error) {
	data, mime := e.Data, e.MIME
	for depth := 0; mime == MIME; depth++ {
		if depth == MaxDepth {
			return e, "", ErrNestedTooDeep
		}
		h, hl, err := ParseHeader(data)
		if err != nil {
			return e, "", err
		}
		if h.Size > uint64(max) {
			return e, h.Codec, fmt.Errorf("%w: %d bytes recorded, limit %d", ErrTooLarge, h.Size, max)
		}
		codec, err := c.reg.Lookup(h.Codec)
		if err != nil {
			return e, h.Codec, err
		}
		b := Binding{Namespace: e.Namespace, Name: e.Name, PipeID: c.pipeID, Header: data[:hl:hl]}
		// Preallocate what an honest payload needs, but not all a lying
		// header claims: codecs grow dst themselves within the limit.
		prealloc := min(int(h.Size), 64<<10+16*len(data[hl:]))
		out, err := codec.Decode(make([]byte, 0, prealloc), data[hl:], h.Params, b, int(h.Size))
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrAuth) && !errors.Is(err, ErrNoKey) &&
				!errors.Is(err, ErrNoDictionary) && !errors.Is(err, ErrCorrupt) {
				err = fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
			return e, h.Codec, err
		}
		if uint64(len(out)) != h.Size {
			return e, h.Codec, fmt.Errorf("%w: decoded %d bytes, header says %d", ErrCorrupt, len(out), h.Size)
		}
		data, mime = out, h.MIME
	}
	return message.Element{Namespace: e.Namespace, Name: e.Name, MIME: mime, Data: data, Signature: e.Signature}, "", nil
}
