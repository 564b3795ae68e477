// Package adv reads and writes JXTA pipe advertisements
// (jxta:PipeAdvertisement), the XML documents that name a pipe: its ID, its
// type and, optionally, a name, a description and the peers allowed to
// bind it.
//
// It is a foundation package beside id and wire: the pipe layer binds and
// resolves pipes from these documents and the CLI prints them.
//
// Output is byte-for-byte what JXSE 2.7 writes for the same advertisement
// (PipeAdv.getDocument(text/xml;charset=UTF-8) sent to a stream); it is a
// fixed template, so it is written directly rather than through an XML
// serializer, whose escaping and layout would differ from JXSE's. The
// allowed binders are p2pmsg's extension: one <Binder> element per peer,
// after the others, written only when there are any (JXSE reads such a
// document and ignores them). Input is
// parsed with beevik/etree after a bounded pre-scan: documents larger than
// the size limit, nested deeper than the depth limit, or carrying a DTD
// internal subset or entity declarations are refused before any tree is
// built, and no entity other than XML's five predefined ones and character
// references is ever expanded.
package adv

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/beevik/etree"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// PipeType is a pipe's kind, as advertisements spell it.
type PipeType string

// Pipe types.
const (
	Unicast       PipeType = "JxtaUnicast"
	UnicastSecure PipeType = "JxtaUnicastSecure"
	Propagate     PipeType = "JxtaPropagate"
)

// Valid reports whether t is one of the three pipe types.
func (t PipeType) Valid() bool { return t == Unicast || t == UnicastSecure || t == Propagate }

// RootElement is the document element of a pipe advertisement.
const RootElement = "jxta:PipeAdvertisement"

// Sentinel errors.
var (
	ErrSyntax     = errors.New("adv: not well-formed XML")
	ErrTooLarge   = errors.New("adv: document too large")
	ErrTooDeep    = errors.New("adv: document nested too deeply")
	ErrEntity     = errors.New("adv: DTD declarations and custom entities are not allowed")
	ErrWrongRoot  = errors.New("adv: not a pipe advertisement")
	ErrMissingID  = errors.New("adv: pipe advertisement has no pipe ID")
	ErrBadID      = errors.New("adv: invalid pipe ID")
	ErrBadType    = errors.New("adv: invalid pipe type")
	ErrBadText    = errors.New("adv: name or description cannot be written")
	ErrBadOptions = errors.New("adv: invalid option")
	ErrBadBinder  = errors.New("adv: invalid allowed binder")
)

// PipeAdvertisement describes a pipe.
type PipeAdvertisement struct {
	ID   id.ID    // a pipe ID
	Type PipeType // Unicast, UnicastSecure or Propagate
	Name string   // optional; omitted from the document when empty
	Desc string   // optional; omitted from the document when empty
	// Binders optionally names the peers (libp2p peer IDs, in their text
	// form) allowed to bind a unicast or secure pipe: resolution then
	// accepts only bindings these peers prove (package pipe). At most
	// MaxBinders; none on a propagate pipe, whose members are whoever
	// subscribes (ErrBadBinder).
	Binders []string
}

// MaxBinders bounds an advertisement's allowed binders: a pipe's replicas,
// not a membership list.
const MaxBinders = 64

// maxBinderLen bounds one binder's text: a peer ID of an RSA key in base58
// is about 46 characters, an inlined Ed25519 key 52, CIDv1 forms 62.
const maxBinderLen = 128

// New returns an advertisement for a new pipe in the Net peer group.
func New(t PipeType, name, desc string) (*PipeAdvertisement, error) {
	pid, err := id.NewPipeID(id.NetPeerGroupID)
	if err != nil {
		return nil, err
	}
	a := &PipeAdvertisement{ID: pid, Type: t, Name: name, Desc: desc}
	return a, a.Validate()
}

// Validate reports what would make the advertisement unwritable or
// unreadable by JXSE.
func (a *PipeAdvertisement) Validate() error {
	if a.ID.IsZero() {
		return ErrMissingID
	}
	if a.ID.Kind() != id.KindPipe {
		return fmt.Errorf("%w: %v is a %v ID", ErrBadID, a.ID, a.ID.Kind())
	}
	if !a.Type.Valid() {
		return fmt.Errorf("%w %q (want JxtaUnicast, JxtaUnicastSecure or JxtaPropagate)", ErrBadType, a.Type)
	}
	if err := checkText("name", a.Name); err != nil {
		return err
	}
	if err := checkText("description", a.Desc); err != nil {
		return err
	}
	return checkBinders(a.Type, a.Binders)
}

// checkBinders checks the form of the allowed binders (package pipe
// decodes them as peer IDs), which only unicast pipes have: binders are
// whom resolution may find, and a propagate pipe is not resolved (its
// members are whoever subscribes), so binders there would restrict
// nothing that they seem to.
func checkBinders(t PipeType, bs []string) error {
	if t == Propagate && len(bs) > 0 {
		return fmt.Errorf("%w: a propagate pipe's members are not restricted; binders name who may bind a unicast or secure pipe (a closed group seals its messages with a pre-shared key)", ErrBadBinder)
	}
	if len(bs) > MaxBinders {
		return fmt.Errorf("%w: %d binders, at most %d", ErrBadBinder, len(bs), MaxBinders)
	}
	for i, b := range bs {
		if b == "" || len(b) > maxBinderLen {
			return fmt.Errorf("%w: binder of %d bytes", ErrBadBinder, len(b))
		}
		for _, r := range b {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
				return fmt.Errorf("%w: %q is not a peer ID", ErrBadBinder, b)
			}
		}
		for _, o := range bs[:i] {
			if o == b {
				return fmt.Errorf("%w: %s named twice", ErrBadBinder, b)
			}
		}
	}
	return nil
}

func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadText, what)
	}
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("%w: %s has leading or trailing white space, which JXSE strips", ErrBadText, what)
	}
	if strings.Contains(s, "]]>") {
		return fmt.Errorf("%w: %s contains \"]]>\", which JXSE writes unescaped (not well-formed XML)", ErrBadText, what)
	}
	if looksLikeReference(s) {
		return fmt.Errorf("%w: %s contains text like an entity reference (&name;), which JXSE decodes twice", ErrBadText, what)
	}
	for _, r := range s {
		if r == '\r' || (r < 0x20 && r != '\t' && r != '\n') || r == 0xFFFE || r == 0xFFFF {
			return fmt.Errorf("%w: %s contains %U, which XML cannot carry faithfully", ErrBadText, what, r)
		}
	}
	return nil
}

// looksLikeReference reports "&" followed by a name or '#' and ';'.
func looksLikeReference(s string) bool {
	for i := strings.IndexByte(s, '&'); i >= 0; {
		j := i + 1
		for j < len(s) && (s[j] == '#' || s[j] == '_' || s[j] == '.' || s[j] == '-' || s[j] == ':' ||
			'a' <= s[j] && s[j] <= 'z' || 'A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9') {
			j++
		}
		if j > i+1 && j < len(s) && s[j] == ';' {
			return true
		}
		k := strings.IndexByte(s[i+1:], '&')
		if k < 0 {
			break
		}
		i += 1 + k
	}
	return false
}

// Marshal returns the document as JXSE 2.7 writes it.
func (a *PipeAdvertisement) Marshal() ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE jxta:PipeAdvertisement>\n" +
		"<jxta:PipeAdvertisement xml:space=\"preserve\" xmlns:jxta=\"http://jxta.org\">\n\t\n<Id>")
	b.WriteString(a.ID.String())
	b.WriteString("</Id><Type>")
	b.WriteString(string(a.Type))
	b.WriteString("</Type>")
	if a.Name != "" {
		b.WriteString("<Name>")
		escape(&b, a.Name)
		b.WriteString("</Name>")
	}
	if a.Desc != "" {
		b.WriteString("<Desc>")
		escape(&b, a.Desc)
		b.WriteString("</Desc>")
	}
	for _, p := range a.Binders {
		b.WriteString("<Binder>")
		b.WriteString(p) // alphanumeric: nothing to escape
		b.WriteString("</Binder>")
	}
	b.WriteString("</jxta:PipeAdvertisement>\n")
	return b.Bytes(), nil
}

// WriteTo writes the document to w.
func (a *PipeAdvertisement) WriteTo(w io.Writer) (int64, error) {
	b, err := a.Marshal()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// escape escapes what JXSE escapes in text: '&' and '<'.
func escape(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		default:
			b.WriteByte(s[i])
		}
	}
}

// Option sets a parsing limit.
type Option func(*limits) error

type limits struct {
	maxSize  int
	maxDepth int
}

// Defaults for parsing.
const (
	DefaultMaxSize  = 64 << 10
	DefaultMaxDepth = 16
)

// MaxTags bounds a document's markup, its tags and attributes together
// (its '<' and '='), whatever its size: an advertisement has a dozen
// elements, an attribute or two and at most MaxBinders binders, and
// parsing costs by the element and by the attribute, not by the byte
// (64 KiB of empty elements, or one element of 9,000 attributes, cost
// milliseconds and megabytes; JXTA peers send advertisements in their
// JxtaBiDiPipe and JxtaSocket handshakes). More is ErrTooLarge.
const MaxTags = 1024

// WithMaxSize bounds the document size in bytes (1 to 16 MiB; default
// DefaultMaxSize).
func WithMaxSize(n int) Option {
	return func(l *limits) error {
		if n < 1 || n > 16<<20 {
			return fmt.Errorf("%w: max size %d out of range [1, 16 MiB]", ErrBadOptions, n)
		}
		l.maxSize = n
		return nil
	}
}

// WithMaxDepth bounds element nesting (1 to 1000; default DefaultMaxDepth).
func WithMaxDepth(n int) Option {
	return func(l *limits) error {
		if n < 1 || n > 1000 {
			return fmt.Errorf("%w: max depth %d out of range [1, 1000]", ErrBadOptions, n)
		}
		l.maxDepth = n
		return nil
	}
}

// Read parses an advertisement from r, reading at most the size limit.
func Read(r io.Reader, opts ...Option) (*PipeAdvertisement, error) {
	l, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(l.maxSize)+1))
	if err != nil {
		return nil, fmt.Errorf("adv: reading: %w", err)
	}
	return parse(data, l)
}

// Parse parses an advertisement. It accepts what JXSE 2.7 accepts (any
// element order, surrounding white space, unknown extra elements, the
// DOCTYPE line) except pipe types other than the three JXTA defines, which
// JXSE stores blindly.
func Parse(data []byte, opts ...Option) (*PipeAdvertisement, error) {
	l, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	return parse(data, l)
}

func resolve(opts []Option) (limits, error) {
	l := limits{maxSize: DefaultMaxSize, maxDepth: DefaultMaxDepth}
	for _, o := range opts {
		if err := o(&l); err != nil {
			return l, err
		}
	}
	return l, nil
}

func parse(data []byte, l limits) (*PipeAdvertisement, error) {
	if len(data) > l.maxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.maxSize)
	}
	if n := bytes.Count(data, []byte("<")) + bytes.Count(data, []byte("=")); n > MaxTags {
		return nil, fmt.Errorf("%w: %d tags and attributes, at most %d", ErrTooLarge, n, MaxTags)
	}
	if err := prescan(data, l); err != nil {
		return nil, err
	}
	doc := etree.NewDocument()
	doc.ReadSettings.Permissive = false
	if err := doc.ReadFromBytes(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	root := doc.Root()
	if root == nil {
		return nil, fmt.Errorf("%w: empty document", ErrWrongRoot)
	}
	if root.FullTag() != RootElement {
		return nil, fmt.Errorf("%w: root element is <%s>", ErrWrongRoot, root.FullTag())
	}
	a := &PipeAdvertisement{}
	var idText, typeText *string
	seen := map[string]bool{}
	for _, el := range root.ChildElements() {
		if el.Space == "" && el.Tag == "Binder" {
			if len(a.Binders) == MaxBinders {
				return nil, fmt.Errorf("%w: more than %d binders", ErrBadBinder, MaxBinders)
			}
			a.Binders = append(a.Binders, strings.TrimSpace(el.Text()))
			continue
		}
		if el.Space != "" || seen[el.Tag] {
			continue // JXSE reads the first of each and ignores the rest
		}
		seen[el.Tag] = true
		text := strings.TrimSpace(el.Text())
		switch el.Tag {
		case "Id":
			idText = &text
		case "Type":
			typeText = &text
		case "Name":
			a.Name = text
		case "Desc":
			a.Desc = text
		}
	}
	if idText == nil || *idText == "" {
		return nil, ErrMissingID
	}
	pid, err := id.Parse(*idText)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadID, err)
	}
	if pid.Kind() != id.KindPipe {
		return nil, fmt.Errorf("%w: %v is a %v ID", ErrBadID, pid, pid.Kind())
	}
	a.ID = pid
	if typeText == nil {
		return nil, fmt.Errorf("%w: no <Type>", ErrBadType)
	}
	a.Type = PipeType(*typeText)
	if !a.Type.Valid() {
		return nil, fmt.Errorf("%w %q", ErrBadType, *typeText)
	}
	if err := checkBinders(a.Type, a.Binders); err != nil {
		return nil, err
	}
	return a, nil
}

// prescan walks the tokens once with bounded state: depth, DTD content and
// well-formedness are checked before a tree is built.
func prescan(data []byte, l limits) error {
	if err := checkEntities(data); err != nil {
		return err
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	depth := 0
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth > l.maxDepth {
				return fmt.Errorf("%w: deeper than %d", ErrTooDeep, l.maxDepth)
			}
		case xml.EndElement:
			depth--
		case xml.Directive:
			if bytes.ContainsAny(t, "[<") || bytes.Contains(t, []byte("ENTITY")) || bytes.Contains(t, []byte("SYSTEM")) || bytes.Contains(t, []byte("PUBLIC")) {
				return fmt.Errorf("%w: <!%s>", ErrEntity, clip(t))
			}
		}
	}
	return nil
}

// checkEntities refuses any entity reference that is not predefined or a
// character reference.
func checkEntities(data []byte) error {
	for rest := data; ; {
		i := bytes.IndexByte(rest, '&')
		if i < 0 {
			return nil
		}
		rest = rest[i+1:]
		j := bytes.IndexByte(rest, ';')
		if j < 0 {
			return fmt.Errorf("%w: unterminated entity reference", ErrSyntax)
		}
		switch name := string(rest[:j]); {
		case name == "amp", name == "lt", name == "gt", name == "quot", name == "apos", strings.HasPrefix(name, "#"):
		default:
			return fmt.Errorf("%w: &%s;", ErrEntity, clip([]byte(name)))
		}
	}
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
