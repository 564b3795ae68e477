package adaptive

import (
	"encoding/binary"
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
	"time"
)

// DefaultFile is the name of the models file in a node's data directory.
const DefaultFile = "encoding-models.bin"

// ErrCorrupt reports a profile or models file that cannot be parsed,
// including a models file of another version.
var ErrCorrupt = errors.New("adaptive: corrupt data")

// The models file is "P2AM" and a version byte. Version 2 dropped what
// version 1 kept for the lab's grid (sample ages, loss and window of
// paths); a file of another version is refused, and the CLI then starts
// from empty models, which it saves over it.
const (
	modelsMagic   = "P2AM"
	modelsVersion = 2
)

// Bounds of the binary formats, checked while parsing.
const (
	maxModelsSize = 16 << 20
	maxString     = 256
	maxSpecs      = 256
	maxKinds      = 1024 // per spec
	maxCodecs     = 64   // in a profile or the decode table
	maxSizeLog    = 40   // centroids above 1 TiB are nonsense
)

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

// MarshalBinary returns the models' binary form (what Save writes): the
// magic and version, the codec stats, the decode table and the peers.
func (m *Models) MarshalBinary() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := append([]byte(modelsMagic), modelsVersion)
	b = appendUvarint(b, uint64(len(m.codecs)))
	for _, spec := range slices.Sorted(maps.Keys(m.codecs)) {
		s := m.codecs[spec]
		b = appendString(b, spec)
		kinds := slices.SortedFunc(maps.Keys(s.size), func(a, z kind) int {
			return strings.Compare(a.String(), z.String())
		})
		b = appendUvarint(b, uint64(len(kinds)))
		for _, k := range kinds {
			b = append(appendString(b, k.mime), k.class)
			b = appendCurve(b, s.size[k])
		}
		for i := range numClasses {
			b = appendCurve(appendCurve(b, &s.class[i]), &s.enc[i])
		}
	}
	b = appendUvarint(b, uint64(len(m.decode)))
	for _, name := range slices.Sorted(maps.Keys(m.decode)) {
		b = appendString(b, name)
		for i := range m.decode[name] {
			b = appendCurve(b, &m.decode[name][i])
		}
	}
	b = appendUvarint(b, uint64(len(m.peers)))
	for _, k := range slices.Sorted(maps.Keys(m.peers)) {
		r := m.peers[k]
		b = appendString(b, k)
		b = appendUvarint(b, uint64(max(r.Path.RTT, 0)))
		b = appendFloat(b, max(r.Path.Bandwidth, 0))
		b = appendUvarint(b, uint64(max(r.Path.InitWindow, 0)))
		b = binary.AppendVarint(b, r.At.UnixNano())
		var pb []byte
		if r.Profile != nil {
			pb, _ = r.Profile.MarshalBinary() // bounded by maxCodecs curves
		}
		b = appendString(b, string(pb))
	}
	if len(b) > maxModelsSize {
		return nil, fmt.Errorf("adaptive: models of %d bytes exceed %d", len(b), maxModelsSize)
	}
	return b, nil
}

// parseModels decodes the binary form of MarshalBinary. Input longer than
// maxModelsSize, counts beyond the format's bounds, curves out of order
// and values no measurement gives are refused with errors wrapping
// ErrCorrupt.
func parseModels(b []byte) (*Models, error) {
	if len(b) > maxModelsSize {
		return nil, fmt.Errorf("%w: models of %d bytes", ErrCorrupt, len(b))
	}
	if len(b) < len(modelsMagic)+1 || string(b[:len(modelsMagic)]) != modelsMagic {
		return nil, fmt.Errorf("%w: not a models file", ErrCorrupt)
	}
	if v := b[len(modelsMagic)]; v != modelsVersion {
		return nil, fmt.Errorf("%w: models file of version %d; this p2pmsg reads version %d", ErrCorrupt, v, modelsVersion)
	}
	r := &reader{b: b[len(modelsMagic)+1:]}
	m := NewModels()
	for range r.uvarint("spec count", maxSpecs) {
		spec := r.string("spec")
		if _, dup := m.codecs[spec]; r.err == nil && (dup || spec == "") {
			r.fail("spec")
		}
		if r.err != nil {
			return nil, r.err
		}
		s := m.stats(spec)
		for range r.uvarint("kind count", maxKinds) {
			k := kind{mime: r.string("kind"), class: r.byte("class")}
			if _, dup := s.size[k]; r.err == nil && (dup || k.class >= numClasses || len(k.mime) > maxKindMIME) {
				r.fail("kind")
			}
			if r.err != nil {
				return nil, r.err
			}
			s.size[k] = new(curve)
			r.curve(s.size[k])
		}
		for i := range numClasses {
			r.curve(&s.class[i])
			r.curve(&s.enc[i])
		}
	}
	for range r.uvarint("decoder count", maxCodecs) {
		name := r.string("decoder")
		if _, dup := m.decode[name]; r.err == nil && (dup || name == "") {
			r.fail("decoder")
		}
		if r.err != nil {
			return nil, r.err
		}
		s := new(decodeStats)
		for i := range s {
			r.curve(&s[i])
		}
		m.decode[name] = s
	}
	for range r.uvarint("peer count", maxPeers) {
		key := r.string("peer")
		var rec PeerRecord
		rec.Path.RTT = time.Duration(r.uvarint("rtt", uint64(time.Hour)))
		rec.Path.Bandwidth = r.float("bandwidth", 0, 1e13)
		rec.Path.InitWindow = int(r.uvarint("initial window", 1<<30))
		rec.At = time.Unix(0, r.varint("time"))
		if pb := r.bytes("profile", MaxProfileSize); len(pb) > 0 && r.err == nil {
			rec.Profile = new(Profile)
			if err := rec.Profile.UnmarshalBinary(pb); err != nil {
				return nil, err
			}
		}
		if _, dup := m.peers[key]; r.err == nil && dup {
			r.fail("peer")
		}
		if r.err != nil {
			return nil, r.err
		}
		m.peers[key] = rec
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the models", ErrCorrupt, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// reader reads the binary formats; its first failure sticks.
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
	v, n := binary.Uvarint(r.b)
	if r.err != nil || n <= 0 || v > max {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if r.err != nil || n <= 0 {
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

// string reads a length, at most maxString, and that many bytes.
func (r *reader) string(what string) string { return string(r.bytes(what, maxString)) }

func (r *reader) bytes(what string, limit uint64) []byte {
	l := r.uvarint(what, limit)
	if r.err != nil || uint64(len(r.b)) < l {
		r.fail(what)
		return nil
	}
	s := r.b[:l]
	r.b = r.b[l:]
	return s
}

func appendUvarint(b []byte, n uint64) []byte { return binary.AppendUvarint(b, n) }

func appendString(b []byte, s string) []byte { return append(appendUvarint(b, uint64(len(s))), s...) }

func appendFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

// A curve is written as its populated buckets in increasing order: bucket
// index, weight, centroid size and value.
func appendCurve(b []byte, c *curve) []byte {
	n := 0
	for i := range c.p {
		if c.p[i].w > 0 {
			n++
		}
	}
	b = appendUvarint(b, uint64(n))
	for i, p := range c.p {
		if p.w > 0 {
			b = appendFloat(appendFloat(appendFloat(append(b, byte(i)), p.w), p.n), p.y)
		}
	}
	return b
}

func (r *reader) curve(c *curve) {
	last, lastN := -1, 0.0
	for range r.uvarint("curve length", numBuckets) {
		i := int(r.byte("bucket"))
		w := r.float("weight", math.SmallestNonzeroFloat64, maxWeight)
		x := r.float("centroid", 1, math.Ldexp(1, maxSizeLog))
		y := r.float("value", 0, maxValue)
		if r.err != nil {
			return
		}
		// Buckets and centroids strictly increasing: what lookups rely on.
		if i >= numBuckets || i <= last || x <= lastN {
			r.fail("bucket order")
			return
		}
		c.p[i] = point{w: w, n: x, y: y}
		last, lastN = i, x
	}
}
