package wire

import (
	"encoding/binary"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// plan is the per-message work the encoder does once: namespace numbering
// and canonical MIME types. It lives in a pool so encoding allocates nothing
// of its own.
type plan struct {
	namespaces []string // declared namespaces, ID 2 onward
	distinct   []string
	mimes      []string // canonical MIME per element, "" for none written
	size       int64
}

var planPool = sync.Pool{New: func() any { return new(plan) }}

func getPlan(m *message.Message) (*plan, error) {
	p := planPool.Get().(*plan)
	if err := p.build(m); err != nil {
		putPlan(p)
		return nil, err
	}
	return p, nil
}

func putPlan(p *plan) {
	clear(p.namespaces)
	clear(p.distinct)
	clear(p.mimes)
	p.namespaces, p.distinct, p.mimes = p.namespaces[:0], p.distinct[:0], p.mimes[:0]
	planPool.Put(p)
}

func encErr(field, detail string) error {
	return &Error{Offset: -1, Field: field, Err: ErrUnencodable, Detail: detail}
}

func (p *plan) build(m *message.Message) error {
	if m == nil {
		return encErr("message", "nil message")
	}
	elems := m.Elements()
	if len(elems) > MaxElements {
		return encErr("element count", "more than 32767 elements")
	}
	// Distinct namespaces in order of first use; the implicit ones only
	// matter for the HashMap's size.
	onlyImplicit := true
	for i := range elems {
		ns := elems[i].Namespace
		if ns != message.DefaultNamespace && ns != message.JXTANamespace {
			onlyImplicit = false
		}
		if !containsString(p.distinct, ns) {
			p.distinct = append(p.distinct, ns)
		}
	}
	if !onlyImplicit {
		p.namespaces = javaHashMapOrder(p.distinct, p.namespaces)
		k := 0
		for _, ns := range p.namespaces {
			if ns != message.DefaultNamespace && ns != message.JXTANamespace {
				if err := checkString("namespace", ns); err != nil {
					return err
				}
				p.namespaces[k] = ns
				k++
			}
		}
		p.namespaces = p.namespaces[:k]
		if k > MaxNamespaces {
			return encErr("namespace count", "more than 253 namespaces")
		}
	}
	size := int64(4 + 1 + 2 + 2)
	for _, ns := range p.namespaces {
		size += 2 + int64(len(ns))
	}
	for i := range elems {
		n, err := p.planElement(&elems[i], 0)
		if err != nil {
			return err
		}
		size += n
	}
	p.size = size
	return nil
}

func (p *plan) planElement(e *message.Element, depth int) (int64, error) {
	if depth > 64 {
		return 0, encErr("signature", "signatures nested more than 64 deep")
	}
	if err := checkString("element name", e.Name); err != nil {
		return 0, err
	}
	mime := ""
	if !message.IsOctetStream(e.MIME) {
		c, err := message.CanonicalMIME(e.MIME)
		if err != nil {
			return 0, &Error{Offset: -1, Field: "element " + e.Name + " MIME type", Err: ErrUnencodable, Cause: err}
		}
		if len(c) > MaxStringLen {
			return 0, encErr("element "+e.Name+" MIME type", "longer than 32767 bytes")
		}
		mime = c
	}
	p.mimes = append(p.mimes, mime)
	if int64(len(e.Data)) > MaxElementSize {
		return 0, encErr("element "+e.Name+" data", "larger than 2 GiB")
	}
	n := int64(4+1+1+2+len(e.Name)+4) + int64(len(e.Data))
	if mime != "" {
		n += 2 + int64(len(mime))
	}
	if e.Signature != nil {
		// The format gives a signature its element's namespace (JXSE
		// ignores the namespace byte it carries): another one would be
		// lost, so it is refused.
		if e.Signature.Namespace != e.Namespace {
			return 0, encErr("element "+e.Name+" signature", "namespace "+strconv.Quote(e.Signature.Namespace)+", not its element's "+strconv.Quote(e.Namespace))
		}
		s, err := p.planElement(e.Signature, depth+1)
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}

func checkString(field, s string) error {
	if len(s) > MaxStringLen {
		return encErr(field, "longer than 32767 bytes")
	}
	if !utf8.ValidString(s) {
		return encErr(field, "not valid UTF-8")
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *plan) nsID(ns string) byte {
	switch ns {
	case message.DefaultNamespace:
		return 0
	case message.JXTANamespace:
		return 1
	}
	for i, x := range p.namespaces {
		if x == ns {
			return byte(i + 2)
		}
	}
	panic("wire: namespace missing from plan") // build saw every namespace
}

// Size returns the number of bytes the message takes in this format.
func Size(m *message.Message) (int64, error) {
	p, err := getPlan(m)
	if err != nil {
		return 0, err
	}
	defer putPlan(p)
	return p.size, nil
}

// Marshal returns the message's encoding, in one allocation.
func Marshal(m *message.Message) ([]byte, error) {
	return Append(nil, m)
}

// Append appends the message's encoding to dst.
func Append(dst []byte, m *message.Message) ([]byte, error) {
	if out, ok := appendPlain(dst, m); ok {
		return out, nil
	}
	return appendPlanned(dst, m)
}

// appendPlanned is Append for every message.
func appendPlanned(dst []byte, m *message.Message) ([]byte, error) {
	p, err := getPlan(m)
	if err != nil {
		return dst, err
	}
	defer putPlan(p)
	if need := len(dst) + int(p.size); cap(dst) < need {
		grown := make([]byte, len(dst), need)
		copy(grown, dst)
		dst = grown
	}
	dst = p.appendHeader(dst, m.Len())
	mi := 0
	for _, e := range m.Elements() {
		dst, mi = p.appendElementNS(dst, &e, p.nsID(e.Namespace), mi, true)
	}
	return dst, nil
}

func (p *plan) appendHeader(dst []byte, count int) []byte {
	dst = append(dst, msgMagic[:]...)
	dst = append(dst, Version)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(p.namespaces)))
	for _, ns := range p.namespaces {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(ns)))
		dst = append(dst, ns...)
	}
	return binary.BigEndian.AppendUint16(dst, uint16(count))
}

// appendElementNS appends e's header and, when withData, its data and its
// signature chain. Signatures carry their parent's nsid, as in JXSE. mi
// indexes the planned MIME types, in the same depth-first order as build.
func (p *plan) appendElementNS(dst []byte, e *message.Element, nsid byte, mi int, withData bool) ([]byte, int) {
	mime := p.mimes[mi]
	mi++
	var flags byte
	if mime != "" {
		flags |= flagHasType
	}
	if e.Signature != nil {
		flags |= flagHasSignature
	}
	dst = append(dst, elemMagic[:]...)
	dst = append(dst, nsid, flags)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.Name)))
	dst = append(dst, e.Name...)
	if mime != "" {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(mime)))
		dst = append(dst, mime...)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Data)))
	if withData {
		dst = append(dst, e.Data...)
		if e.Signature != nil {
			dst, mi = p.appendElementNS(dst, e.Signature, nsid, mi, true)
		}
	}
	return dst, mi
}

// copyThreshold is the element size above which the encoder hands the data
// to the writer directly instead of copying it into its buffer.
const copyThreshold = 32 << 10

// Encoder writes messages to a stream, reusing its buffer between calls.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes m. Small elements are gathered into one write; large ones
// are written from the caller's memory without a copy.
func (enc *Encoder) Encode(m *message.Message) error {
	p, err := getPlan(m)
	if err != nil {
		return err
	}
	defer putPlan(p)
	w := elementWriter{p: p, w: enc.w, buf: p.appendHeader(enc.buf[:0], m.Len())}
	for i := range m.Elements() {
		e := &m.Elements()[i]
		if err := w.write(e, p.nsID(e.Namespace)); err != nil {
			return err
		}
	}
	if len(w.buf) > 0 {
		_, err = enc.w.Write(w.buf)
	}
	if cap(w.buf) <= 1<<20 { // keep a modest buffer for the next message
		enc.buf = w.buf[:0]
	}
	return err
}

// elementWriter gathers small elements into buf and writes large ones
// straight from the caller's memory.
type elementWriter struct {
	p   *plan
	w   io.Writer
	buf []byte
	mi  int
}

func (ew *elementWriter) write(e *message.Element, nsid byte) error {
	ew.buf, ew.mi = ew.p.appendElementNS(ew.buf, e, nsid, ew.mi, false)
	if len(e.Data) < copyThreshold {
		ew.buf = append(ew.buf, e.Data...)
	} else {
		if _, err := ew.w.Write(ew.buf); err != nil {
			return err
		}
		ew.buf = ew.buf[:0]
		if _, err := ew.w.Write(e.Data); err != nil {
			return err
		}
	}
	if e.Signature != nil {
		return ew.write(e.Signature, nsid)
	}
	return nil
}

// Encode writes m to w.
func Encode(w io.Writer, m *message.Message) error {
	return NewEncoder(w).Encode(m)
}

// appendPlain encodes, in one pass and without a plan, the message small
// sends carry most: a few elements in the default or JXTA namespace,
// without MIME types or signatures. It reports false, with dst as it was,
// for anything else, which the planned encoder handles (and checks).
func appendPlain(dst []byte, m *message.Message) ([]byte, bool) {
	if m == nil {
		return dst, false
	}
	elems := m.Elements()
	if len(elems) > 64 {
		return dst, false
	}
	for i := range elems {
		e := &elems[i]
		if (e.Namespace != message.DefaultNamespace && e.Namespace != message.JXTANamespace) ||
			(e.MIME != "" && e.MIME != message.OctetStream) || e.Signature != nil ||
			len(e.Name) > MaxStringLen || int64(len(e.Data)) > MaxElementSize || !utf8.ValidString(e.Name) {
			return dst, false
		}
	}
	dst = append(dst, msgMagic[:]...)
	dst = append(dst, Version, 0, 0) // no namespaces declared
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(elems)))
	for i := range elems {
		e := &elems[i]
		var nsid byte
		if e.Namespace == message.JXTANamespace {
			nsid = 1
		}
		dst = append(dst, elemMagic[:]...)
		dst = append(dst, nsid, 0)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.Name)))
		dst = append(dst, e.Name...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Data)))
		dst = append(dst, e.Data...)
	}
	return dst, true
}
