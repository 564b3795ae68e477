package xmlc

import (
	"encoding/binary"
	"math"
	"slices"
)

// scratch is the encoder's reusable memory for container analysis.
type scratch struct {
	key    []byte
	prev   []byte     // the previous value's key
	cache  [256]int32 // shape+1 by a hash of its key
	sid    []int32    // shape of each value
	nums   []uint64   // digit groups of all values, in order
	wids   []uint8    // their widths
	cnt    []int32    // values per shape
	colOff []int32    // per shape: first column, -1 if unused
	cols   []uint64   // column values, column after column
	cwid   []uint8
	cstart []int32 // start of each column in cols, and the end
	fill   []int32
	hist   [256]int32
	dict   map[uint64]int32
	dvals  []uint64
}

// encodeCont appends container c to the main stream: its value count,
// then its values raw or as shapes and columns.
func (e *encoder) encodeCont(c *contEnc) {
	n := len(c.vals) / 2
	e.main = binary.AppendUvarint(e.main, uint64(n))
	if n == 0 {
		return
	}
	if e.analyse(c) {
		e.writeShapes(c)
		return
	}
	size := 0
	for i := 0; i < len(c.vals); i += 2 {
		size += int(c.vals[i+1]-c.vals[i]) + 1
	}
	e.main = append(e.main, methodRaw)
	e.main = binary.AppendUvarint(e.main, uint64(size))
	for i := 0; i < len(c.vals); i += 2 {
		e.main = append(append(e.main, e.src[c.vals[i]:c.vals[i+1]]...), 0)
	}
}

// analyse splits each value of c into a shape and digit groups, adding new
// shapes to c. It reports whether shapes pay: false (and c's new shapes
// dropped) when most values are unlike the others.
func (e *encoder) analyse(c *contEnc) bool {
	s := &e.sc
	n := len(c.vals) / 2
	s.sid, s.nums, s.wids = s.sid[:0], s.nums[:0], s.wids[:0]
	baseShapes := len(c.shapes)
	newShapes := 0
	clear(s.cache[:])
	total := 0 // bytes of the values so far
	for i := 0; i < len(c.vals); i += 2 {
		v := e.src[c.vals[i]:c.vals[i+1]]
		total += len(v)
		key := s.key[:0]
		for j := 0; j < len(v); {
			if d := v[j] - '0'; d > 9 {
				key = append(key, v[j])
				j++
				continue
			}
			var x uint64
			k := j
			for k < len(v) && k-j < maxDigits {
				d := v[k] - '0'
				if d > 9 {
					break
				}
				x = x*10 + uint64(d)
				k++
			}
			s.nums = append(s.nums, x)
			s.wids = append(s.wids, uint8(k-j))
			key = append(key, 0)
			j = k
		}
		id, ok := int32(0), false
		if len(s.sid) > 0 && string(key) == string(s.prev) { // same shape as the last value
			id, ok = s.sid[len(s.sid)-1], true
		}
		s.key, s.prev = s.prev, key // swap buffers: prev holds this key
		h := len(key) * 31
		if len(key) > 0 {
			h += int(key[0])*7 + int(key[len(key)-1])*131 + int(key[len(key)/2])
		}
		h &= len(s.cache) - 1
		if !ok {
			if x := s.cache[h]; x > 0 && c.shapes[x-1].key == string(key) {
				id, ok = x-1, true
			}
		}
		if !ok && c.base != nil {
			id, ok = c.base.index[string(key)]
		}
		if !ok {
			id, ok = c.local[string(key)]
		}
		if ok {
			s.cache[h] = id + 1
		}
		if !ok {
			id = int32(len(c.shapes))
			k := string(key)
			c.shapes = append(c.shapes, newShape(k))
			c.local[k] = id
			s.cache[h] = id + 1
			newShapes++
			// Mostly unique so far (and more than an index byte holds),
			// or long and all different, as free text is: not worth
			// finishing.
			seen := i/2 + 1
			if newShapes > 255 && newShapes*2 > seen {
				break
			}
			if newShapes == seen && seen > 16 && total > 32*seen {
				break
			}
		}
		s.sid = append(s.sid, id)
	}
	if len(s.sid) < n || newShapes*2 > n+1 {
		c.shapes = c.shapes[:baseShapes]
		clear(c.local)
		return false
	}
	return true
}

// writeShapes writes c's new shapes, the shape of each value and the
// columns of digit groups, per shape and group.
func (e *encoder) writeShapes(c *contEnc) {
	s := &e.sc
	m := append(e.main, methodShapes)
	base := 0
	if c.base != nil {
		base = len(c.base.shapes)
	}
	m = binary.AppendUvarint(m, uint64(len(c.shapes)-base))
	for _, sh := range c.shapes[base:] {
		m = binary.AppendUvarint(m, uint64(sh.groups()))
		m = append(append(m, sh.key...), 0) // separators, NUL between
	}
	T := len(c.shapes)
	s.cnt = slices.Grow(s.cnt[:0], T)[:T]
	clear(s.cnt)
	for _, id := range s.sid {
		s.cnt[id]++
	}
	if T > 1 {
		if T <= 256 {
			for _, id := range s.sid {
				m = append(m, byte(id))
			}
		} else {
			for _, id := range s.sid {
				m = binary.AppendUvarint(m, uint64(id))
			}
		}
	}
	e.main = m
	// Columns in shape order, then group order.
	s.colOff = slices.Grow(s.colOff[:0], T)[:T]
	s.cstart = s.cstart[:0]
	total := int32(0)
	for id := range T {
		s.colOff[id] = -1
		g := c.shapes[id].groups()
		if s.cnt[id] == 0 || g == 0 {
			continue
		}
		s.colOff[id] = int32(len(s.cstart))
		for range g {
			s.cstart = append(s.cstart, total)
			total += s.cnt[id]
		}
	}
	if len(s.cstart) == 0 {
		return
	}
	s.cstart = append(s.cstart, total)
	s.cols = slices.Grow(s.cols[:0], int(total))[:total]
	s.cwid = slices.Grow(s.cwid[:0], int(total))[:total]
	s.fill = append(s.fill[:0], s.cstart...)
	off := 0
	for _, id := range s.sid {
		g := c.shapes[id].groups()
		if g == 0 {
			continue
		}
		col := s.colOff[id]
		for k := range g {
			at := s.fill[int(col)+k]
			s.cols[at] = s.nums[off+k]
			s.cwid[at] = s.wids[off+k]
			s.fill[int(col)+k]++
		}
		off += g
	}
	for k := 0; k+1 < len(s.cstart); k++ {
		a, b := s.cstart[k], s.cstart[k+1]
		e.writeColumn(s.cols[a:b], s.cwid[a:b])
	}
}

// writeColumn writes one column of digit groups: its width mode and the
// cheapest of the number codings.
func (e *encoder) writeColumn(v []uint64, w []uint8) {
	c := len(v)
	wmode := byte(widthStream)
	same, canon := true, true
	for i, x := range v {
		if w[i] != w[0] {
			same = false
		}
		if int(w[i]) != digits(x) {
			canon = false
		}
	}
	switch {
	case same:
		wmode = w[0]
	case canon:
		wmode = 0
	}
	mode, bitsFOR, bitsDelta, lo, dlo := e.chooseColumn(v)
	m := append(e.main, mode<<5|wmode)
	if wmode == widthStream {
		m = append(m, w...)
	}
	switch mode {
	case colVarint:
		for _, x := range v {
			m = binary.AppendUvarint(m, x)
		}
	case colFOR:
		m = binary.AppendUvarint(m, lo)
		m = append(m, byte(bitsFOR))
		e.bw.align()
		if bitsFOR > 0 {
			for _, x := range v {
				e.bw.write(x-lo, bitsFOR)
			}
		}
	case colDeltaFOR:
		m = binary.AppendUvarint(m, v[0])
		m = binary.AppendVarint(m, dlo)
		m = append(m, byte(bitsDelta))
		e.bw.align()
		if bitsDelta > 0 {
			for i := 1; i < c; i++ {
				e.bw.write(uint64(int64(v[i]-v[i-1])-dlo), bitsDelta)
			}
		}
	case colBytes:
		m = binary.AppendUvarint(m, lo)
		for _, x := range v {
			m = append(m, byte(x-lo))
		}
	case colDeltaBytes:
		m = binary.AppendUvarint(m, v[0])
		m = binary.AppendVarint(m, dlo)
		for i := 1; i < c; i++ {
			m = append(m, byte(int64(v[i]-v[i-1])-dlo))
		}
	case colDict:
		d := e.sc.dvals
		m = binary.AppendUvarint(m, uint64(len(d)))
		prev := uint64(0)
		for _, x := range d {
			m = binary.AppendUvarint(m, x-prev)
			prev = x
		}
		for _, x := range v {
			m = append(m, byte(e.sc.dict[x]))
		}
	}
	_ = c
	e.main = m
}

// chooseColumn estimates each coding's size in bits and returns the
// smallest, with the parameters it needs.
func (e *encoder) chooseColumn(v []uint64) (mode byte, bitsFOR, bitsDelta uint, lo uint64, dlo int64) {
	c := len(v)
	if c <= 2 {
		return colVarint, 0, 0, 0, 0
	}
	lo, hi := v[0], v[0]
	dlo, dhi := int64(math.MaxInt64), int64(math.MinInt64)
	for i, x := range v {
		lo, hi = min(lo, x), max(hi, x)
		if i > 0 {
			d := int64(x - v[i-1])
			dlo, dhi = min(dlo, d), max(dhi, d)
		}
	}
	bitsFOR = bitLen(hi - lo)
	bitsDelta = bitLen(uint64(dhi - dlo))
	best := float64(c)*float64(bitsFOR) + 8*float64(uvarintLen(lo)+1)
	mode = colFOR
	if cost := float64(c-1)*float64(bitsDelta) + 8*float64(uvarintLen(v[0])+uvarintLen(zigzag(dlo))+1); cost < best {
		best, mode = cost, colDeltaFOR
	}
	// Bytes in the main stream cost about their entropy under zstd's
	// literal coder, shared with other streams (a small surcharge).
	const shared = 0.4
	if hi-lo < 256 {
		h := &e.sc.hist
		clear(h[:])
		for _, x := range v {
			h[x-lo]++
		}
		if cost := entropy(h, c) + shared*float64(c) + 8*float64(uvarintLen(lo)); cost < best {
			best, mode = cost, colBytes
		}
	}
	if uint64(dhi-dlo) < 256 {
		h := &e.sc.hist
		clear(h[:])
		for i := 1; i < c; i++ {
			h[int64(v[i]-v[i-1])-dlo]++
		}
		if cost := entropy(h, c-1) + shared*float64(c-1) + 8*float64(uvarintLen(v[0])+uvarintLen(zigzag(dlo))); cost < best {
			best, mode = cost, colDeltaBytes
		}
	}
	if hi-lo >= 256 && c >= 32 && bitsFOR > 8 {
		if cost, ok := e.dictCost(v); ok && cost < best {
			best, mode = cost, colDict
		}
	}
	if cost := varintCost(v); cost < best {
		mode = colVarint
	}
	return mode, bitsFOR, bitsDelta, lo, dlo
}

// dictCost prices coding v as indexes into its distinct values, if there
// are at most 256 of them and they repeat; it leaves the dictionary (in
// ascending order) in e.sc.
func (e *encoder) dictCost(v []uint64) (float64, bool) {
	s := &e.sc
	if s.dict == nil {
		s.dict = map[uint64]int32{}
	}
	clear(s.dict)
	limit := min(256, len(v)/4)
	for _, x := range v {
		if _, ok := s.dict[x]; !ok {
			if len(s.dict) == limit {
				return 0, false
			}
			s.dict[x] = 0
		}
	}
	s.dvals = s.dvals[:0]
	for x := range s.dict {
		s.dvals = append(s.dvals, x)
	}
	slices.Sort(s.dvals)
	bits := 0.0
	prev := uint64(0)
	for i, x := range s.dvals {
		s.dict[x] = int32(i)
		bits += 8 * float64(uvarintLen(x-prev))
		prev = x
	}
	h := &s.hist
	clear(h[:])
	for _, x := range v {
		h[s.dict[x]]++
	}
	return bits + entropy(h, len(v)) + 0.4*float64(len(v)), true
}

func varintCost(v []uint64) float64 {
	n := 0
	for _, x := range v {
		n += uvarintLen(x)
	}
	return 8 * float64(n)
}

// entropy is the order-0 entropy in bits of n symbols counted in h.
func entropy(h *[256]int32, n int) float64 {
	if n == 0 {
		return 0
	}
	bits := 0.0
	fn := float64(n)
	for _, k := range h {
		if k > 0 {
			bits += float64(k) * math.Log2(fn/float64(k))
		}
	}
	return bits
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
