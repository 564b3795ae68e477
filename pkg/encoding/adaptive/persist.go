package adaptive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrCorrupt reports a profile or models file that cannot be parsed,
// including a models file of another version.
var ErrCorrupt = errors.New("adaptive: corrupt data")

// The models file and the profile are one JSON form with a version; a
// profile has no codecs. Models files of version 1 (binary, "P2AM\x01")
// held what the lab's grid needed and are refused; the CLI then starts
// from empty models and saves over them.
const formatVersion = 2

// Bounds of the form, checked when reading: a file or profile is at most
// its maximum size, holds at most maxCodecs codecs (or decoders) and
// maxKinds kinds per codec, names of at most maxString bytes, and values
// a measurement can give.
const (
	maxModelsSize = 16 << 20
	maxString     = 256
	maxCodecs     = 64
	maxKinds      = 1024
	maxSizeLog    = 40 // centroids above 1 TiB are nonsense
)

// form is the JSON of the models and of a profile.
type form struct {
	Version int                    `json:"version"`
	Codecs  map[string]*codecStats `json:"codecs,omitempty"` // by spec
	Decode  map[string]*curve      `json:"decode"`           // by codec name
}

// marshal returns f's JSON at the format's version, of at most limit bytes.
func (f form) marshal(what string, limit int) ([]byte, error) {
	f.Version = formatVersion
	b, err := json.Marshal(f)
	if err == nil && len(b) > limit {
		err = fmt.Errorf("%s of %d bytes exceeds %d", what, len(b), limit)
	}
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	return b, nil
}

// parseForm reads what marshal wrote within the form's bounds. Errors
// wrap ErrCorrupt.
func parseForm(b []byte, what string, limit int) (form, error) {
	var f form
	if strings.HasPrefix(string(b), "P2AM") {
		return f, fmt.Errorf("%w: a binary %s of version 1; this p2pmsg reads version %d", ErrCorrupt, what, formatVersion)
	}
	if len(b) > limit {
		return f, fmt.Errorf("%w: %d bytes, limit %d", ErrCorrupt, len(b), limit)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if f.Version != formatVersion {
		return f, fmt.Errorf("%w: %s of version %d; this p2pmsg reads version %d", ErrCorrupt, what, f.Version, formatVersion)
	}
	if len(f.Codecs) > maxCodecs || len(f.Decode) > maxCodecs {
		return f, fmt.Errorf("%w: %s beyond its bounds", ErrCorrupt, what)
	}
	for spec, s := range f.Codecs {
		if badName(spec) || s == nil || len(s.Size) > maxKinds {
			return f, fmt.Errorf("%w: codec %q", ErrCorrupt, spec)
		}
		if s.Size == nil {
			s.Size = map[kind]*curve{}
		}
	}
	for name, c := range f.Decode {
		if badName(name) || c == nil {
			return f, fmt.Errorf("%w: decoder %q", ErrCorrupt, name)
		}
	}
	return f, nil
}

func badName(s string) bool { return s == "" || len(s) > maxString }

// Load reads models saved by Save. A missing file gives empty models and
// no error (a node's first start); a file that cannot be parsed, or of
// another version, is an error wrapping ErrCorrupt.
func Load(path string) (*Models, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewModels(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxModelsSize+1))
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	m, err := parseModels(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err) // err names the package
	}
	return m, nil
}

// parseModels reads the form Save writes.
func parseModels(b []byte) (*Models, error) {
	f, err := parseForm(b, "models file", maxModelsSize)
	if err != nil {
		return nil, err
	}
	m := NewModels()
	maps.Copy(m.codecs, f.Codecs)
	maps.Copy(m.own.dec, f.Decode)
	return m, nil
}

// Save writes the models to path atomically (a temporary file in the same
// directory, then a rename), creating the directory if needed.
func (m *Models) Save(path string) error {
	b, err := m.marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("adaptive: %w", err)
	}
	f, err := os.CreateTemp(dir, ".models-*")
	if err != nil {
		return fmt.Errorf("adaptive: %w", err)
	}
	_, err = f.Write(b)
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("adaptive: %w", err)
	}
	return nil
}

// marshal returns the models' form that Save writes.
func (m *Models) marshal() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return form{Codecs: m.codecs, Decode: m.own.dec}.marshal("models", maxModelsSize)
}

// A curve is written as its populated buckets in increasing order, each
// [weight, centroid size, value]; the bucket is the centroid's.
func (c *curve) MarshalJSON() ([]byte, error) {
	pts := [][3]float64{}
	for _, p := range c.p {
		if p.w > 0 {
			pts = append(pts, [3]float64{p.w, p.n, p.y})
		}
	}
	return json.Marshal(pts)
}

// UnmarshalJSON refuses weights, centroids and values no measurement
// gives, and buckets out of order: what lookups rely on.
func (c *curve) UnmarshalJSON(b []byte) error {
	var pts [][3]float64
	if err := json.Unmarshal(b, &pts); err != nil {
		return err
	}
	*c = curve{}
	last := -1
	for _, p := range pts {
		w, x, y := p[0], p[1], p[2]
		i := bucketOf(int(min(x, math.Ldexp(1, maxSizeLog))))
		if !(w > 0 && w <= maxWeight && x >= 1 && x <= math.Ldexp(1, maxSizeLog) && y >= 0 && y <= maxValue) || i <= last {
			return fmt.Errorf("%w: curve point %v", ErrCorrupt, p)
		}
		c.p[i], last = point{w: w, n: x, y: y}, i
	}
	return nil
}

// A kind is written "media type/class" ("text/xml/high").
func (k kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

func (k *kind) UnmarshalText(b []byte) error {
	s := string(b)
	i := strings.LastIndexByte(s, '/')
	c := slices.Index(classNames[:], s[i+1:])
	if i < 0 || c < 0 || i > maxKindMIME {
		return fmt.Errorf("%w: kind %q", ErrCorrupt, s)
	}
	*k = kind{mime: s[:i], class: uint8(c)}
	return nil
}
