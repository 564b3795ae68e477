package encoding

import (
	"errors"
	"fmt"
	"slices"

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
	// MaxDepth is how many encodings may be nested in one element:
	// compression, then seal.
	MaxDepth = 2
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
	unbound bool
	onErr   func(*ElementError)
	// require lists what WithRequireSealed and WithSealedOnly ask of
	// selected elements.
	require []requirement
	// sealedOnly is set by WithSealedOnly: a message needs a sealed
	// element, and the elements exempt selects are removed.
	sealedOnly bool
	exempt     Selector
	wrap       func(Codec) Codec // WithDecodeWrap's, nil for none
}

// requirement is one WithRequireSealed.
type requirement struct {
	sel    Selector
	keyIDs []string // any key when empty
}

// WithSelector sets which elements Encode encodes, in addition to those
// created through a Producer. Default: only Producer-marked elements.
func WithSelector(s Selector) Option {
	return func(c *config) error {
		if s == nil {
			return fmt.Errorf("%w: nil selector", ErrBadOption)
		}
		c.sel = selectorFunc(func(e message.Element) bool { return isMarked(e) || s.Select(e) })
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
// does not open on another. A scheme that seals needs it (or
// WithoutPipeBinding): sealing with neither fails with ErrUnbound.
func WithPipeID(id string) Option {
	return func(c *config) error {
		if id == "" {
			return fmt.Errorf("%w: empty pipe ID (use WithoutPipeBinding for elements that belong to no pipe)", ErrBadOption)
		}
		c.pipeID, c.unbound = id, false
		return nil
	}
}

// WithoutPipeBinding says that encoded elements belong to no pipe (files,
// frames outside any pipe): authenticating codecs then bind no pipe ID, and
// a sealed element opens wherever it is copied with its namespace and
// name. Without it, a scheme that seals needs WithPipeID.
func WithoutPipeBinding() Option {
	return func(c *config) error { c.pipeID, c.unbound = "", true; return nil }
}

// WithRequireSealed makes Decode refuse, with ErrPolicy, any element sel
// selects that does not arrive sealed (its outermost codec of KindSeal) or,
// when keyIDs are given, that is sealed with a key not among them (seal's
// key IDs: "psk:<name>", "peer:<peer ID>"). Such a message is refused
// whatever the Policy: delivering it without the element would hide that
// it came unprotected. It may be given more than once; each applies.
func WithRequireSealed(sel Selector, keyIDs ...string) Option {
	return func(c *config) error {
		if sel == nil {
			return fmt.Errorf("%w: nil selector", ErrBadOption)
		}
		c.require = append(c.require, requirement{sel: sel, keyIDs: keyIDs})
		return nil
	}
}

// WithSealedOnly makes Decode return only what the keys vouch for. It
// refuses, with ErrPolicy, a message holding an element that exempt does
// not select and that does not arrive sealed with one of keyIDs (any key
// when none are given), and a message holding no such sealed element at
// all (an empty message, or one of exempt elements only, says nothing a key
// vouches for). The elements exempt selects, which nothing vouches for
// (headers a transport adds, that no sender can seal), are removed from
// the message Decode returns; exempt may be nil. Like WithRequireSealed,
// it refuses whatever the Policy. It may be given once.
func WithSealedOnly(exempt Selector, keyIDs ...string) Option {
	return func(c *config) error {
		if c.sealedOnly {
			return fmt.Errorf("%w: WithSealedOnly given twice", ErrBadOption)
		}
		c.sealedOnly, c.exempt = true, exempt
		c.require = append(c.require, requirement{sel: selectorFunc(func(e message.Element) bool { return exempt == nil || !exempt.Select(e) }), keyIDs: keyIDs})
		return nil
	}
}

// exempted reports whether WithSealedOnly's exempt selector selects e.
func (c *config) exempted(e message.Element) bool {
	return c.sealedOnly && c.exempt != nil && c.exempt.Select(e)
}

// WithErrorHandler sets a function called with each element Decode leaves
// encoded under DeliverEncoded. Default: none.
func WithErrorHandler(f func(*ElementError)) Option {
	return func(c *config) error { c.onErr = f; return nil }
}

// WithDecodeWrap makes Decode use f(c) in place of each codec c it finds
// in the registry, to observe decodes (package adaptive times them so:
// adaptive.Models.TimeDecodes). f must return a codec that decodes as c
// does, with its name; nesting rules go by c's kind. f is called for each
// layer of each element, and the codec it returns decodes that layer
// only, so it may keep what it observed until it learns (DecodeAccepter)
// whether the element was accepted. Default: the codecs as registered.
func WithDecodeWrap(f func(Codec) Codec) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil decode wrapper", ErrBadOption)
		}
		c.wrap = f
		return nil
	}
}

// DecodeAccepter is implemented by a codec WithDecodeWrap returns that
// must tell the decodes the encoding layer keeps from those it refuses.
// Accepted is called, after Decode, once every layer of the element
// decoded to the size its header records; a Decode no Accepted follows was
// refused, for its own output or another layer's: what an observer would
// learn from it, a hostile peer chose.
type DecodeAccepter interface{ Accepted() }

// Codecs is a Scheme that encodes each selected element with its codecs in
// order (compress, then encrypt), each encoding wrapping the previous one.
type Codecs struct {
	codecs []Codec
	config
}

var _ Scheme = (*Codecs)(nil)

// New returns a scheme encoding selected elements with codecs applied in
// order. Selected are the elements made through an adapter's Producer
// and those WithSelector selects: with neither, a message goes as it is.
// Decode needs no codecs of its own: it decodes every encoded element
// with the codecs found in the registry by the names the headers record.
// At least one codec is required.
func New(codecs []Codec, opts ...Option) (*Codecs, error) {
	if len(codecs) == 0 || len(codecs) > MaxDepth {
		return nil, fmt.Errorf("%w: need 1 to %d codecs, got %d", ErrBadOption, MaxDepth, len(codecs))
	}
	for _, c := range codecs {
		if c == nil {
			return nil, fmt.Errorf("%w: nil codec", ErrBadOption)
		}
		if n := c.Name(); n == "" || len(n) > maxCodecName {
			return nil, fmt.Errorf("%w: codec name %q", ErrBadOption, n)
		}
	}
	if err := checkNesting(codecs); err != nil {
		return nil, err
	}
	s := &Codecs{codecs: codecs, config: config{
		sel: selectorFunc(isMarked), reg: defaultRegistry,
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
		if !s.Selects(e) {
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

// Selects reports whether Encode would encode e: it is not encoded yet,
// and it was made by a Producer or the WithSelector selector picks it.
func (s *Codecs) Selects(e message.Element) bool { return !IsEncoded(e) && s.sel.Select(e) }

// EncodeElement encodes one element with the scheme's codecs, whatever
// the selector says. An element already encoded is refused (ErrNesting):
// chains are made by giving New several codecs.
func (s *Codecs) EncodeElement(e message.Element) (message.Element, error) {
	if IsEncoded(e) {
		return e, fmt.Errorf("%w: element %q is already encoded", ErrNesting, e.Name)
	}
	data, mime := e.Data, stripMark(e.MIME)
	for _, c := range s.codecs {
		if len(mime) > maxMIME {
			return e, fmt.Errorf("%w: MIME type longer than %d", ErrBadOption, maxMIME)
		}
		h := Header{Codec: c.Name(), Params: c.Params(), MIME: mime, Size: uint64(len(data))}
		buf := appendHeader(make([]byte, 0, 64+len(data)/2), h)
		hl := len(buf)
		b := Binding{Namespace: e.Namespace, Name: e.Name, PipeID: s.pipeID, Header: buf[:hl:hl], Unbound: s.unbound}
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
	out, _, err := decode(m, &s.config, false)
	return out, err
}

// DecodeReport is Decode that also tells how each encoded element was
// decoded.
func (s *Codecs) DecodeReport(m *message.Message) (*message.Message, []ElementReport, error) {
	return decode(m, &s.config, true)
}

// NewDecoder returns a Scheme with no codecs of its own, for receivers:
// its Decode restores encoded elements with the registry's codecs (by
// default those of the codec packages the program imports) and its
// Encode returns messages unchanged. It takes the same options as New
// (WithSelector has no effect).
func NewDecoder(opts ...Option) (*Decoder, error) {
	d := &Decoder{config{sel: selectorFunc(isMarked), reg: defaultRegistry, maxElem: DefaultMaxElementSize, maxMsg: DefaultMaxMessageSize}}
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
func (d *Decoder) Decode(m *message.Message) (*message.Message, error) {
	out, _, err := decode(m, &d.config, false)
	return out, err
}

// DecodeReport is Codecs.DecodeReport.
func (d *Decoder) DecodeReport(m *message.Message) (*message.Message, []ElementReport, error) {
	return decode(m, &d.config, true)
}

// ElementReport tells how one element of a received message was
// protected: what the application can rely on.
type ElementReport struct {
	Index           int // position in the message Decode returns (without the elements WithSealedOnly exempts)
	Namespace, Name string
	// Chain names the codecs that decoded the element, in the order they
	// were applied when encoding (compression first, seal last); empty for
	// an element that arrived plain.
	Chain []string
	// KeyID is the key the seal layer opened the element with ("psk:…",
	// "peer:…"); empty when it was not sealed.
	KeyID string
	// Sealed is true when the outermost layer authenticated the element.
	Sealed bool
	// WireSize and Size are the element's bytes as received and as
	// decoded.
	WireSize, Size int
}

func decode(m *message.Message, c *config, report bool) (*message.Message, []ElementReport, error) {
	var out *message.Message
	var reps []ElementReport
	var dropped []int // indices of exempted elements, removed from out
	sealed := 0
	budget := c.maxMsg
	for i, e := range m.All() {
		if c.exempted(e) {
			dropped = append(dropped, i)
			continue
		}
		at := i - len(dropped) // e's index in the message returned
		if !IsEncoded(e) {
			if err := c.check(e, nil); err != nil {
				return nil, nil, &ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Err: err}
			}
			if report {
				reps = append(reps, ElementReport{Index: at, Namespace: e.Namespace, Name: e.Name, WireSize: len(e.Data), Size: len(e.Data)})
			}
			continue
		}
		if codec, err := c.admit(e); err != nil {
			return nil, nil, &ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Codec: codec, Err: err}
		}
		dec, rep, work, err := c.decodeElement(e, min(c.maxElem, budget), budget)
		budget -= work // every layer a codec decoded, whether it succeeded or not
		if err == nil {
			err = c.check(e, &rep)
			if err != nil {
				return nil, nil, &ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Codec: rep.outer(), Err: err}
			}
		}
		if err != nil {
			ee := &ElementError{Namespace: e.Namespace, Name: e.Name, Index: i, Codec: rep.failed, Err: err}
			if c.policy == DropMessage || errors.Is(err, ErrPolicy) || budget <= 0 || c.required(e) {
				return nil, nil, ee
			}
			if c.onErr != nil {
				c.onErr(ee)
			}
			continue
		}
		if rep.Sealed {
			sealed++
		}
		if report {
			rep.Index = at
			reps = append(reps, rep.ElementReport)
		}
		if out == nil {
			out = m.Clone()
		}
		out.Set(i, dec)
	}
	if c.sealedOnly && sealed == 0 {
		return nil, nil, fmt.Errorf("%w: no sealed element", ErrPolicy)
	}
	if out == nil {
		out = m
	}
	if len(dropped) > 0 {
		if out == m {
			out = m.Clone()
		}
		for _, i := range slices.Backward(dropped) {
			out.RemoveAt(i)
		}
	}
	return out, reps, nil
}

// check applies the requirements to e, decoded as rep says (nil: it
// arrived plain).
func (c *config) check(e message.Element, rep *decodeReport) error {
	for _, r := range c.require {
		if !r.sel.Select(e) {
			continue
		}
		if rep == nil || !rep.Sealed {
			return fmt.Errorf("%w: not sealed", ErrPolicy)
		}
		if len(r.keyIDs) > 0 && !slices.Contains(r.keyIDs, rep.KeyID) {
			return fmt.Errorf("%w: sealed with key %q", ErrPolicy, rep.KeyID)
		}
	}
	return nil
}

// admit applies the requirements to the encoded element e by its outer
// header alone, before it is opened, and returns the header's codec: an
// element the requirements would refuse once opened costs no decryption
// and leaves no trace in a seal codec's replay window (anyone may seal to
// a peer's identity; such elements must not reach the window of a
// receiver that takes only a pre-shared key's). A header that does not
// parse, or names a codec not registered, is left for decodeElement to
// report.
func (c *config) admit(e message.Element) (string, error) {
	if len(c.require) == 0 {
		return "", nil
	}
	h, _, err := ParseHeader(e.Data)
	if err != nil {
		return "", nil
	}
	codec, err := c.reg.Lookup(h.Codec)
	if err != nil {
		return h.Codec, nil
	}
	outer := decodeReport{ElementReport: ElementReport{Sealed: kindOf(codec) == KindSeal, KeyID: h.Params.KeyID}}
	return h.Codec, c.check(e, &outer)
}

// required reports whether a WithRequireSealed requirement selects e: such
// an element that cannot be decoded refuses its message whatever the
// Policy.
func (c *config) required(e message.Element) bool {
	for _, r := range c.require {
		if r.sel.Select(e) {
			return true
		}
	}
	return false
}

// DecodeElement restores one encoded element, within max decoded bytes
// (in all its layers). It takes New's options (WithPipeID, or
// WithoutPipeBinding for elements that belong to no pipe; WithRegistry,
// default Default(); WithDecodeWrap); the others do not apply.
func DecodeElement(e message.Element, max int, opts ...Option) (message.Element, error) {
	c := config{reg: defaultRegistry}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return e, err
		}
	}
	d, _, _, err := c.decodeElement(e, max, max)
	return d, err
}

// decodeReport is what decodeElement learnt.
type decodeReport struct {
	ElementReport
	failed string // the codec that failed, if one did
}

func (r *decodeReport) outer() string {
	if len(r.Chain) == 0 {
		return ""
	}
	return r.Chain[len(r.Chain)-1]
}

// decodeElement restores e, each layer's output within max bytes and all
// layers' together within budget; it returns what its layers cost: the
// sizes their headers record, for every layer a codec was asked to decode.
func (c *config) decodeElement(e message.Element, max, budget int) (message.Element, decodeReport, int, error) {
	rep := decodeReport{ElementReport: ElementReport{Namespace: e.Namespace, Name: e.Name, WireSize: len(e.Data)}}
	data, mime := e.Data, e.MIME
	work := 0
	var outerKind Kind
	var wrapped [MaxDepth]Codec // told once the element is accepted
	for depth := 0; mime == MIME; depth++ {
		if depth == MaxDepth {
			return e, rep, work, ErrNestedTooDeep
		}
		h, hl, err := ParseHeader(data)
		if err != nil {
			return e, rep, work, err
		}
		rep.failed = h.Codec
		limit := min(max, budget-work)
		if h.Size > uint64(limit) {
			return e, rep, work, fmt.Errorf("%w: %d bytes recorded, limit %d", ErrTooLarge, h.Size, limit)
		}
		codec, err := c.reg.Lookup(h.Codec)
		if err != nil {
			return e, rep, work, err
		}
		// Decoding runs outside in: seal, then what it sealed, which can
		// only be compression.
		kind := kindOf(codec)
		if c.wrap != nil {
			codec = c.wrap(codec)
			wrapped[depth] = codec
		}
		if depth == 1 && (outerKind != KindSeal || kind != KindCompression) {
			return e, rep, work, fmt.Errorf("%w: %s inside %s", ErrNesting, h.Codec, rep.outer())
		}
		outerKind = kind
		b := Binding{Namespace: e.Namespace, Name: e.Name, PipeID: c.pipeID, Header: data[:hl:hl], Unbound: c.unbound}
		// The layer costs the size its header records, decoded or not: a
		// codec may make room for up to that much before it finds the
		// payload holds less, so a lying size spends the budget as an
		// honest one does. (A layer that decodes produces exactly that.)
		work += int(h.Size)
		// Preallocate what an honest payload needs, but not all a lying
		// header claims: 16 times the payload covers what text and XML
		// usually compress to, and 64 KiB a small element whatever its
		// ratio; codecs grow dst themselves, within the limit, as output
		// appears.
		prealloc := min(int(h.Size), 64<<10+16*len(data[hl:]))
		out, err := codec.Decode(make([]byte, 0, prealloc), data[hl:], h.Params, b, int(h.Size))
		if err != nil {
			if refusedUnopened(err) {
				work -= int(h.Size) - len(data[hl:])
			}
			return e, rep, work, codecError(err)
		}
		if uint64(len(out)) != h.Size {
			return e, rep, work, fmt.Errorf("%w: decoded %d bytes, header says %d", ErrCorrupt, len(out), h.Size)
		}
		if depth == 0 && kind == KindSeal {
			rep.Sealed, rep.KeyID = true, h.Params.KeyID
		}
		rep.Chain = append([]string{h.Codec}, rep.Chain...)
		data, mime = out, h.MIME
	}
	for _, w := range wrapped {
		if a, ok := w.(DecodeAccepter); ok {
			a.Accepted()
		}
	}
	rep.failed = ""
	rep.Size = len(data)
	return message.Element{Namespace: e.Namespace, Name: e.Name, MIME: mime, Data: data, Signature: e.Signature}, rep, work, nil
}

// refusedUnopened reports whether a codec's Decode refused its payload
// before making room for any output: a key or dictionary this end lacks,
// a binding missing. Such a layer costs its payload's length, not its
// claimed size, so that, under DeliverEncoded, elements this receiver
// cannot open (sealed to another peer, compressed with a dictionary it
// lacks) do not use up the budget of the rest of their message.
func refusedUnopened(err error) bool {
	return errors.Is(err, ErrNoKey) || errors.Is(err, ErrNoDictionary) || errors.Is(err, ErrUnbound)
}

// decodeErrors are the sentinels a codec's Decode may report as they are.
var decodeErrors = []error{ErrTooLarge, ErrAuth, ErrNoKey, ErrNoDictionary, ErrCorrupt, ErrReplay, ErrUnbound}

// codecError is err, from a codec's Decode, wrapped in ErrCorrupt unless
// it wraps one of decodeErrors.
func codecError(err error) error {
	for _, s := range decodeErrors {
		if errors.Is(err, s) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}
