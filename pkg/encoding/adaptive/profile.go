package adaptive

import (
	"maps"
	"slices"
	"time"
)

// Profile is a node's decode speeds: per codec (by registered name, since
// levels decode alike), the decode time as a function of the decoded size.
// A receiver shares it with its senders, as NAM's client sent its
// decompression model, so that a sender can weigh a slow receiver's decode
// time.
//
// A Profile is immutable once made; the zero Profile knows nothing.
type Profile struct {
	dec map[string]*curve
}

// MaxProfileSize bounds a profile's binary form.
const MaxProfileSize = 64 << 10

// decodeTime predicts the profile's node's decode time into n bytes with
// codec; false when the profile knows nothing of it.
func (p *Profile) decodeTime(codec string, n int) (time.Duration, bool) {
	if p == nil || p.dec[codec] == nil {
		return 0, false
	}
	y, _, ok := p.dec[codec].at(n, false)
	return time.Duration(y), ok
}

// Codecs returns the codec names the profile knows, sorted.
func (p *Profile) Codecs() []string {
	if p == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.dec))
}

// MarshalBinary returns the profile's form: JSON of the format's version
// and, per codec, its curve.
func (p *Profile) MarshalBinary() ([]byte, error) {
	return form{Decode: p.dec}.marshal("profile", MaxProfileSize)
}

// UnmarshalBinary reads a profile's form into p. It refuses input longer
// than MaxProfileSize, of another version, with more than 64 codecs or
// names longer than 256 bytes, and curves that are out of order or hold
// values no measurement gives; errors wrap ErrCorrupt.
func (p *Profile) UnmarshalBinary(b []byte) error {
	f, err := parseForm(b, "profile", MaxProfileSize)
	if err == nil {
		p.dec = f.Decode
	}
	return err
}
