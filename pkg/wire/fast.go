package wire

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// fast decodes, from memory, the message small frames carry almost always:
// a positive element count, no signatures, nothing over a limit, nothing
// after the last element. It reports false for anything else, having
// allocated no element buffers; the general decoder then decodes it, or
// says exactly what is wrong and where. Fuzzing holds the two to the same
// verdicts.
//
// It parses the element headers in one pass, with plain bounds checks on
// the slice, and then copies the elements' data into their buffers: about
// a third of the general decoder's time per small message.
func (s *state) fast(dst []message.Element, b []byte) ([]message.Element, bool) {
	lim := s.lim
	if int64(len(b)) > lim.MaxMessageSize || len(b) < 9 || [4]byte(b[:4]) != msgMagic || b[4] != Version {
		return nil, false
	}
	p := 5
	nsCount := int(int16(binary.BigEndian.Uint16(b[p:])))
	p += 2
	if nsCount < 0 || nsCount > MaxNamespaces || nsCount > lim.MaxNamespaces {
		return nil, false
	}
	for range nsCount {
		ns, q, ok := s.fastStr(b, p, lim.MaxNameLen)
		if !ok {
			return nil, false
		}
		s.ns = append(s.ns, ns)
		p = q
	}
	if p+2 > len(b) {
		return nil, false
	}
	count := int(int16(binary.BigEndian.Uint16(b[p:])))
	p += 2
	// The smallest element is 12 bytes: a count that lies is found here,
	// before anything is allocated for it.
	if count <= 0 || count > lim.MaxElements || count > (len(b)-p)/12 {
		return nil, false
	}
	start := len(dst)
	elems := slices.Grow(dst, count)[:start+count]
	for i := start; i < len(elems); i++ {
		e := &elems[i]
		if p+6 > len(b) || [4]byte(b[p:p+4]) != elemMagic {
			return nil, false
		}
		nsid, flags := b[p+4], b[p+5]
		p += 6
		if flags&flagHasSignature != 0 {
			return nil, false
		}
		var ok bool
		if e.Namespace, ok = s.namespace(nsid); !ok {
			return nil, false
		}
		if e.Name, p, ok = s.fastStr(b, p, lim.MaxNameLen); !ok {
			return nil, false
		}
		if flags&flagHasType != 0 {
			if p+2 > len(b) {
				return nil, false
			}
			n := int(int16(binary.BigEndian.Uint16(b[p:])))
			if n < 0 || n > lim.MaxMIMELen || p+2+n > len(b) {
				return nil, false
			}
			raw := b[p+2 : p+2+n]
			p += 2 + n
			mime := ""
			for _, k := range knownMIMEs {
				if string(raw) == k {
					mime = k
					break
				}
			}
			if mime == "" {
				if !utf8.Valid(raw) {
					return nil, false
				}
				mime = string(raw)
			}
			var err error
			if e.MIME, err = message.CanonicalMIME(mime); err != nil {
				return nil, false
			}
		}
		if p+4 > len(b) {
			return nil, false
		}
		n := int64(int32(binary.BigEndian.Uint32(b[p:])))
		p += 4
		if n < 0 || n > lim.MaxElementSize || n > int64(len(b)-p) {
			return nil, false
		}
		e.Data = b[p : p+int(n)] // for now: copied below
		p += int(n)
	}
	if p != len(b) {
		clear(elems[start:])
		return nil, false
	}
	for i := start; i < len(elems); i++ {
		e := &elems[i]
		n := len(e.Data)
		if n == 0 {
			e.Data = []byte{}
			continue
		}
		var d []byte
		if s.alloc != nil {
			if d = s.alloc(n); len(d) != n {
				panic("wire: UnmarshalWith's alloc returned a slice of the wrong length")
			}
		} else {
			d = make([]byte, n)
		}
		copy(d, e.Data)
		e.Data = d
	}
	s.elements = count
	return elems, true
}

// fastStr reads a length-prefixed UTF-8 string of at most max bytes at
// b[p:], returning it and the offset after it.
func (s *state) fastStr(b []byte, p, max int) (string, int, bool) {
	if p+2 > len(b) {
		return "", 0, false
	}
	n := int(int16(binary.BigEndian.Uint16(b[p:])))
	p += 2
	if n < 0 || n > max || p+n > len(b) || !utf8.Valid(b[p:p+n]) {
		return "", 0, false
	}
	return s.intern(b[p : p+n]), p + n, true
}

// intern returns b as a string, from the recent names when it is one.
func (s *state) intern(b []byte) string {
	if len(b) > maxInterned {
		return string(b)
	}
	for _, k := range s.names {
		if string(b) == k {
			return k
		}
	}
	str := string(b)
	s.names[s.nameNext] = str
	s.nameNext = (s.nameNext + 1) % len(s.names)
	return str
}
