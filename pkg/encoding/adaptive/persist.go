package adaptive

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// MaxModelsSize bounds a models file.
const MaxModelsSize = 16 << 20

// DefaultFile is the name of the models file in a node's data directory.
const DefaultFile = "encoding-models.bin"

const modelsMagic = "P2AM\x01"

// Load reads models saved by Save. A missing file gives empty models and
// no error (a node's first start); a file that cannot be parsed is an
// error wrapping ErrCorrupt.
func Load(path string) (*Models, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewModels(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxModelsSize+1))
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	m, err := ParseModels(b)
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
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("adaptive: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("adaptive: %w", err)
	}
	return nil
}

// MarshalBinary returns the models' binary form (what Save writes): a
// magic "P2AM", version 1, the sequence number, the codec stats, the
// decode table and the peers.
func (m *Models) MarshalBinary() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := []byte(modelsMagic)
	b = appendUvarint(b, int(m.seq))
	specs := slices.Sorted(maps.Keys(m.codecs))
	b = appendUvarint(b, len(specs))
	for _, spec := range specs {
		s := m.codecs[spec]
		b = appendString(b, spec)
		kinds := slices.SortedFunc(maps.Keys(s.size), func(a, z Kind) int {
			if a.MIME != z.MIME {
				if a.MIME < z.MIME {
					return -1
				}
				return 1
			}
			return int(a.Class) - int(z.Class)
		})
		b = appendUvarint(b, len(kinds))
		for _, k := range kinds {
			b = appendString(b, k.MIME)
			b = append(b, k.Class)
			b = appendCurve(b, s.size[k], m.seq)
		}
		for i := range s.class {
			b = appendCurve(b, &s.class[i], m.seq)
		}
		for i := range s.enc {
			b = appendCurve(b, &s.enc[i], m.seq)
		}
	}
	names := slices.Sorted(maps.Keys(m.decode))
	b = appendUvarint(b, len(names))
	for _, name := range names {
		b = appendString(b, name)
		for i := range m.decode[name].c {
			b = appendCurve(b, &m.decode[name].c[i], m.seq)
		}
	}
	keys := slices.Sorted(maps.Keys(m.peers))
	b = appendUvarint(b, len(keys))
	for _, k := range keys {
		r := m.peers[k]
		b = appendString(b, k)
		b = appendPath(b, r.Path)
		b = appendTime(b, r.PathAt)
		var pb []byte
		if r.Profile != nil {
			var err error
			if pb, err = r.Profile.MarshalBinary(); err != nil {
				return nil, err
			}
		}
		b = appendUvarint(b, len(pb))
		b = append(b, pb...)
		b = appendTime(b, r.ProfileAt)
	}
	if len(b) > MaxModelsSize {
		return nil, fmt.Errorf("adaptive: models of %d bytes exceed %d", len(b), MaxModelsSize)
	}
	return b, nil
}

// ParseModels decodes the binary form of MarshalBinary. Input longer than
// MaxModelsSize, counts beyond the format's bounds (256 specs, 1024 kinds
// per spec, 64 decoders, 4096 peers, 256-byte names), curves out of order
// and values no measurement gives are refused with errors wrapping
// ErrCorrupt.
func ParseModels(b []byte) (*Models, error) {
	if len(b) > MaxModelsSize {
		return nil, fmt.Errorf("%w: models of %d bytes", ErrCorrupt, len(b))
	}
	if len(b) < len(modelsMagic) || string(b[:len(modelsMagic)]) != modelsMagic {
		return nil, fmt.Errorf("%w: not a models file", ErrCorrupt)
	}
	r := &reader{b: b[len(modelsMagic):]}
	m := NewModels()
	m.seq = r.uvarint("sequence", math.MaxUint64)
	nspecs := r.uvarint("spec count", maxSpecs)
	for range nspecs {
		spec := r.string("spec")
		if r.err != nil {
			break
		}
		if _, dup := m.codecs[spec]; dup || spec == "" {
			r.fail("spec")
			break
		}
		s := m.stats(spec)
		nk := r.uvarint("kind count", maxKinds)
		for range nk {
			k := Kind{MIME: r.string("kind")}
			k.Class = r.byte("class")
			if r.err != nil {
				break
			}
			if _, dup := s.size[k]; dup || k.Class >= NumClasses || len(k.MIME) > maxKindMIME {
				r.fail("kind")
				break
			}
			c := new(curve)
			r.curve(c, m.seq)
			s.size[k] = c
		}
		for i := range s.class {
			r.curve(&s.class[i], m.seq)
		}
		for i := range s.enc {
			r.curve(&s.enc[i], m.seq)
		}
	}
	ndec := r.uvarint("decoder count", maxCodecs)
	for range ndec {
		name := r.string("decoder")
		if r.err != nil {
			break
		}
		if _, dup := m.decode[name]; dup || name == "" {
			r.fail("decoder")
			break
		}
		s := new(decodeStats)
		for i := range s.c {
			r.curve(&s.c[i], m.seq)
		}
		m.decode[name] = s
	}
	npeers := r.uvarint("peer count", maxPeers)
	for range npeers {
		key := r.string("peer")
		var rec PeerRecord
		rec.Path = r.path()
		rec.PathAt = r.time("path time")
		if pb := r.bytes("profile", MaxProfileSize); len(pb) > 0 && r.err == nil {
			p, err := ParseProfile(pb)
			if err != nil {
				return nil, err
			}
			rec.Profile = p
		}
		rec.ProfileAt = r.time("profile time")
		if r.err != nil {
			break
		}
		if _, dup := m.peers[key]; dup {
			r.fail("peer")
			break
		}
		m.peers[key] = rec
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the models", ErrCorrupt, len(r.b))
	}
	return m, nil
}

// A path is written as RTT (ns), bandwidth, loss, MSS, initial and
// maximum window.
func appendPath(b []byte, p Path) []byte {
	b = appendUvarint(b, int(max(p.RTT, 0)))
	b = appendFloat(b, max(p.Bandwidth, 0))
	b = appendFloat(b, min(max(p.Loss, 0), 1))
	b = appendUvarint(b, max(p.MSS, 0))
	b = appendUvarint(b, max(p.InitWindow, 0))
	b = appendUvarint(b, max(p.MaxWindow, 0))
	return b
}

func (r *reader) path() Path {
	var p Path
	p.RTT = time.Duration(r.uvarint("rtt", uint64(time.Hour)))
	p.Bandwidth = r.float("bandwidth", 0, 1e13)
	p.Loss = r.float("loss", 0, 1)
	p.MSS = int(r.uvarint("mss", 1<<20))
	p.InitWindow = int(r.uvarint("initial window", 1<<30))
	p.MaxWindow = int(r.uvarint("maximum window", 1<<30))
	return p
}
