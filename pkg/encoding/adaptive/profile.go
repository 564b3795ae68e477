package adaptive

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Profile is a node's decode speeds: per codec (by registered name, since
// levels decode alike) and by how much the payload was compressed, the
// decode time as a function of the decoded size. A receiver shares it with
// its senders, as NAM's client sent its decompression model to the server,
// so that a sender can weigh a slow receiver's decode time. Its binary form
// is a few hundred bytes.
//
// A Profile is immutable once made; the zero Profile knows nothing.
type Profile struct {
	dec map[string]*decodeStats
}

// MaxProfileSize bounds a profile's binary form.
const MaxProfileSize = 64 << 10

const profileMagic = "P2AP\x01"

// DecodeTime predicts the time this profile's node takes to decode into n
// bytes with codec, when the payload is about ratio·n bytes. It reports
// false when the profile knows nothing of the codec.
func (p *Profile) DecodeTime(codec string, n int, ratio float64) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	return p.dec[codec].at(n, ratio)
}

// Codecs returns the codec names the profile knows, sorted.
func (p *Profile) Codecs() []string {
	if p == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.dec))
}

// MarshalBinary returns the profile's binary form: a magic "P2AP", version
// 1, the number of codecs, then per codec its name and one curve per ratio
// class.
func (p *Profile) MarshalBinary() ([]byte, error) {
	b := []byte(profileMagic)
	names := p.Codecs()
	if len(names) > maxCodecs {
		names = names[:maxCodecs]
	}
	b = appendUvarint(b, len(names))
	for _, name := range names {
		b = appendString(b, name)
		for i := range p.dec[name].c {
			b = appendCurve(b, &p.dec[name].c[i], 0)
		}
	}
	if len(b) > MaxProfileSize {
		return nil, fmt.Errorf("adaptive: profile of %d bytes exceeds %d", len(b), MaxProfileSize)
	}
	return b, nil
}

// ParseProfile decodes a profile's binary form. It refuses input longer
// than MaxProfileSize, more than 64 codecs, names longer than 256 bytes,
// and curves that are out of order or hold values no measurement gives;
// errors wrap ErrCorrupt.
func ParseProfile(b []byte) (*Profile, error) {
	if len(b) > MaxProfileSize {
		return nil, fmt.Errorf("%w: profile of %d bytes", ErrCorrupt, len(b))
	}
	if len(b) < len(profileMagic) || string(b[:len(profileMagic)]) != profileMagic {
		return nil, fmt.Errorf("%w: not a profile", ErrCorrupt)
	}
	r := &reader{b: b[len(profileMagic):]}
	p, err := r.profile()
	if err != nil {
		return nil, err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the profile", ErrCorrupt, len(r.b))
	}
	return p, nil
}

func (r *reader) profile() (*Profile, error) {
	n := r.uvarint("codec count", maxCodecs)
	p := &Profile{dec: make(map[string]*decodeStats, n)}
	for range n {
		name := r.string("codec name")
		if r.err != nil {
			break
		}
		if _, dup := p.dec[name]; dup || name == "" {
			r.fail("codec name")
			break
		}
		s := new(decodeStats)
		for i := range s.c {
			r.curve(&s.c[i], 0)
		}
		p.dec[name] = s
	}
	if r.err != nil {
		return nil, r.err
	}
	return p, nil
}

func appendUvarint(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// cpuFactor is how much slower the profile's node decodes than this one:
// the median, over the buckets both have measured, of the ratio of their
// decode times per byte; 1 when they share none.
func cpuFactor(p *Profile, local map[string]*decodeStats) float64 {
	if p == nil {
		return 1
	}
	var rs []float64
	for name, ps := range p.dec {
		ls := local[name]
		if ls == nil {
			continue
		}
		for rc := range ps.c {
			for b := range numBuckets {
				pr, ok1 := ps.c[rc].ratioAt(b)
				lr, ok2 := ls.c[rc].ratioAt(b)
				if ok1 && ok2 && lr > 0 {
					rs = append(rs, pr/lr)
				}
			}
		}
	}
	if len(rs) == 0 {
		return 1
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}
