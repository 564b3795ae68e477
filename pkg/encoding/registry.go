package encoding

import (
	"fmt"
	"slices"
	"sync"
)

// Registry maps codec names to the codecs that decode (Register, Lookup)
// and to the factories that build codecs from specs (RegisterFactory,
// NewCodec). It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	codecs    map[string]Codec
	factories map[string]Factory
}

// NewRegistry returns a registry holding codecs. It fails with ErrDuplicate
// if two share a name.
func NewRegistry(codecs ...Codec) (*Registry, error) {
	r := &Registry{codecs: make(map[string]Codec)}
	for _, c := range codecs {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds c under c.Name(). It fails with ErrDuplicate if the name is
// taken and ErrBadOption if the name is empty or too long.
func (r *Registry) Register(c Codec) error {
	n := c.Name()
	if n == "" || len(n) > maxCodecName {
		return fmt.Errorf("%w: codec name %q", ErrBadOption, n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.codecs == nil {
		r.codecs = make(map[string]Codec)
	}
	if _, ok := r.codecs[n]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, n)
	}
	r.codecs[n] = c
	return nil
}

// Lookup returns the codec registered as name, or an error wrapping
// ErrUnknownCodec.
func (r *Registry) Lookup(name string) (Codec, error) {
	r.mu.RLock()
	c, ok := r.codecs[name]
	_, known := r.factories[name]
	none := len(r.codecs) == 0
	r.mu.RUnlock()
	switch {
	case ok:
		return c, nil
	case known:
		// A codec that needs options to be built (seal: its keys).
		return nil, fmt.Errorf("%w: %q (none set up here: build one with its options, as seal's keys, and register it)", ErrUnknownCodec, name)
	case none && r == defaultRegistry:
		return nil, fmt.Errorf("%w: %q (%s)", ErrUnknownCodec, name, noCodecImported)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownCodec, name)
}

// noCodecImported is what an unknown codec's error says when the default
// registry holds none: the program imports no codec package, since this
// package imports none and each registers itself when imported.
const noCodecImported = `no codec registered: a codec registers when its package is imported, as in import _ "github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"`

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.codecs))
	for n := range r.codecs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// RegisterFactory makes f build the codecs specs name name (NewCodec). It
// fails with ErrDuplicate if name has a factory, and ErrBadOption if name
// is not a spec's name or f is nil.
func (r *Registry) RegisterFactory(name string, f Factory) error {
	if err := checkWord(name, maxCodecName); err != nil || f == nil {
		return fmt.Errorf("%w: factory %q (nil: %t)", ErrBadOption, name, f == nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.factories == nil {
		r.factories = make(map[string]Factory)
	}
	if _, ok := r.factories[name]; ok {
		return fmt.Errorf("%w: factory %q", ErrDuplicate, name)
	}
	r.factories[name] = f
	return nil
}

// factory returns name's factory, nil if it has none.
func (r *Registry) factory(name string) Factory {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.factories[name]
}

// factoryNames returns the names with a factory, sorted.
func (r *Registry) factoryNames() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.factories))
	for n := range r.factories {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

var defaultRegistry = &Registry{codecs: make(map[string]Codec), factories: make(map[string]Factory)}

// Default returns the process-wide registry the codec subpackages register
// their default-configured codecs and their factories in (from init), that
// schemes decode with unless given WithRegistry and NewCodec builds with.
func Default() *Registry { return defaultRegistry }

// Register adds c to the default registry.
func Register(c Codec) error { return defaultRegistry.Register(c) }

// RegisterFactory adds a factory to the default registry.
func RegisterFactory(name string, f Factory) error { return defaultRegistry.RegisterFactory(name, f) }
