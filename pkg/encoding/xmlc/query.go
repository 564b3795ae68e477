package xmlc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Query errors.
var (
	ErrBadPath = errors.New("xmlc: bad query path")
	ErrNotXML  = errors.New("xmlc: payload does not hold XML")
)

// Query returns the values at path in the document src encodes (as Encode
// wrote it, with parameters p), without rebuilding the document. A path
// is absolute and simple: /a/b/c names the elements c under b under the
// root a, and yields each one's text (its direct character data, CDATA
// sections included, whitespace-only text only if it has no child
// elements; "" for an empty element); /a/b/@id yields the id attribute of
// each element /a/b. Entity and character references are resolved and
// attribute values normalized as an XML parser would. Values come in
// document order; their total is bounded by the document's recorded size,
// which must not exceed max.
//
// Query replays the structure stream and decodes only the container at
// path; it does not verify the document's checksum, which only a full
// Decode can. Payloads Encode wrote without the XML model (too small to
// benefit, or not well-formed) are decoded and scanned; input that is not
// XML fails with ErrNotXML.
func (c *Codec) Query(src []byte, p encoding.Params, path string, max int) ([][]byte, error) {
	q, err := parsePath(path)
	if err != nil {
		return nil, err
	}
	h, err := c.parseHeader(src, p, max)
	if err != nil {
		return nil, err
	}
	d := c.decoders.Get().(*decoder)
	defer func() {
		d.q = nil
		c.decoders.Put(d)
	}()
	var main, packed []byte
	var base *state
	switch h.mode &^ modeModel {
	case modeStored, modeGeneric:
		doc, err := c.Decode(nil, src, p, encoding.Binding{}, max)
		if err != nil {
			return nil, err
		}
		e := c.encoders.Get().(*encoder)
		defer c.encoders.Put(e)
		e.reset(doc, nil)
		if !e.scan() {
			return nil, ErrNotXML
		}
		e.finish()
		main, packed = e.main, e.bw.buf
	default:
		if main, packed, err = c.mainStream(d, h); err != nil {
			return nil, err
		}
		if h.model != nil {
			base = h.model.base
		}
	}
	if err := d.parse(main, packed, base); err != nil {
		return nil, err
	}
	return d.query(q, h.size)
}

func parsePath(path string) (*query, error) {
	if !strings.HasPrefix(path, "/") || len(path) < 2 {
		return nil, fmt.Errorf("%w: %q: want /name/name… or /name…/@attr", ErrBadPath, path)
	}
	q := &query{}
	parts := strings.Split(path[1:], "/")
	for i, s := range parts {
		switch {
		case strings.HasPrefix(s, "@") && i == len(parts)-1 && i > 0 && len(s) > 1:
			q.attr = []byte(s[1:])
		case s == "" || strings.ContainsAny(s, "@<>=\"'&* \t\r\n[]()"):
			return nil, fmt.Errorf("%w: %q: step %q", ErrBadPath, path, s)
		default:
			q.path = append(q.path, []byte(s))
		}
	}
	return q, nil
}

// query is a Query's state during the walk: which nodes match the path,
// and the events runs record for them.
type query struct {
	path [][]byte
	attr []byte // attribute name, nil to query element text
	lvl  []int32
	ev   []qev
}

type qev struct {
	kind byte // evEnter, evChild, evWS, evExit
	ws   string
}

const (
	evEnter = iota
	evChild
	evWS
	evExit
)

// match computes node id's level: how many steps of the path it matches
// (-1: it is off the path).
func (q *query) addNode(d *decoder, id int32) {
	for int(id) >= len(q.lvl) {
		q.lvl = append(q.lvl, -1)
	}
	n := d.nodes[id]
	q.lvl[id] = -1
	if n.parent < 0 {
		q.lvl[id] = 0
		return
	}
	if l := q.lvl[n.parent]; l >= 0 && int(l) < len(q.path) && d.names[n.name] == string(q.path[l]) {
		q.lvl[id] = l + 1
	}
}

func (q *query) target(n int32) bool { return int(n) < len(q.lvl) && int(q.lvl[n]) == len(q.path) }

func (q *query) start(parent, child int32) {
	if q.attr != nil {
		return
	}
	if q.target(child) {
		q.ev = append(q.ev, qev{kind: evEnter})
	}
	if q.target(parent) {
		q.ev = append(q.ev, qev{kind: evChild})
	}
}

func (q *query) exit(n int32) {
	if q.attr == nil && q.target(n) {
		q.ev = append(q.ev, qev{kind: evExit})
	}
}

func (q *query) ws(n int32, w string) {
	if q.attr == nil && q.target(n) {
		q.ev = append(q.ev, qev{kind: evWS, ws: w})
	}
}

func (q *query) textHit(n int32) bool { return q.attr == nil && q.target(n) }

func (q *query) attrHit(d *decoder, el int32, a attr) bool {
	return q.attr != nil && q.target(el) && d.names[a.name] == string(q.attr)
}

// query replays the structure for q and returns the values; limit bounds
// their total size.
func (d *decoder) query(q *query, limit int) ([][]byte, error) {
	d.q = q
	q.lvl, q.ev = q.lvl[:0], q.ev[:0]
	for id := range d.nodes {
		q.addNode(d, int32(id))
	}
	var (
		out       [][]byte
		all       []byte // every value, back to back
		full      []byte // current element's text, whitespace included
		nows      []byte // and without whitespace-only text
		child, in bool
		val       []byte
		err       error
		offs      []int
	)
	emit := func(v []byte) error {
		if len(all)+len(v) > limit {
			return corrupt("query values exceed the document")
		}
		all = append(all, v...)
		offs = append(offs, len(all))
		return nil
	}
	s := d.structure
	cur, tag := int32(0), int32(-1)
	for p := 0; p < len(s); {
		var r *run
		if ref := int(s[p]) - 1; ref >= 0 && ref < 0x7f && ref < len(d.runs) && d.oneOffMark < 0 { // kept run, one-byte reference
			r = &d.runs[ref]
			p++
			if r.ea == r.eb && !r.qhit {
				cur, tag = r.end, r.tag
				continue
			}
		} else if r, p, err = d.nextRun(s, p, cur, tag, limit); err != nil {
			return nil, err
		}
		if r.qhit && q.attr != nil {
			// An attribute slot's container holds its values, in order:
			// the rest of the walk would only find them one by one.
			c := &d.conts[r.hole]
			for c.n > 0 {
				if val, err = d.value(val[:0], r.hole); err != nil {
					return nil, err
				}
				if err := emit(appendUnescaped(nil, val, true)); err != nil {
					return nil, err
				}
			}
			break
		}
		for _, ev := range q.ev[r.ea:r.eb] {
			switch ev.kind {
			case evEnter:
				in, child, full, nows = true, false, full[:0], nows[:0]
			case evChild:
				child = true
			case evWS:
				full = append(full, ev.ws...)
			case evExit:
				if !in {
					return nil, corrupt("query: end of an element not entered")
				}
				in = false
				v := full
				if child {
					v = nows
				}
				if err := emit(v); err != nil {
					return nil, err
				}
			}
		}
		if r.qhit {
			if val, err = d.value(val[:0], r.hole); err != nil {
				return nil, err
			}
			switch {
			case q.attr != nil:
				if err := emit(appendUnescaped(nil, val, true)); err != nil {
					return nil, err
				}
			case r.cdata:
				full, nows = append(full, val...), append(nows, val...)
			default:
				n := len(full)
				full = appendUnescaped(full, val, false)
				nows = append(nows, full[n:]...)
			}
			if len(full) > limit {
				return nil, corrupt("query values exceed the document")
			}
		}
		cur, tag = r.end, r.tag
	}
	out = make([][]byte, len(offs))
	prev := 0
	for i, o := range offs {
		out[i] = all[prev:o:o]
		prev = o
	}
	return out, nil
}

var predefined = map[string]byte{"lt": '<', "gt": '>', "amp": '&', "apos": '\'', "quot": '"'}

// appendUnescaped appends the value raw text or attribute stands for:
// line ends normalized, the predefined entities and character references
// resolved (others kept verbatim), and in attributes whitespace made
// spaces.
func appendUnescaped(dst, raw []byte, attr bool) []byte {
	plain := true
	for _, c := range raw {
		if c == '&' || c == '\r' || (attr && (c == '\n' || c == '\t')) {
			plain = false
			break
		}
	}
	if plain {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\r':
			if i+1 < len(raw) && raw[i+1] == '\n' {
				i++
			}
			c = '\n'
		case c == '&':
			end := bytes.IndexByte(raw[i:min(len(raw), i+40)], ';')
			if end > 1 {
				if r, ok := entity(raw[i+1 : i+end]); ok {
					dst = utf8.AppendRune(dst, r)
					i += end
					continue
				}
			}
		}
		if attr && (c == '\n' || c == '\t') {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

// entity resolves a predefined entity or a character reference (name is
// what lies between & and ;).
func entity(name []byte) (rune, bool) {
	if name[0] != '#' {
		c, ok := predefined[string(name)]
		return rune(c), ok
	}
	num, base := name[1:], 10
	if len(num) > 0 && num[0] == 'x' {
		num, base = num[1:], 16
	}
	if len(num) == 0 || len(num) > 8 {
		return 0, false
	}
	var r rune
	for _, c := range num {
		var d rune
		switch {
		case c >= '0' && c <= '9':
			d = rune(c - '0')
		case base == 16 && c >= 'a' && c <= 'f':
			d = rune(c-'a') + 10
		case base == 16 && c >= 'A' && c <= 'F':
			d = rune(c-'A') + 10
		default:
			return 0, false
		}
		r = r*rune(base) + d
	}
	if r == 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
		return 0, false
	}
	return r, true
}
