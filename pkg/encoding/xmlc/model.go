package xmlc

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Model limits.
const (
	// MaxModelSize bounds a model's samples, in bytes.
	MaxModelSize = 16 << 20
	// MaxModelSamples bounds their number.
	MaxModelSamples = 4096
	// maxDictSize bounds the zstd dictionary made from them: its tail is
	// kept, since recent history is the cheapest to refer to.
	maxDictSize = 128 << 10
)

const modelMagic = "P2XM"

// Model is a shared model: sample documents, identified by an ID both
// peers know. Encoding the samples (deterministically, on both sides)
// primes the codec with their paths, names, whitespace, value shapes and a
// zstd dictionary made of their coded form. A Model is immutable and safe
// for concurrent use.
type Model struct {
	id      uint32
	samples [][]byte
	base    *state
	dict    []byte
	// decoders decode the main streams primed with dict, for every
	// codec holding the model.
	decoders decoderPools
}

// NewModel builds a model with ID id (not 0) from sample documents, which
// must be XML the codec's model takes. Samples like the documents to come
// (same vocabulary, same layout) help most. The model keeps the samples
// whole: its serialized form (MarshalBinary) is the samples plus a few
// bytes of header and lengths, from which ParseModel rebuilds the rest.
func NewModel(id uint32, samples ...[]byte) (*Model, error) {
	if id == 0 {
		return nil, fmt.Errorf("%w: xml model ID 0", encoding.ErrBadOption)
	}
	if len(samples) == 0 || len(samples) > MaxModelSamples {
		return nil, fmt.Errorf("%w: xml model needs 1 to %d samples, got %d", encoding.ErrBadOption, MaxModelSamples, len(samples))
	}
	total := 0
	for _, s := range samples {
		total += len(s)
	}
	if total > MaxModelSize {
		return nil, fmt.Errorf("%w: xml model samples hold %d bytes, limit %d", encoding.ErrBadOption, total, MaxModelSize)
	}
	m := &Model{id: id}
	st := emptyState
	var dict []byte
	e := newEncoder()
	for i, s := range samples {
		s = append([]byte(nil), s...)
		e.reset(s, st)
		if !e.scan() {
			return nil, fmt.Errorf("%w: xml model sample %d is not XML the codec models", encoding.ErrBadOption, i)
		}
		e.finish()
		dict = append(dict, e.main...)
		st = e.snapshot()
		m.samples = append(m.samples, s)
	}
	if len(dict) > maxDictSize {
		dict = dict[len(dict)-maxDictSize:]
	}
	m.base, m.dict = st, dict
	return m, nil
}

// snapshot returns the state e ends with (after finish), frozen: the
// state a decoder of the same document ends with.
func (e *encoder) snapshot() *state {
	merged := func(d *dict) map[string]int32 {
		m := maps.Clone(d.base)
		maps.Copy(m, d.local)
		return m
	}
	s := &state{
		names:   slices.Clone(e.names.list),
		nameIdx: merged(&e.names),
		ws:      slices.Clone(e.ws.list),
		wsIdx:   merged(&e.ws),
		misc:    slices.Clone(e.misc.list),
		miscIdx: merged(&e.misc),
		nodes:   slices.Clone(e.nodes),
		conts:   make([]cont, e.ncont),
	}
	for i := range s.nodes { // the pooled encoder will reuse these arrays
		s.nodes[i].children = slices.Clone(s.nodes[i].children)
		s.nodes[i].attrs = slices.Clone(s.nodes[i].attrs)
	}
	for i := range e.ncont {
		c := &e.conts[i]
		idx := map[string]int32{}
		if c.base != nil {
			maps.Copy(idx, c.base.index)
		}
		maps.Copy(idx, c.local)
		s.conts[i] = cont{shapes: slices.Clone(c.shapes), index: idx}
	}
	return s.frozen()
}

// ID returns the model's ID.
func (m *Model) ID() uint32 { return m.id }

// AppendBinary appends the model's serialized form (its ID and samples),
// which ParseModel reads.
func (m *Model) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, modelMagic...)
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(m.id))
	b = binary.AppendUvarint(b, uint64(len(m.samples)))
	for _, s := range m.samples {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b, nil
}

// MarshalBinary returns the model's serialized form.
func (m *Model) MarshalBinary() ([]byte, error) { return m.AppendBinary(nil) }

// ParseModel reads a serialized model and rebuilds it. Errors wrap
// encoding.ErrBadOption.
func ParseModel(b []byte) (*Model, error) {
	bad := func(what string) error { return fmt.Errorf("%w: xml model: %s", encoding.ErrBadOption, what) }
	if len(b) < len(modelMagic)+1 || string(b[:len(modelMagic)]) != modelMagic {
		return nil, bad("bad magic")
	}
	if b[len(modelMagic)] != 1 {
		return nil, bad("unsupported version")
	}
	r := reader{b: b, p: len(modelMagic) + 1}
	id := r.uvarint("id")
	n := r.count(MaxModelSamples, "sample count")
	if r.err != nil || id == 0 || id > 1<<32-1 {
		return nil, bad("bad ID or sample count")
	}
	samples := make([][]byte, 0, n)
	for range n {
		s := r.bytes(r.count(MaxModelSize, "sample length"), "sample")
		if r.err != nil {
			return nil, bad("truncated sample")
		}
		samples = append(samples, s)
	}
	if r.p != len(b) {
		return nil, bad("trailing bytes")
	}
	return NewModel(uint32(id), samples...)
}

// modelLoader reads xml models as model files (encoding.Models).
type modelLoader struct {
	models []*Model
}

// Add rebuilds the model a file holds (ParseModel) and keeps it.
func (l *modelLoader) Add(file []byte) (uint32, error) {
	m, err := ParseModel(file)
	if err != nil {
		return 0, err
	}
	for _, o := range l.models {
		if o.id == m.id {
			return 0, fmt.Errorf("%w: xml model %d given twice", encoding.ErrBadOption, m.id)
		}
	}
	l.models = append(l.models, m)
	return m.id, nil
}

// Factory returns Factory(WithModels(every model added)).
func (l *modelLoader) Factory() encoding.Factory {
	return Factory(WithModels(l.models...))
}
