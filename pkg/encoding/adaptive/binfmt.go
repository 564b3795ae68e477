package adaptive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrCorrupt reports a profile or models file that cannot be parsed.
var ErrCorrupt = errors.New("adaptive: corrupt data")

// Bounds of the binary formats, checked while parsing.
const (
	maxString  = 256
	maxSpecs   = 256
	maxKinds   = 1024 // per spec
	maxCodecs  = 64   // in a profile or the decode table
	maxPeers   = 4096
	maxSizeLog = 40 // centroids above 1 TiB are nonsense
	// maxValue bounds a curve's values: bytes, or nanoseconds (11 days),
	// so that no estimate overflows a time.Duration.
	maxValue = 1e15
)

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (r *reader) byte(what string) byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint(what string, max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > max {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) float(what string, lo, hi float64) float64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	if math.IsNaN(f) || f < lo || f > hi {
		r.fail(what)
		return 0
	}
	return f
}

func (r *reader) string(what string) string {
	l := r.uvarint(what, maxString)
	if r.err != nil || uint64(len(r.b)) < l {
		r.fail(what)
		return ""
	}
	s := string(r.b[:l])
	r.b = r.b[l:]
	return s
}

func (r *reader) bytes(what string, max uint64) []byte {
	l := r.uvarint(what, max)
	if r.err != nil || uint64(len(r.b)) < l {
		r.fail(what)
		return nil
	}
	s := r.b[:l]
	r.b = r.b[l:]
	return s
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

// A curve is written as its populated buckets in increasing order: bucket
// index, weight, centroid size, value, and age (sequence numbers since
// its last update).
func appendCurve(dst []byte, c *curve, seq uint64) []byte {
	n := 0
	for i := range c.p {
		if c.p[i].w > 0 {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for i, p := range c.p {
		if p.w == 0 {
			continue
		}
		dst = append(dst, byte(i))
		dst = appendFloat(dst, p.w)
		dst = appendFloat(dst, p.n)
		dst = appendFloat(dst, p.y)
		age := uint64(0)
		if seq > p.seq {
			age = seq - p.seq
		}
		dst = binary.AppendUvarint(dst, age)
	}
	return dst
}

func (r *reader) curve(c *curve, seq uint64) {
	n := r.uvarint("curve length", numBuckets)
	last, lastN := -1, 0.0
	for range n {
		i := int(r.byte("bucket"))
		w := r.float("weight", math.SmallestNonzeroFloat64, maxWeight)
		x := r.float("centroid", 1, math.Ldexp(1, maxSizeLog))
		y := r.float("value", 0, maxValue)
		age := r.uvarint("age", math.MaxUint64)
		if r.err != nil {
			return
		}
		// Buckets and centroids strictly increasing: what lookups rely on.
		if i >= numBuckets || i <= last || x <= lastN {
			r.fail("bucket order")
			return
		}
		s := uint64(0)
		if seq > age {
			s = seq - age
		}
		c.p[i] = point{w: w, n: x, y: y, seq: s}
		last, lastN = i, x
	}
}

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return binary.AppendVarint(dst, 0)
	}
	return binary.AppendVarint(dst, t.UnixNano())
}

func (r *reader) time(what string) time.Time {
	v := r.varint(what)
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}
