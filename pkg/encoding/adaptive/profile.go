package adaptive

import (
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

// profileMagic is "P2AP" and the format's version: 2 since its curves
// carry no sample ages.
const profileMagic = "P2AP\x02"

// decodeTime predicts the time the profile's node takes to decode into n
// bytes with codec, when the payload is about ratio·n bytes; false when
// the profile knows nothing of the codec.
func (p *Profile) decodeTime(codec string, n int, ratio float64) (time.Duration, bool) {
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

// MarshalBinary returns the profile's binary form: a magic "P2AP",
// version 2, the number of codecs, then per codec its name and one curve
// per ratio class.
func (p *Profile) MarshalBinary() ([]byte, error) {
	b := []byte(profileMagic)
	names := p.Codecs()
	b = appendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		for i := range p.dec[name] {
			b = appendCurve(b, &p.dec[name][i])
		}
	}
	if len(b) > MaxProfileSize {
		return nil, fmt.Errorf("adaptive: profile of %d bytes exceeds %d", len(b), MaxProfileSize)
	}
	return b, nil
}

// UnmarshalBinary decodes a profile's binary form into p. It refuses input
// longer than MaxProfileSize, more than 64 codecs, names longer than 256
// bytes, and curves that are out of order or hold values no measurement
// gives; errors wrap ErrCorrupt.
func (p *Profile) UnmarshalBinary(b []byte) error {
	if len(b) > MaxProfileSize {
		return fmt.Errorf("%w: profile of %d bytes", ErrCorrupt, len(b))
	}
	if len(b) < len(profileMagic) || string(b[:len(profileMagic)]) != profileMagic {
		return fmt.Errorf("%w: not a profile", ErrCorrupt)
	}
	r := &reader{b: b[len(profileMagic):]}
	q, err := r.profile()
	if err == nil && len(r.b) != 0 {
		err = fmt.Errorf("%w: %d bytes after the profile", ErrCorrupt, len(r.b))
	}
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

func (r *reader) profile() (*Profile, error) {
	n := r.uvarint("codec count", maxCodecs)
	p := &Profile{dec: make(map[string]*decodeStats, n)}
	for range n {
		name := r.string("codec name")
		if _, dup := p.dec[name]; r.err == nil && (dup || name == "") {
			r.fail("codec name")
		}
		if r.err != nil {
			return nil, r.err
		}
		s := new(decodeStats)
		for i := range s {
			r.curve(&s[i])
		}
		p.dec[name] = s
	}
	return p, r.err
}
