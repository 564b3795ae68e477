package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// speculativeAlloc is the largest element buffer allocated on the word of a
// length field alone, when the input's remaining size is unknown. Beyond
// it, the buffer grows as data arrives.
const speculativeAlloc = 4 << 20

// Decoder reads messages from a stream. It buffers its input, so it may read
// past the end of a message; use one Decoder per stream for its whole life.
type Decoder struct {
	br  *bufio.Reader
	st  state
	lim Limits
}

// NewDecoder returns a decoder reading from r with the given limits.
func NewDecoder(r io.Reader, opts ...Option) (*Decoder, error) {
	lim, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 4096 {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &Decoder{br: br, lim: lim}, nil
}

// Decode reads the next message. At a clean end of stream it returns io.EOF;
// a message cut short gives an error wrapping io.ErrUnexpectedEOF, and a
// failing reader (a stream reset) its own error, matching no sentinel of
// the format.
func (d *Decoder) Decode() (*message.Message, error) {
	d.st.reset(d.br, &d.lim, -1)
	return d.st.message()
}

// Decode reads one message from r and stops at its last byte when the
// element count says where that is, so r can carry more after it. Small
// fields are read with small reads: wrap an unbuffered network connection
// in a bufio.Reader, or use a Decoder.
//
// When r has a Len() int method (as *bytes.Reader does), Len is taken as
// the bytes left in r: a length field pointing past them is an error found
// before allocating, and each element's buffer is allocated whole, once.
// Without it, buffers over 4 MiB grow as their bytes arrive.
func Decode(r io.Reader, opts ...Option) (*message.Message, error) {
	return DecodeWith(r, nil, opts...)
}

// DecodeWith is Decode with the buffers for element data taken from alloc,
// so a caller can recycle them. alloc(n) must return a slice of length n
// (it may have more capacity); the decoder overwrites all of it before the
// message is returned, and a buffer it got from alloc for a message that
// then fails to decode is dropped, not returned. alloc is not called for
// empty elements, nor for elements over 4 MiB when r's size is unknown
// (those grow as their bytes arrive). A nil alloc is Decode.
func DecodeWith(r io.Reader, alloc func(n int) []byte, opts ...Option) (*message.Message, error) {
	lim := &defaultLimits
	if len(opts) > 0 {
		l, err := resolve(opts)
		if err != nil {
			return nil, err
		}
		lim = &l
	}
	remaining := int64(-1)
	if lr, ok := r.(interface{ Len() int }); ok {
		remaining = int64(lr.Len())
	}
	st := statePool.Get().(*state)
	st.reset(r, lim, remaining)
	st.alloc = alloc
	m, err := st.message()
	st.reset(nil, nil, 0)
	st.alloc = nil
	statePool.Put(st)
	return m, err
}

// Unmarshal decodes a message that must fill b exactly. The message does
// not alias b.
func Unmarshal(b []byte, opts ...Option) (*message.Message, error) {
	return UnmarshalWith(b, nil, opts...)
}

// UnmarshalWith is Unmarshal with the buffers for element data taken from
// alloc, as for DecodeWith. Decoding from memory skips the reader's
// indirection on every field: it is the fast way to decode a message
// already read.
func UnmarshalWith(b []byte, alloc func(n int) []byte, opts ...Option) (*message.Message, error) {
	elems, err := UnmarshalElements(nil, b, alloc, opts...)
	if err != nil {
		return nil, err
	}
	return message.FromElements(elems), nil
}

// UnmarshalElements is UnmarshalWith returning the message's elements,
// appended to dst, rather than a message: for a caller that allocates a
// message's elements together with other things (the endpoint allocates
// them with the delivery that carries them) or reuses their storage.
func UnmarshalElements(dst []message.Element, b []byte, alloc func(n int) []byte, opts ...Option) ([]message.Element, error) {
	lim := &defaultLimits
	if len(opts) > 0 {
		l, err := resolve(opts)
		if err != nil {
			return nil, err
		}
		lim = &l
	}
	st := statePool.Get().(*state)
	elems, err := st.unmarshalElements(dst, b, alloc, lim)
	statePool.Put(st)
	return elems, err
}

// An Unmarshaler decodes messages from memory one after another, as
// UnmarshalElements does, with its limits resolved once and its decoding
// state kept from one message to the next (the names a stream repeats
// are not allocated again): for a reader that frames a stream's messages
// itself. It is not safe for concurrent use.
type Unmarshaler struct {
	lim Limits
	st  state
}

// NewUnmarshaler returns an Unmarshaler with the given limits.
func NewUnmarshaler(opts ...Option) (*Unmarshaler, error) {
	lim, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	return &Unmarshaler{lim: lim}, nil
}

// UnmarshalElements is the package's UnmarshalElements with u's limits.
func (u *Unmarshaler) UnmarshalElements(dst []message.Element, b []byte, alloc func(n int) []byte) ([]message.Element, error) {
	return u.st.unmarshalElements(dst, b, alloc, &u.lim)
}

// unmarshalElements is UnmarshalElements with st, which it leaves reset.
func (st *state) unmarshalElements(dst []message.Element, b []byte, alloc func(n int) []byte, lim *Limits) ([]message.Element, error) {
	st.reset(nil, lim, int64(len(b)))
	st.alloc = alloc
	if elems, ok := st.fast(dst, b); ok {
		st.reset(nil, nil, 0)
		st.alloc = nil
		return elems, nil
	}
	st.reset(nil, lim, int64(len(b)))
	st.mem, st.inMem, st.dst = b, true, dst
	m, err := st.message()
	left := len(st.mem)
	st.reset(nil, nil, 0)
	st.alloc, st.dst = nil, nil
	if err != nil {
		return dst, err
	}
	if left != 0 {
		return dst, &Error{Offset: int64(len(b) - left), Err: ErrTrailingData,
			Detail: strconv.Itoa(left) + " bytes"}
	}
	return m.Elements(), nil
}

var statePool = sync.Pool{New: func() any { return new(state) }}

// state is one decoding pass.
type state struct {
	r         io.Reader
	lim       *Limits
	off       int64  // bytes consumed
	remaining int64  // bytes left in r when known, else -1
	elements  int    // elements read, signatures included
	inElement bool   // errors name the element being read
	elemName  string // its name, once known
	ns        []string
	alloc     func(int) []byte // element data buffers; nil means make
	// inMem decodes from mem, the input not yet read, instead of r.
	inMem bool
	mem   []byte
	// dst, when set, is where the elements go (UnmarshalElements).
	dst []message.Element
	// names holds recent short names, so that the names a stream repeats
	// message after message are not allocated each time. It outlives
	// reset: it only ever returns a string equal to the bytes read.
	names    [8]string
	nameNext int
	scratch  [256]byte
}

func (s *state) reset(r io.Reader, lim *Limits, remaining int64) {
	s.r, s.lim, s.off, s.remaining, s.elements = r, lim, 0, remaining, 0
	s.inMem, s.mem = false, nil
	s.inElement, s.elemName = false, ""
	clear(s.ns)
	s.ns = s.ns[:0]
}

func (s *state) fail(sentinel error, field, detail string, cause error) error {
	if s.inElement {
		field = "element " + strconv.Quote(s.elemName) + " " + field
	}
	return &Error{Offset: s.off, Field: field, Err: sentinel, Cause: cause, Detail: detail}
}

// budget checks that n more bytes fit in the message limit.
func (s *state) budget(n int64, field string) error {
	if s.off+n > s.lim.MaxMessageSize {
		return s.fail(ErrLimit, field, "message larger than "+strconv.FormatInt(s.lim.MaxMessageSize, 10)+" bytes", nil)
	}
	return nil
}

// allocBudget is budget for a length about to be allocated: when the
// input's size is known, a length beyond it is refused before allocating.
func (s *state) allocBudget(n int64, field string) error {
	if err := s.budget(n, field); err != nil {
		return err
	}
	if s.remaining >= 0 && n > s.remaining-s.off {
		return s.fail(ErrMalformed, field, strconv.FormatInt(n, 10)+" bytes announced, "+
			strconv.FormatInt(s.remaining-s.off, 10)+" left", io.ErrUnexpectedEOF)
	}
	return nil
}

// read fills p, counting it against the budget.
func (s *state) read(p []byte, field string) error {
	if err := s.budget(int64(len(p)), field); err != nil {
		return err
	}
	if s.inMem {
		n := copy(p, s.mem)
		s.mem = s.mem[n:]
		s.off += int64(n)
		if n < len(p) {
			return s.fail(ErrMalformed, field, "", io.ErrUnexpectedEOF)
		}
		return nil
	}
	n, err := io.ReadFull(s.r, p)
	s.off += int64(n)
	switch {
	case err == io.EOF, err == io.ErrUnexpectedEOF:
		return s.fail(ErrMalformed, field, "", io.ErrUnexpectedEOF)
	case err != nil:
		// The reader failed (a stream reset, a deadline): nothing is
		// known of the message, which is not malformed.
		return fmt.Errorf("wire: reading the message at byte %d (%s): %w", s.off, field, err)
	}
	return nil
}

func (s *state) u8(field string) (byte, error) {
	if err := s.read(s.scratch[:1], field); err != nil {
		return 0, err
	}
	return s.scratch[0], nil
}

func (s *state) i16(field string) (int, error) {
	if err := s.read(s.scratch[:2], field); err != nil {
		return 0, err
	}
	return int(int16(binary.BigEndian.Uint16(s.scratch[:2]))), nil
}

func (s *state) i32(field string) (int64, error) {
	if err := s.read(s.scratch[:4], field); err != nil {
		return 0, err
	}
	return int64(int32(binary.BigEndian.Uint32(s.scratch[:4]))), nil
}

// str reads a length-prefixed UTF-8 string of at most max bytes. known lists
// strings to return without allocating when they match.
func (s *state) str(field string, max int, known []string) (string, error) {
	n, err := s.i16(lengthField(field))
	if err != nil {
		return "", err
	}
	if n < 0 {
		return "", s.fail(ErrMalformed, field+" length", "negative length "+strconv.Itoa(n), nil)
	}
	if n > max {
		return "", s.fail(ErrLimit, field+" length", strconv.Itoa(n)+" bytes exceeds limit "+strconv.Itoa(max), nil)
	}
	var b []byte
	direct := s.inMem && n <= len(s.mem)
	if direct {
		// Straight from the input: no copy.
		if err := s.budget(int64(n), field); err != nil {
			return "", err
		}
		b, s.mem = s.mem[:n], s.mem[n:]
		s.off += int64(n)
	} else if n <= len(s.scratch) {
		b = s.scratch[:n]
	} else {
		if err := s.allocBudget(int64(n), field); err != nil {
			return "", err
		}
		b = make([]byte, n)
	}
	if !direct {
		if err := s.read(b, field); err != nil {
			return "", err
		}
	}
	if !utf8.Valid(b) {
		return "", s.fail(ErrMalformed, field, "not valid UTF-8", nil)
	}
	for _, k := range known {
		if string(b) == k {
			return k, nil
		}
	}
	if known != nil {
		return string(b), nil
	}
	return s.intern(b), nil
}

// maxInterned is the longest name the decoder remembers.
const maxInterned = 64

// lengthField names the length field of a string field without building
// the name on every call.
func lengthField(field string) string {
	switch field {
	case "namespace":
		return "namespace length"
	case "element name":
		return "element name length"
	case "MIME type":
		return "MIME type length"
	}
	return field + " length"
}

var knownMIMEs = []string{
	message.TextUTF8, message.XMLUTF8, message.WireMessage, "text/plain", "text/xml",
	"application/xml", "application/json", message.OctetStream,
}

func (s *state) message() (*message.Message, error) {
	if err := s.read(s.scratch[:4], "signature"); err != nil {
		if s.off == 0 && errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	if [4]byte(s.scratch[:4]) != msgMagic {
		return nil, s.fail(ErrMalformed, "signature", "not a message: "+strconv.Quote(string(s.scratch[:4])), nil)
	}
	v, err := s.u8("version")
	if err != nil {
		return nil, err
	}
	if v != Version {
		return nil, s.fail(ErrVersion, "version", "version "+strconv.Itoa(int(v)), nil)
	}
	nsCount, err := s.i16("namespace count")
	if err != nil {
		return nil, err
	}
	if nsCount < 0 || nsCount > MaxNamespaces {
		return nil, s.fail(ErrMalformed, "namespace count", strconv.Itoa(nsCount)+" namespaces", nil)
	}
	if nsCount > s.lim.MaxNamespaces {
		return nil, s.fail(ErrLimit, "namespace count", strconv.Itoa(nsCount)+" namespaces", nil)
	}
	for i := 0; i < nsCount; i++ {
		ns, err := s.str("namespace", s.lim.MaxNameLen, nil)
		if err != nil {
			return nil, err
		}
		s.ns = append(s.ns, ns)
	}
	count, err := s.i16("element count")
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, s.fail(ErrMalformed, "element count", "negative count "+strconv.Itoa(count), nil)
	}
	if count > s.lim.MaxElements {
		return nil, s.fail(ErrLimit, "element count", strconv.Itoa(count)+" elements exceeds limit", nil)
	}
	// The count may lie: never reserve more than a little up front.
	elems := s.dst
	if elems == nil {
		elems = make([]message.Element, 0, min(count, 16))
	}
	untilEOF := count == 0
	for untilEOF || len(elems) < count {
		e, err := s.element(0, untilEOF)
		if err != nil {
			if untilEOF && err == io.EOF {
				break
			}
			return nil, err
		}
		elems = append(elems, e)
	}
	return message.FromElements(elems), nil
}

// namespace returns the namespace an element's namespace ID names.
func (s *state) namespace(nsid byte) (string, bool) {
	switch {
	case nsid == 0:
		return message.DefaultNamespace, true
	case nsid == 1:
		return message.JXTANamespace, true
	case int(nsid)-2 < len(s.ns):
		return s.ns[nsid-2], true
	}
	return "", false
}

// element reads one element; with eofOK, an end of input before its first
// byte returns io.EOF.
func (s *state) element(depth int, eofOK bool) (message.Element, error) {
	var e message.Element
	start := s.off
	if eofOK && s.off+4 > s.lim.MaxMessageSize {
		// At the size limit, a message read "until end of input" is
		// complete if the input ends here; anything more is over it.
		if s.inMem {
			if len(s.mem) == 0 {
				return e, io.EOF
			}
		} else if n, _ := io.ReadFull(s.r, s.scratch[:1]); n == 0 {
			return e, io.EOF
		}
		return e, s.fail(ErrLimit, "element signature", "message larger than "+strconv.FormatInt(s.lim.MaxMessageSize, 10)+" bytes", nil)
	}
	if err := s.read(s.scratch[:4], "element signature"); err != nil {
		if eofOK && s.off == start && errors.Is(err, io.ErrUnexpectedEOF) {
			return e, io.EOF
		}
		return e, err
	}
	if [4]byte(s.scratch[:4]) != elemMagic {
		return e, s.fail(ErrMalformed, "element signature", "not an element: "+strconv.Quote(string(s.scratch[:4])), nil)
	}
	s.elements++
	if s.elements > s.lim.MaxElements {
		return e, s.fail(ErrLimit, "element count", "more than "+strconv.Itoa(s.lim.MaxElements)+" elements", nil)
	}
	nsid, err := s.u8("namespace id")
	if err != nil {
		return e, err
	}
	flags, err := s.u8("flags")
	if err != nil {
		return e, err
	}
	if depth == 0 { // a signature's namespace byte is ignored, as in JXSE
		var ok bool
		if e.Namespace, ok = s.namespace(nsid); !ok {
			return e, s.fail(ErrMalformed, "namespace id", "undefined namespace "+strconv.Itoa(int(nsid)), nil)
		}
	}
	if e.Name, err = s.str("element name", s.lim.MaxNameLen, nil); err != nil {
		return e, err
	}
	s.inElement, s.elemName = true, e.Name
	defer func() { s.inElement = false }()
	if flags&flagHasType != 0 {
		mime, err := s.str("MIME type", s.lim.MaxMIMELen, knownMIMEs)
		if err != nil {
			return e, err
		}
		if e.MIME, err = message.CanonicalMIME(mime); err != nil {
			return e, s.fail(ErrMalformed, "MIME type", "", err)
		}
	}
	n, err := s.i32("data length")
	if err != nil {
		return e, err
	}
	if n < 0 {
		return e, s.fail(ErrMalformed, "data length", "negative length", nil)
	}
	if n > s.lim.MaxElementSize {
		return e, s.fail(ErrLimit, "data length",
			strconv.FormatInt(n, 10)+" bytes exceeds limit "+strconv.FormatInt(s.lim.MaxElementSize, 10), nil)
	}
	if e.Data, err = s.data(n, "data"); err != nil {
		return e, err
	}
	if flags&flagHasSignature != 0 {
		if depth >= s.lim.MaxSignatureDepth {
			return e, s.fail(ErrLimit, "signature",
				"signatures nested deeper than "+strconv.Itoa(s.lim.MaxSignatureDepth), nil)
		}
		sig, err := s.element(depth+1, false)
		if err != nil {
			return e, err
		}
		sig.Namespace = e.Namespace
		e.Signature = &sig
	}
	return e, nil
}

// data reads an element's n bytes. When the input's size is unknown and n
// is large, the buffer grows with what arrives, so a lying length costs at
// most speculativeAlloc before the lie is found.
func (s *state) data(n int64, field string) ([]byte, error) {
	if err := s.allocBudget(n, field); err != nil {
		return nil, err
	}
	if n == 0 {
		return []byte{}, nil
	}
	if n <= speculativeAlloc || s.remaining >= 0 {
		var b []byte
		if s.alloc != nil {
			if b = s.alloc(int(n)); int64(len(b)) != n {
				panic("wire: DecodeWith's alloc returned a slice of the wrong length")
			}
		} else {
			b = make([]byte, n)
		}
		if err := s.read(b, field); err != nil {
			return nil, err
		}
		return b, nil
	}
	b := make([]byte, 0, speculativeAlloc)
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(2*int64(cap(b)), n))
			copy(grown, b)
			b = grown
		}
		chunk := b[len(b):min(int64(cap(b)), n)]
		if err := s.read(chunk, field); err != nil {
			return nil, err
		}
		b = b[:len(b)+len(chunk)]
	}
	return b[:n:n], nil
}
