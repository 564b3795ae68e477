package encoding

import (
	"fmt"
	"slices"
	"sync"
)

// Registry maps codec names to codecs. It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	codecs map[string]Codec
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
	if n == "" || len(n) > MaxCodecName {
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
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCodec, name)
	}
	return c, nil
}

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

var defaultRegistry = &Registry{codecs: make(map[string]Codec)}

// Default returns the process-wide registry the codec subpackages register
// their default-configured codecs in (from init), and that schemes use
// unless given WithRegistry.
func Default() *Registry { return defaultRegistry }

// Register adds c to the default registry.
func Register(c Codec) error { return defaultRegistry.Register(c) }

// Lookup finds a codec in the default registry.
func Lookup(name string) (Codec, error) { return defaultRegistry.Lookup(name) }
