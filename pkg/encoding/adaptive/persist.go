package adaptive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrCorrupt reports a profile or models file that cannot be parsed,
// including a models file of another version.
var ErrCorrupt = errors.New("adaptive: corrupt data")

// The models file and the profile are JSON with a version. Models files
// of version 1 (binary, "P2AM\x01") held what the lab's grid needed and
// are refused; the CLI then starts from empty models and saves over them.
const formatVersion = 2

// Bounds of the formats, checked when reading: a file or profile is at
// most its maximum size, holds at most maxCodecs codecs (or decoders) and
// maxKinds kinds per codec, names of at most maxString bytes, and values
// a measurement can give.
const (
	maxModelsSize = 16 << 20
	maxString     = 256
	maxCodecs     = 64
	maxKinds      = 1024
	maxSizeLog    = 40 // centroids above 1 TiB are nonsense
)

// modelsFile is the models' JSON form.
type modelsFile struct {
	Version int                    `json:"version"`
	Codecs  map[string]*codecStats `json:"codecs"`
	Decode  map[string]*curve      `json:"decode"`
}

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
		return nil, fmt.Errorf("adaptive: %s: %w", path, err)
	}
	return m, nil
}

// Save writes the models to path atomically (a temporary file in the same
// directory, then a rename), creating the directory if needed.
func (m *Models) Save(path string) error {
	b, err := m.MarshalBinary()
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
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("adaptive: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("adaptive: %w", err)
	}
	return nil
}

// MarshalBinary returns the models' form that Save writes.
func (m *Models) MarshalBinary() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := json.Marshal(modelsFile{Version: formatVersion, Codecs: m.codecs, Decode: m.decode})
	if err == nil && len(b) > maxModelsSize {
		err = fmt.Errorf("models of %d bytes exceed %d", len(b), maxModelsSize)
	}
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	return b, nil
}

// parseModels reads the form of MarshalBinary within the formats' bounds.
func parseModels(b []byte) (*Models, error) {
	if strings.HasPrefix(string(b), "P2AM") {
		return nil, fmt.Errorf("%w: a binary models file of version 1; this p2pmsg reads version %d", ErrCorrupt, formatVersion)
	}
	var f modelsFile
	if err := decodeJSON(b, maxModelsSize, &f); err != nil {
		return nil, err
	}
	if f.Version != formatVersion {
		return nil, fmt.Errorf("%w: models of version %d; this p2pmsg reads version %d", ErrCorrupt, f.Version, formatVersion)
	}
	if len(f.Codecs) > maxCodecs || badNames(f.Codecs) {
		return nil, fmt.Errorf("%w: models beyond their bounds", ErrCorrupt)
	}
	if err := checkDecode(f.Decode); err != nil {
		return nil, err
	}
	m := NewModels()
	for spec, s := range f.Codecs {
		if s == nil || len(s.Size) > maxKinds {
			return nil, fmt.Errorf("%w: codec %q", ErrCorrupt, spec)
		}
		if s.Size == nil {
			s.Size = map[kind]*curve{}
		}
		m.codecs[spec] = s
	}
	if f.Decode != nil {
		m.decode = f.Decode
	}
	return m, nil
}

func decodeJSON(b []byte, limit int, v any) error {
	if len(b) > limit {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrCorrupt, len(b), limit)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}

func badNames[V any](m map[string]V) bool {
	for k := range m {
		if k == "" || len(k) > maxString {
			return true
		}
	}
	return false
}

func checkDecode(d map[string]*curve) error {
	if len(d) > maxCodecs || badNames(d) {
		return fmt.Errorf("%w: decoders beyond their bounds", ErrCorrupt)
	}
	for name, s := range d {
		if s == nil {
			return fmt.Errorf("%w: decoder %q", ErrCorrupt, name)
		}
	}
	return nil
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
