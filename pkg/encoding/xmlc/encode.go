package xmlc

import (
	"bytes"
	"encoding/binary"
)

// byte classes for the scanner
const (
	cName  = 0 // part of a name
	cWS    = 1 // XML whitespace: ends a name
	cDelim = 2 // '/' '>' : ends a name
	cBad   = 3 // '<' '=' '"' '\'' '&' NUL: ends a name; never inside one
)

var class = func() (t [256]uint8) {
	for _, c := range []byte(" \t\r\n") {
		t[c] = cWS
	}
	t['/'], t['>'] = cDelim, cDelim
	for _, c := range []byte("<=\"'&\x00") {
		t[c] = cBad
	}
	return
}()

func isWS(b []byte) bool {
	for _, c := range b {
		if class[c] != cWS {
			return false
		}
	}
	return true
}

// contEnc is a container being filled: its values as offsets into the
// source, and its shapes (the model's, then this document's).
type contEnc struct {
	vals   []int32 // start, end pairs
	base   *cont
	shapes []shape
	local  map[string]int32
}

// dict is a string dictionary on the encoder's side: the model's entries,
// then this document's (also written, NUL-terminated, to sec), with a
// small cache in front of the maps.
type dict struct {
	base  map[string]int32
	local map[string]int32
	list  []string
	sec   []byte
	cache [64]int32 // index+1, by length and last byte
}

func (d *dict) reset(list []string, base map[string]int32) {
	d.list, d.base = list, base
	if d.local == nil {
		d.local = map[string]int32{}
	}
	clear(d.local)
	clear(d.cache[:])
	d.sec = d.sec[:0]
}

// ref returns b's index, adding it if it is new.
func (d *dict) ref(b []byte) (i int32, isNew bool) {
	h := len(b) * 7
	if len(b) > 0 {
		h += int(b[len(b)-1])
	}
	h &= len(d.cache) - 1
	if c := d.cache[h]; c > 0 && d.list[c-1] == string(b) {
		return c - 1, false
	}
	var ok bool
	if i, ok = d.base[string(b)]; !ok {
		if i, ok = d.local[string(b)]; !ok {
			i = int32(len(d.list))
			s := string(b)
			d.list = append(d.list, s)
			d.local[s] = i
			d.sec = append(append(d.sec, b...), 0)
			isNew = true
		}
	}
	d.cache[h] = i + 1
	return i, isNew
}

func (d *dict) lookup(b []byte) (int32, bool) {
	if i, ok := d.base[string(b)]; ok {
		return i, true
	}
	i, ok := d.local[string(b)]
	return i, ok
}

// encoder turns one document into the structure stream, the name,
// whitespace and misc sections and per-path containers. One is used by one
// goroutine at a time (they are pooled).
type encoder struct {
	src  []byte
	base *state

	names, ws, misc dict
	nodes           []node
	hint            []int32 // per node: index of the child last entered
	wide            map[uint64]int32
	conts           []contEnc
	ncont           int

	cur, tag  int32  // node, and element whose start tag is open (-1)
	run       []byte // current run: start state (8 bytes), then ops
	runNew    bool   // the run defines something: send it one-off
	runs      map[string]int32
	runKey    []string  // per kept run: its key
	runNext   []int32   // per kept run: the run that followed it last, -1
	kept      []keptRun // per kept run: what replaying it takes
	prevRun   int32     // the kept run before the current one, -1
	runPos    int       // where the current run starts in src
	noReplay  bool      // tests: always tokenize
	structure []byte

	// finish
	main []byte
	bw   bitWriter
	sc   scratch
}

func newEncoder() *encoder {
	return &encoder{wide: map[uint64]int32{}, runs: map[string]int32{}}
}

// reset prepares e for a document, primed with base (nil: empty).
func (e *encoder) reset(src []byte, base *state) {
	if base == nil {
		base = emptyState
	}
	e.src, e.base = src, base
	e.names.reset(base.names, base.nameIdx)
	e.ws.reset(base.ws, base.wsIdx)
	e.misc.reset(base.misc, base.miscIdx)
	clear(e.wide)
	clear(e.runs)
	e.runKey, e.runNext, e.kept, e.prevRun, e.runPos = e.runKey[:0], e.runNext[:0], e.kept[:0], -1, 0
	e.nodes = append(e.nodes[:0], base.nodes...)
	e.hint = e.hint[:0]
	for range e.nodes {
		e.hint = append(e.hint, -1)
	}
	for id, n := range base.nodes { // index the model's wide nodes
		if len(n.children) > wideAt {
			for k, c := range n.children {
				e.wide[uint64(id)<<33|uint64(base.nodes[c].name)] = int32(k)
			}
		}
		if len(n.attrs) > wideAt {
			for k, a := range n.attrs {
				e.wide[uint64(id)<<33|1<<32|uint64(a.name)] = int32(k)
			}
		}
	}
	e.ncont = 0
	for i := range base.conts {
		e.addCont(&base.conts[i])
	}
	e.cur, e.tag = 0, -1
	e.run = appendState(e.run[:0], 0, -1)
	e.runNew = false
	e.structure = e.structure[:0]
	e.main = e.main[:0]
	e.bw = bitWriter{buf: e.bw.buf[:0]}
}

var emptyState = newState().frozen()

func appendState(b []byte, cur, tag int32) []byte {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(b, uint32(cur)), uint32(tag))
}

// keptRun is what the encoder knows of a kept run to replay it without
// tokenizing: the input it matched (from its start to its value), the
// state it starts and ends in, and its hole.
type keptRun struct {
	lit            []byte // src bytes from the run's start to its value
	cur, tag       int32  // state it starts in
	endCur, endTag int32
	hole           int32 // container, -1 none
	kind           byte  // opText, opCDATA, or the attribute's quote
}

// endRun ends the current run, whose value (if hole >= 0) is
// src[start:end], and appends its reference (and definition, if new) to
// the structure stream; the next run starts at next.
func (e *encoder) endRun(hole int32, kind byte, start, next int) {
	ops := e.run[8:]
	if len(ops) == 0 {
		e.runPos = next
		return
	}
	s := e.structure
	id, ok := int32(-1), false
	if e.prevRun >= 0 { // runs tend to follow each other in the same order
		if n := e.runNext[e.prevRun]; n >= 0 && e.runKey[n] == string(e.run) {
			id, ok = n, true
		}
	}
	if !ok && !e.runNew {
		id, ok = e.runs[string(e.run)]
	}
	switch {
	case e.runNew:
		s = append(s, 0)
		s = binary.AppendUvarint(s, uint64(len(ops)))
		s = append(s, ops...)
	case ok:
		s = binary.AppendUvarint(s, uint64(id)+1)
	default:
		id = int32(len(e.runKey))
		k := string(e.run)
		e.runs[k] = id
		e.runKey = append(e.runKey, k)
		e.runNext = append(e.runNext, -1)
		kr := keptRun{
			cur:    int32(binary.LittleEndian.Uint32(e.run)),
			tag:    int32(binary.LittleEndian.Uint32(e.run[4:])),
			endCur: e.cur, endTag: e.tag, hole: hole, kind: kind,
		}
		if hole >= 0 {
			kr.lit = e.src[e.runPos:start]
		}
		e.kept = append(e.kept, kr)
		s = binary.AppendUvarint(s, uint64(id)+1)
		s = binary.AppendUvarint(s, uint64(len(ops)))
		s = append(s, ops...)
	}
	if e.prevRun >= 0 && id >= 0 {
		e.runNext[e.prevRun] = id
	}
	e.prevRun = id
	e.structure = s
	e.run = appendState(e.run[:0], e.cur, e.tag)
	e.runNew = false
	e.runPos = next
}

func (e *encoder) addCont(base *cont) int32 {
	if e.ncont == len(e.conts) {
		e.conts = append(e.conts, contEnc{local: map[string]int32{}})
	}
	c := &e.conts[e.ncont]
	c.vals = c.vals[:0]
	c.base = base
	c.shapes = nil
	if base != nil {
		c.shapes = base.shapes
	}
	clear(c.local)
	e.ncont++
	return int32(e.ncont - 1)
}

// hole adds the value src[start:end] to container c; it ends the run,
// and the next starts at next. kind is opText, opCDATA or the quote
// around an attribute value.
func (e *encoder) hole(c int32, kind byte, start, end, next int) {
	e.conts[c].vals = append(e.conts[c].vals, int32(start), int32(end))
	e.endRun(c, kind, start, next)
}

// replay tries the kept run n at src[i]: if the input there is the run's
// literal and then a value of the same kind, tokenizing would give the
// run's ops, so it is referred to directly. It returns where the next run
// starts.
func (e *encoder) replay(n int32, i int) (int, bool) {
	r := &e.kept[n]
	if r.hole < 0 || r.cur != e.cur || r.tag != e.tag || !bytes.HasPrefix(e.src[i:], r.lit) {
		return 0, false
	}
	src := e.src
	v := i + len(r.lit)
	var end, next int
	switch r.kind {
	case opText:
		k := indexLT(src[v:])
		if k == 0 || isWS(src[v:v+k]) {
			return 0, false
		}
		end, next = v+k, v+k
	case opCDATA:
		k := bytes.Index(src[v:], cdataClose)
		if k < 0 {
			return 0, false
		}
		end, next = v+k, v+k+len(cdataClose)
	default:
		k := bytes.IndexByte(src[v:], r.kind)
		if k < 0 {
			return 0, false
		}
		end, next = v+k, v+k+1
	}
	e.conts[r.hole].vals = append(e.conts[r.hole].vals, int32(v), int32(end))
	e.structure = binary.AppendUvarint(e.structure, uint64(n)+1)
	e.cur, e.tag = r.endCur, r.endTag
	e.run = appendState(e.run[:0], e.cur, e.tag)
	e.prevRun, e.runPos = n, next
	return next, true
}

// ref appends the index of b in d to the run (plus one, 0 for empty, when
// optional).
func (e *encoder) ref(d *dict, b []byte, optional bool) int32 {
	if optional && len(b) == 0 {
		e.run = append(e.run, 0)
		return -1
	}
	i, isNew := d.ref(b)
	e.runNew = e.runNew || isNew
	off := uint64(0)
	if optional {
		off = 1
	}
	e.run = binary.AppendUvarint(e.run, uint64(i)+off)
	return i
}

const wideAt = 16 // children or attributes beyond which lookups use a map

func (e *encoder) nameOf(n int32) string { return e.names.list[e.nodes[n].name] }

// start appends the start of element name under parent and returns its node.
func (e *encoder) start(parent int32, name []byte) int32 {
	ch := e.nodes[parent].children
	k := -1
	if h := int(e.hint[parent]) + 1; h < len(ch) && e.nameOf(ch[h]) == string(name) {
		k = h
	} else if len(ch) <= wideAt {
		for i, c := range ch {
			if e.nameOf(c) == string(name) {
				k = i
				break
			}
		}
	} else if ni, ok := e.names.lookup(name); ok {
		if v, ok := e.wide[uint64(parent)<<33|uint64(ni)]; ok {
			k = int(v)
		}
	}
	if k < 0 {
		k = len(ch)
	}
	if k < maxInlineChild {
		e.run = append(e.run, byte(opStart0+k))
	} else {
		e.run = append(e.run, opStartX)
		e.run = binary.AppendUvarint(e.run, uint64(k))
	}
	e.hint[parent] = int32(k)
	if k < len(ch) {
		return ch[k]
	}
	e.runNew = true
	ni := e.ref(&e.names, name, false)
	id := int32(len(e.nodes))
	e.nodes = append(e.nodes, node{name: ni, parent: parent, text: -1})
	e.hint = append(e.hint, -1)
	e.nodes[parent].children = append(e.nodes[parent].children, id)
	if len(e.nodes[parent].children) > wideAt {
		if len(e.nodes[parent].children) == wideAt+1 { // index the earlier ones
			for i, c := range e.nodes[parent].children {
				e.wide[uint64(parent)<<33|uint64(e.nodes[c].name)] = int32(i)
			}
		}
		e.wide[uint64(parent)<<33|uint64(ni)] = int32(k)
	}
	return id
}

// attr appends attribute name's op (canonical or not) and returns its
// container.
func (e *encoder) attr(n int32, name []byte, canonical bool) int32 {
	as := e.nodes[n].attrs
	k := -1
	if len(as) <= wideAt {
		for i, a := range as {
			if e.names.list[a.name] == string(name) {
				k = i
				break
			}
		}
	} else if ni, ok := e.names.lookup(name); ok {
		if v, ok := e.wide[uint64(n)<<33|1<<32|uint64(ni)]; ok {
			k = int(v)
		}
	}
	if canonical {
		e.run = append(e.run, opAttr)
	} else {
		e.run = append(e.run, opAttrX)
	}
	if k >= 0 {
		e.run = binary.AppendUvarint(e.run, uint64(k))
		return as[k].cont
	}
	k = len(as)
	e.runNew = true
	e.run = binary.AppendUvarint(e.run, uint64(k))
	ni := e.ref(&e.names, name, false)
	c := e.addCont(nil)
	e.nodes[n].attrs = append(e.nodes[n].attrs, attr{name: ni, cont: c})
	if k >= wideAt {
		if k == wideAt {
			for i, a := range e.nodes[n].attrs {
				e.wide[uint64(n)<<33|1<<32|uint64(a.name)] = int32(i)
			}
		}
		e.wide[uint64(n)<<33|1<<32|uint64(ni)] = int32(k)
	}
	return c
}

func (e *encoder) textCont(n int32) int32 {
	if c := e.nodes[n].text; c >= 0 {
		return c
	}
	c := e.addCont(nil)
	e.nodes[n].text = c
	return c
}

func (e *encoder) addMisc(b []byte) {
	e.run = append(e.run, opMisc)
	e.ref(&e.misc, b, false)
}

var (
	cdataOpen  = []byte("<![CDATA[")
	cdataClose = []byte("]]>")
	commOpen   = []byte("<!--")
	commClose  = []byte("-->")
	piClose    = []byte("?>")
	doctype    = []byte("<!DOCTYPE")
)

// scan tokenizes e.src into the structure stream and containers. It
// returns false if the input is not XML as the format models it (then the
// caller falls back to a generic codec); every byte it accepts is
// reproduced exactly.
func (e *encoder) scan() bool {
	src := e.src
	n := len(src)
	if n > maxXMLInput || bytes.IndexByte(src, 0) >= 0 {
		return false
	}
	i := 0
	for i < n {
		if len(e.run) > maxRun {
			e.endRun(-1, 0, i, i)
		}
		if len(e.run) == 8 && e.prevRun >= 0 && !e.noReplay { // at a run's start, after a kept run
			if nx := e.runNext[e.prevRun]; nx >= 0 {
				if j, ok := e.replay(nx, i); ok {
					i = j
					continue
				}
			}
		}
		if e.tag >= 0 { // a replayed run ended inside a start tag
			var ok bool
			if i, ok = e.attrs(i, e.tag); !ok {
				return false
			}
			continue
		}
		if src[i] != '<' {
			j := indexLT(src[i:])
			t := src[i : i+j]
			if isWS(t) {
				e.run = append(e.run, opWS)
				e.ref(&e.ws, t, false)
			} else {
				e.run = append(e.run, opText)
				e.hole(e.textCont(e.cur), opText, i, i+j, i+j)
			}
			i += j
			continue
		}
		if i+1 >= n {
			return false
		}
		switch src[i+1] {
		case '/': // end tag
			j := i + 2
			k := j
			for k < n && class[src[k]] == cName {
				k++
			}
			if e.cur == 0 || e.nameOf(e.cur) != string(src[j:k]) {
				return false
			}
			w := k
			for w < n && class[src[w]] == cWS {
				w++
			}
			if w >= n || src[w] != '>' {
				return false
			}
			if w == k {
				e.run = append(e.run, opEnd)
			} else {
				e.run = append(e.run, opEndWS)
				e.ref(&e.ws, src[k:w], false)
			}
			e.cur = e.nodes[e.cur].parent
			i = w + 1
		case '!':
			rest := src[i:]
			switch {
			case bytes.HasPrefix(rest, commOpen):
				j := bytes.Index(rest[len(commOpen):], commClose)
				if j < 0 {
					return false
				}
				end := i + len(commOpen) + j + len(commClose)
				e.addMisc(src[i:end])
				i = end
			case bytes.HasPrefix(rest, cdataOpen):
				j := bytes.Index(rest[len(cdataOpen):], cdataClose)
				if j < 0 {
					return false
				}
				s := i + len(cdataOpen)
				e.run = append(e.run, opCDATA)
				e.hole(e.textCont(e.cur), opCDATA, s, s+j, s+j+len(cdataClose))
				i = s + j + len(cdataClose)
			case bytes.HasPrefix(rest, doctype):
				end := doctypeEnd(rest)
				if end < 0 {
					return false
				}
				e.addMisc(src[i : i+end])
				i += end
			default:
				return false
			}
		case '?':
			j := bytes.Index(src[i+2:], piClose)
			if j < 0 {
				return false
			}
			end := i + 2 + j + len(piClose)
			e.addMisc(src[i:end])
			i = end
		default:
			var ok bool
			if i, ok = e.startTag(i); !ok {
				return false
			}
		}
	}
	if e.tag >= 0 { // the input ends inside a start tag (after a replayed attribute)
		return false
	}
	e.endRun(-1, 0, n, n)
	return true
}

// indexLT returns the index of the first '<' in b, or len(b): a plain loop
// for the short text between tags, IndexByte beyond.
func indexLT(b []byte) int {
	for i := 0; i < len(b) && i < 16; i++ {
		if b[i] == '<' {
			return i
		}
	}
	if len(b) <= 16 {
		return len(b)
	}
	if j := bytes.IndexByte(b[16:], '<'); j >= 0 {
		return 16 + j
	}
	return len(b)
}

// startTag scans the start tag at src[i] (after '<' comes a name) and
// returns the position after it.
func (e *encoder) startTag(i int) (int, bool) {
	src := e.src
	n := len(src)
	j := i + 1
	k := j
	for k < n && class[src[k]] == cName {
		k++
	}
	if k == j || k >= n {
		return 0, false
	}
	el := e.start(e.cur, src[j:k])
	e.tag = el
	return e.attrs(k, el)
}

// attrs scans the rest of element el's start tag from src[p]: attributes
// and the closing > or />.
func (e *encoder) attrs(p int, el int32) (int, bool) {
	src := e.src
	n := len(src)
	for {
		w := p
		for p < n && class[src[p]] == cWS {
			p++
		}
		if p >= n {
			return 0, false
		}
		switch c := src[p]; {
		case c == '>':
			if p == w {
				e.run = append(e.run, opClose)
			} else {
				e.run = append(e.run, opCloseWS)
				e.ref(&e.ws, src[w:p], false)
			}
			e.cur, e.tag = el, -1
			return p + 1, true
		case c == '/':
			if p+1 >= n || src[p+1] != '>' {
				return 0, false
			}
			if p == w {
				e.run = append(e.run, opCloseEmpty)
			} else {
				e.run = append(e.run, opCloseEmptyWS)
				e.ref(&e.ws, src[w:p], false)
			}
			e.tag = -1
			return p + 2, true
		case p == w:
			return 0, false // an attribute must follow whitespace
		}
		a := p
		for p < n && class[src[p]] == cName {
			p++
		}
		an := p
		for p < n && class[src[p]] == cWS {
			p++
		}
		if an == a || p >= n || src[p] != '=' {
			return 0, false
		}
		eq := p
		p++
		for p < n && class[src[p]] == cWS {
			p++
		}
		if p >= n || (src[p] != '"' && src[p] != '\'') {
			return 0, false
		}
		q := src[p]
		v := p + 1
		end := bytes.IndexByte(src[v:], q)
		if end < 0 {
			return 0, false
		}
		canonical := a-w == 1 && src[w] == ' ' && an == eq && eq+1 == p && q == '"'
		c := e.attr(el, src[a:an], canonical)
		if !canonical {
			e.ref(&e.ws, src[w:a], true)
			e.ref(&e.ws, src[an:eq], true)
			e.ref(&e.ws, src[eq+1:p], true)
			e.run = append(e.run, q)
		}
		e.hole(c, q, v, v+end, v+end+1)
		p = v + end + 1
	}
}

// doctypeEnd returns the length of the DOCTYPE declaration at the start of
// b: up to the first '>' outside quotes and the internal subset's
// brackets, or -1.
func doctypeEnd(b []byte) int {
	var quote byte
	depth := 0
	for i := len(doctype); i < len(b); i++ {
		c := b[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[':
			depth++
		case c == ']':
			depth--
		case c == '>' && depth <= 0:
			return i + 1
		}
	}
	return -1
}

// maxXMLInput is the largest input the XML model takes: offsets are int32.
const maxXMLInput = 1<<31 - 1

// finish writes the main stream (section lengths, structure, names,
// whitespace, misc, containers) to e.main and the packed columns to e.bw.
func (e *encoder) finish() {
	m := e.main[:0]
	m = binary.AppendUvarint(m, uint64(len(e.structure)))
	m = binary.AppendUvarint(m, uint64(len(e.names.sec)))
	m = binary.AppendUvarint(m, uint64(len(e.ws.sec)))
	m = binary.AppendUvarint(m, uint64(len(e.misc.sec)))
	m = append(m, e.structure...)
	m = append(m, e.names.sec...)
	m = append(m, e.ws.sec...)
	m = append(m, e.misc.sec...)
	m = binary.AppendUvarint(m, uint64(e.ncont))
	e.main = m
	for i := range e.ncont {
		e.encodeCont(&e.conts[i])
	}
	e.bw.align()
}
