package xmlc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

var errCorrupt = fmt.Errorf("%w: xml", encoding.ErrCorrupt)

func corrupt(what string) error { return fmt.Errorf("%w: %s", errCorrupt, what) }

// reader reads the main stream's fields, failing instead of panicking.
type reader struct {
	b   []byte
	p   int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = corrupt(what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b[r.p:])
	if n <= 0 {
		r.fail(what)
		r.p = len(r.b)
		return 0
	}
	r.p += n
	return v
}

// count reads a uvarint that must not exceed max.
func (r *reader) count(max int, what string) int {
	v := r.uvarint(what)
	if v > uint64(max) {
		r.fail(what)
		r.p = len(r.b)
		return 0
	}
	return int(v)
}

func (r *reader) varint(what string) int64 {
	v, n := binary.Varint(r.b[r.p:])
	if n <= 0 {
		r.fail(what)
		r.p = len(r.b)
		return 0
	}
	r.p += n
	return v
}

func (r *reader) byte1(what string) byte {
	if r.p >= len(r.b) {
		r.fail(what)
		return 0
	}
	r.p++
	return r.b[r.p-1]
}

func (r *reader) bytes(n int, what string) []byte {
	if n < 0 || n > len(r.b)-r.p {
		r.fail(what)
		r.p = len(r.b)
		return nil
	}
	r.p += n
	return r.b[r.p-n : r.p]
}

// cstr reads a NUL-terminated string.
func (r *reader) cstr(what string) []byte {
	j := bytes.IndexByte(r.b[r.p:], 0)
	if j < 0 {
		r.fail(what)
		r.p = len(r.b)
		return nil
	}
	r.p += j + 1
	return r.b[r.p-j-1 : r.p-1]
}

// column yields one digit group of one shape, value after value.
type column struct {
	mode, wmode byte
	left        int
	widths      []byte
	br          bitReader
	nbits       uint
	cur         uint64 // FOR: min; delta modes: previous value
	dlo         int64
	started     bool
	inl         []byte
	dict        []uint64
}

func (c *column) next() (uint64, int, error) {
	if c.left <= 0 {
		return 0, 0, corrupt("column overrun")
	}
	c.left--
	var v uint64
	switch c.mode {
	case colFOR:
		v = c.cur + c.br.read(c.nbits)
	case colDeltaFOR, colDeltaBytes:
		if !c.started {
			c.started = true
			v = c.cur
			break
		}
		var d int64
		if c.mode == colDeltaFOR {
			d = int64(c.br.read(c.nbits)) + c.dlo
		} else {
			d = int64(c.inl[0]) + c.dlo
			c.inl = c.inl[1:]
		}
		v = c.cur + uint64(d)
		c.cur = v
	case colBytes:
		v = c.cur + uint64(c.inl[0])
		c.inl = c.inl[1:]
	case colVarint:
		x, n := binary.Uvarint(c.inl)
		if n <= 0 {
			return 0, 0, corrupt("column varint")
		}
		c.inl = c.inl[n:]
		v = x
	case colDict:
		i := int(c.inl[0])
		c.inl = c.inl[1:]
		if i >= len(c.dict) {
			return 0, 0, corrupt("column dictionary index")
		}
		v = c.dict[i]
	}
	if v > maxNumber {
		return 0, 0, corrupt("number out of range")
	}
	w := int(c.wmode)
	if c.wmode == widthStream {
		w = int(c.widths[0])
		c.widths = c.widths[1:]
		if w < 1 || w > maxDigits {
			return 0, 0, corrupt("digit width")
		}
	}
	if w > 0 && v >= pow10[w] {
		return 0, 0, corrupt("number wider than its width")
	}
	return v, w, nil
}

// contDec is a container being read.
type contDec struct {
	n      int // values left
	method byte
	raw    []byte
	shapes []shape
	idx    []byte // shape of each value, bytes or uvarints (wide)
	wide   bool
	colOff []int32 // per shape: first column in decoder.cols, -1 if none
}

// run is a kept (or one-off) run, rendered: its literal output, the state
// it ends in, and its hole.
type run struct {
	a, b     int32 // literal output: arena[a:b]
	end, tag int32 // state after the run
	hole     int32 // container of the value after the literal, -1 none
	suffix   byte  // after the value: quote, 'C' for "]]>", 0 none
	qhit     bool  // query: the hole is a value queried
	cdata    bool  // query: the hole is a CDATA section
	ea, eb   int32 // query: events, qev[ea:eb]
}

// decoder rebuilds documents (or answers queries) from the main stream.
// One is used by one goroutine at a time (they are pooled).
type decoder struct {
	names  []string
	ws     []string
	misc   []string
	nodes  []node
	conts  []contDec
	cols   []column
	cnt    []int32
	nconts int // containers bound to nodes so far

	structure, namesSec, wsSec, miscSec []byte

	runs       []run
	arena      []byte
	oneOff     run
	oneOffMark int    // arena length before the current one-off run, -1 none
	q          *query // nil when decoding
	main       []byte // zstd output buffer
	zin        []byte // zstd input, with its magic number restored
}

// parse reads the main stream m and the packed section; base primes the
// dictionaries (nil: empty).
func (d *decoder) parse(m, packed []byte, base *state) error {
	if base == nil {
		base = emptyState
	}
	r := reader{b: m}
	nOps := r.count(len(m), "structure length")
	nNames := r.count(len(m), "names length")
	nWS := r.count(len(m), "whitespace length")
	nMisc := r.count(len(m), "misc length")
	d.structure = r.bytes(nOps, "structure")
	d.namesSec = r.bytes(nNames, "names")
	d.wsSec = r.bytes(nWS, "whitespace")
	d.miscSec = r.bytes(nMisc, "misc")
	nc := r.count(len(m)+len(base.conts), "container count")
	if r.err != nil {
		return r.err
	}
	if nc < len(base.conts) {
		return corrupt("fewer containers than the model's")
	}
	d.names, d.ws, d.misc = base.names, base.ws, base.misc
	d.nodes = append(d.nodes[:0], base.nodes...)
	d.cols = d.cols[:0]
	d.runs, d.arena, d.oneOffMark = d.runs[:0], d.arena[:0], -1
	d.nconts = len(base.conts)
	if cap(d.conts) < nc {
		d.conts = make([]contDec, nc)
	}
	d.conts = d.conts[:nc]
	pk := reader{b: packed}
	for i := range nc {
		c := &d.conts[i]
		*c = contDec{colOff: c.colOff[:0]}
		if i < len(base.conts) {
			c.shapes = base.conts[i].shapes
		}
		c.n = r.count(nOps, "value count")
		if c.n == 0 {
			continue
		}
		switch c.method = r.byte1("method"); c.method {
		case methodRaw:
			c.raw = r.bytes(r.count(len(m), "raw length"), "raw values")
		case methodShapes:
			if err := d.parseShapes(&r, &pk, c); err != nil {
				return err
			}
		default:
			r.fail("method")
		}
		if r.err != nil {
			return r.err
		}
	}
	if r.err == nil && r.p != len(m) {
		r.fail("trailing bytes in main stream")
	}
	if r.err == nil && pk.p != len(packed) {
		r.fail("trailing packed bytes")
	}
	return r.err
}

func (d *decoder) parseShapes(r, pk *reader, c *contDec) error {
	nNew := r.count(len(r.b), "shape count")
	for range nNew {
		g := r.count(len(r.b), "group count")
		start := r.p
		for range g + 1 { // the separators, each NUL-terminated
			r.cstr("separator")
		}
		if r.err != nil {
			return r.err
		}
		c.shapes = append(c.shapes, newShape(string(r.b[start:r.p-1])))
	}
	T := len(c.shapes)
	if T == 0 {
		return corrupt("no shapes")
	}
	d.cnt = slices.Grow(d.cnt[:0], T)[:T]
	clear(d.cnt)
	if T == 1 {
		d.cnt[0] = int32(c.n)
	} else if T <= 256 {
		c.idx = r.bytes(c.n, "shape indexes")
		for _, id := range c.idx {
			if int(id) >= T {
				return corrupt("shape index")
			}
			d.cnt[id]++
		}
	} else {
		c.wide = true
		start := r.p
		for range c.n {
			id := r.uvarint("shape index")
			if r.err != nil {
				return r.err
			}
			if id >= uint64(T) {
				return corrupt("shape index")
			}
			d.cnt[id]++
		}
		c.idx = r.b[start:r.p]
	}
	if r.err != nil {
		return r.err
	}
	c.colOff = slices.Grow(c.colOff[:0], T)[:T]
	for id := range T {
		c.colOff[id] = -1
		g := c.shapes[id].groups()
		if d.cnt[id] == 0 || g == 0 {
			continue
		}
		c.colOff[id] = int32(len(d.cols))
		for range g {
			col, err := parseColumn(r, pk, int(d.cnt[id]))
			if err != nil {
				return err
			}
			d.cols = append(d.cols, col)
		}
	}
	return nil
}

func parseColumn(r, pk *reader, n int) (column, error) {
	desc := r.byte1("column")
	c := column{mode: desc >> 5, wmode: desc & 31, left: n}
	if c.wmode > maxDigits && c.wmode != widthStream {
		return c, corrupt("width mode")
	}
	if c.wmode == widthStream {
		c.widths = r.bytes(n, "widths")
	}
	packed := func(values int) {
		b := r.byte1("bits")
		if b > 60 {
			r.fail("bits")
			return
		}
		c.nbits = uint(b)
		c.br = bitReader{src: pk.bytes((values*int(b)+7)/8, "packed column")}
	}
	switch c.mode {
	case colFOR:
		c.cur = r.uvarint("minimum")
		packed(n)
	case colDeltaFOR:
		c.cur = r.uvarint("first")
		c.dlo = r.varint("delta")
		packed(n - 1)
	case colBytes:
		c.cur = r.uvarint("minimum")
		c.inl = r.bytes(n, "bytes")
	case colDeltaBytes:
		c.cur = r.uvarint("first")
		c.dlo = r.varint("delta")
		c.inl = r.bytes(n-1, "delta bytes")
	case colVarint:
		start := r.p
		for range n {
			r.uvarint("varint")
			if r.err != nil {
				break
			}
		}
		c.inl = r.b[start:r.p]
	case colDict:
		k := r.count(256, "dictionary size")
		prev := uint64(0)
		for range k {
			prev += r.uvarint("dictionary")
			c.dict = append(c.dict, prev)
		}
		c.inl = r.bytes(n, "dictionary indexes")
	default:
		return c, corrupt("column mode")
	}
	if r.err == nil {
		r.err = pk.err
	}
	return c, r.err
}

// value appends the next value of container ci.
func (d *decoder) value(out []byte, ci int32) ([]byte, error) {
	c := &d.conts[ci]
	if c.n <= 0 {
		return out, corrupt("container overrun")
	}
	c.n--
	if c.method == methodRaw {
		j := bytes.IndexByte(c.raw, 0)
		if j < 0 {
			return out, corrupt("raw value")
		}
		out = append(out, c.raw[:j]...)
		c.raw = c.raw[j+1:]
		return out, nil
	}
	id := 0
	if len(c.shapes) > 1 {
		if c.wide {
			x, n := binary.Uvarint(c.idx)
			c.idx = c.idx[n:]
			id = int(x)
		} else {
			id = int(c.idx[0])
			c.idx = c.idx[1:]
		}
	}
	sh := &c.shapes[id]
	if sh.seps == nil {
		return append(out, sh.key...), nil
	}
	out = append(out, sh.seps[0]...)
	cols := d.cols[c.colOff[id]:]
	for g := 1; g < len(sh.seps); g++ {
		col := &cols[g-1]
		var v uint64
		var w int
		if col.mode == colFOR && col.wmode != widthStream && col.left > 0 { // the common case, inline
			col.left--
			v, w = col.cur+col.br.read(col.nbits), int(col.wmode)
			if v > maxNumber || (w > 0 && v >= pow10[w]) {
				return out, corrupt("number out of range")
			}
		} else {
			var err error
			if v, w, err = col.next(); err != nil {
				return out, err
			}
		}
		out = appendDigits(out, v, w)
		out = append(out, sh.seps[g]...)
	}
	return out, nil
}

// name, ws and misc resolve references during the walk.
func (d *decoder) nameRef(r *reader) (int32, error) {
	i := r.uvarint("name index")
	switch {
	case r.err != nil:
		return 0, r.err
	case i < uint64(len(d.names)):
		return int32(i), nil
	case i == uint64(len(d.names)):
		j := bytes.IndexByte(d.namesSec, 0)
		if j <= 0 {
			return 0, corrupt("name")
		}
		d.names = append(d.names, string(d.namesSec[:j]))
		d.namesSec = d.namesSec[j+1:]
		return int32(i), nil
	}
	return 0, corrupt("name index")
}

func (d *decoder) wsRef(r *reader, optional bool) (string, error) {
	i := r.uvarint("whitespace index")
	if r.err != nil {
		return "", r.err
	}
	if optional {
		if i == 0 {
			return "", nil
		}
		i--
	}
	switch {
	case i < uint64(len(d.ws)):
		return d.ws[i], nil
	case i == uint64(len(d.ws)):
		j := bytes.IndexByte(d.wsSec, 0)
		if j < 0 {
			return "", corrupt("whitespace")
		}
		d.ws = append(d.ws, string(d.wsSec[:j]))
		d.wsSec = d.wsSec[j+1:]
		return d.ws[i], nil
	}
	return "", corrupt("whitespace index")
}

func (d *decoder) miscRef(r *reader) (string, error) {
	i := r.uvarint("misc index")
	switch {
	case r.err != nil:
		return "", r.err
	case i < uint64(len(d.misc)):
		return d.misc[i], nil
	case i == uint64(len(d.misc)):
		j := bytes.IndexByte(d.miscSec, 0)
		if j < 0 {
			return "", corrupt("misc")
		}
		d.misc = append(d.misc, string(d.miscSec[:j]))
		d.miscSec = d.miscSec[j+1:]
		return d.misc[i], nil
	}
	return "", corrupt("misc index")
}

func (d *decoder) newCont() (int32, error) {
	if d.nconts >= len(d.conts) {
		return 0, corrupt("more containers than listed")
	}
	d.nconts++
	return int32(d.nconts - 1), nil
}

// child enters the k-th child of parent, creating it (and reading its
// name) when k is the next new one.
func (d *decoder) child(r *reader, parent int32, k uint64) (int32, error) {
	ch := d.nodes[parent].children
	if k < uint64(len(ch)) {
		return ch[k], nil
	}
	if k > uint64(len(ch)) {
		return 0, corrupt("child index")
	}
	ni, err := d.nameRef(r)
	if err != nil {
		return 0, err
	}
	id := int32(len(d.nodes))
	d.nodes = append(d.nodes, node{name: ni, parent: parent, text: -1})
	d.nodes[parent].children = append(d.nodes[parent].children, id)
	if d.q != nil {
		d.q.addNode(d, id)
	}
	return id, nil
}

// attrSlot returns the k-th attribute slot of el, creating it when k is
// the next new one.
func (d *decoder) attrSlot(r *reader, el int32, k uint64) (attr, error) {
	as := d.nodes[el].attrs
	if k < uint64(len(as)) {
		return as[k], nil
	}
	if k > uint64(len(as)) {
		return attr{}, corrupt("attribute index")
	}
	ni, err := d.nameRef(r)
	if err != nil {
		return attr{}, err
	}
	c, err := d.newCont()
	if err != nil {
		return attr{}, err
	}
	a := attr{name: ni, cont: c}
	d.nodes[el].attrs = append(d.nodes[el].attrs, a)
	return a, nil
}

func (d *decoder) textCont(n int32) (int32, error) {
	if c := d.nodes[n].text; c >= 0 {
		return c, nil
	}
	c, err := d.newCont()
	if err != nil {
		return 0, err
	}
	d.nodes[n].text = c
	return c, nil
}

var errOverflow = fmt.Errorf("%w: output exceeds the recorded size", errCorrupt)

// walk replays the structure stream, appending the document (at most size
// bytes) to out. It fails as soon as the document grows past size.
func (d *decoder) walk(out []byte, size int) ([]byte, error) {
	limit := len(out) + size
	s := d.structure
	p := 0
	cur, tag := int32(0), int32(-1)
	var err error
	for p < len(s) {
		var r *run
		if ref := int(s[p]) - 1; ref >= 0 && ref < 0x7f && ref < len(d.runs) && d.oneOffMark < 0 { // kept run, one-byte reference
			r = &d.runs[ref]
			p++
		} else if r, p, err = d.nextRun(s, p, cur, tag, size); err != nil {
			return out, err
		}
		out = append(out, d.arena[r.a:r.b]...)
		if r.hole >= 0 {
			if out, err = d.value(out, r.hole); err != nil {
				return out, err
			}
			switch r.suffix {
			case 0:
			case 'C':
				out = append(out, cdataClose...)
			default:
				out = append(out, r.suffix)
			}
		}
		cur, tag = r.end, r.tag
		if len(out) > limit {
			return out, errOverflow
		}
	}
	if tag >= 0 {
		return out, corrupt("unterminated start tag")
	}
	return out, nil
}

// nextRun reads the run reference at s[p], rendering the run first if it
// is defined there, and returns it with the position after it. A one-off
// run's output lives at the arena's end until the next run is read.
func (d *decoder) nextRun(s []byte, p int, cur, tag int32, limit int) (*run, int, error) {
	if d.oneOffMark >= 0 { // drop the previous one-off's output
		d.arena = d.arena[:d.oneOffMark]
		d.oneOffMark = -1
	}
	var ref uint64
	if b := s[p]; b < 0x80 {
		ref = uint64(b)
		p++
	} else {
		v, n := binary.Uvarint(s[p:])
		if n <= 0 {
			return nil, p, corrupt("run reference")
		}
		ref, p = v, p+n
	}
	if ref != 0 && ref-1 < uint64(len(d.runs)) {
		return &d.runs[ref-1], p, nil
	}
	if ref != 0 && ref-1 > uint64(len(d.runs)) {
		return nil, p, corrupt("run reference")
	}
	r := reader{b: s, p: p}
	def := r.bytes(r.count(len(s), "run length"), "run")
	if r.err != nil {
		return nil, p, r.err
	}
	mark := len(d.arena)
	nr, err := d.exec(def, cur, tag, mark+limit)
	if err != nil {
		return nil, p, err
	}
	if ref == 0 {
		d.oneOff, d.oneOffMark = nr, mark
		return &d.oneOff, r.p, nil
	}
	d.runs = append(d.runs, nr)
	return &d.runs[len(d.runs)-1], r.p, nil
}

// exec interprets the ops of a run from state (cur, tag), appending its
// literal output to the arena (failing past limit) and recording its end
// state, its hole and, for queries, its events.
func (d *decoder) exec(def []byte, cur, tag int32, limit int) (run, error) {
	rn := run{a: int32(len(d.arena)), hole: -1}
	if d.q != nil {
		rn.ea = int32(len(d.q.ev))
	}
	out := d.arena
	r := reader{b: def}
	var err error
	for r.p < len(r.b) && err == nil {
		if len(out) > limit {
			d.arena = out
			return rn, errOverflow
		}
		op := r.b[r.p]
		r.p++
		if op >= opStart0 || op == opStartX {
			k := uint64(op - opStart0)
			if op == opStartX {
				if k = r.uvarint("child index"); r.err != nil {
					err = r.err
					break
				}
			}
			if tag >= 0 {
				err = corrupt("start tag inside a tag")
				break
			}
			if tag, err = d.child(&r, cur, k); err != nil {
				break
			}
			if d.q != nil {
				d.q.start(cur, tag)
			}
			out = append(out, '<')
			out = append(out, d.names[d.nodes[tag].name]...)
			continue
		}
		switch op {
		case opAttr, opAttrX:
			if tag < 0 {
				err = corrupt("attribute outside a tag")
				break
			}
			var a attr
			if a, err = d.attrSlot(&r, tag, r.uvarint("attribute index")); err != nil {
				break
			}
			name := d.names[a.name]
			q := byte('"')
			if op == opAttr {
				out = append(out, ' ')
				out = append(out, name...)
				out = append(out, '=', '"')
			} else {
				var w1, w2, w3 string
				if w1, err = d.wsRef(&r, true); err == nil {
					if w2, err = d.wsRef(&r, true); err == nil {
						w3, err = d.wsRef(&r, true)
					}
				}
				if err != nil {
					break
				}
				if q = r.byte1("quote"); q != '"' && q != '\'' {
					err = corrupt("quote")
					break
				}
				out = append(out, w1...)
				out = append(out, name...)
				out = append(out, w2...)
				out = append(out, '=')
				out = append(out, w3...)
				out = append(out, q)
			}
			rn.hole, rn.suffix = a.cont, q
			if d.q != nil {
				rn.qhit = d.q.attrHit(d, tag, a)
			}
		case opClose, opCloseEmpty, opCloseWS, opCloseEmptyWS:
			if tag < 0 {
				err = corrupt("tag close outside a tag")
				break
			}
			if op == opCloseWS || op == opCloseEmptyWS {
				var w string
				if w, err = d.wsRef(&r, false); err != nil {
					break
				}
				out = append(out, w...)
			}
			if op == opClose || op == opCloseWS {
				out = append(out, '>')
				cur = tag
			} else {
				out = append(out, '/', '>')
				if d.q != nil {
					d.q.exit(tag)
				}
			}
			tag = -1
		case opEnd, opEndWS:
			if tag >= 0 || cur == 0 {
				err = corrupt("end tag")
				break
			}
			out = append(out, '<', '/')
			out = append(out, d.names[d.nodes[cur].name]...)
			if op == opEndWS {
				var w string
				if w, err = d.wsRef(&r, false); err != nil {
					break
				}
				out = append(out, w...)
			}
			out = append(out, '>')
			if d.q != nil {
				d.q.exit(cur)
			}
			cur = d.nodes[cur].parent
		case opText, opCDATA:
			if tag >= 0 {
				err = corrupt("text inside a tag")
				break
			}
			if rn.hole, err = d.textCont(cur); err != nil {
				break
			}
			if op == opCDATA {
				out = append(out, cdataOpen...)
				rn.suffix = 'C'
			}
			if d.q != nil {
				rn.qhit, rn.cdata = d.q.textHit(cur), op == opCDATA
			}
		case opWS:
			if tag >= 0 {
				err = corrupt("text inside a tag")
				break
			}
			var w string
			if w, err = d.wsRef(&r, false); err != nil {
				break
			}
			out = append(out, w...)
			if d.q != nil {
				d.q.ws(cur, w)
			}
		case opMisc:
			if tag >= 0 {
				err = corrupt("markup inside a tag")
				break
			}
			var m string
			if m, err = d.miscRef(&r); err != nil {
				break
			}
			out = append(out, m...)
		default:
			err = corrupt("opcode")
		}
		if err == nil && r.err != nil {
			err = r.err
		}
		if err == nil && rn.hole >= 0 && r.p != len(r.b) {
			err = corrupt("value inside a run")
		}
	}
	d.arena = out
	rn.b, rn.end, rn.tag = int32(len(out)), cur, tag
	if d.q != nil {
		rn.eb = int32(len(d.q.ev))
	}
	if err == nil && len(out) > limit {
		err = errOverflow
	}
	return rn, err
}
