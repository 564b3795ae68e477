package encoding

import (
	"fmt"
	"slices"
	"strings"
)

// Factory builds the codec a spec names. It is registered under its
// codec's name (RegisterFactory) and builds only that codec: it applies
// the spec's level and model, and refuses what its codec cannot do with an
// error wrapping ErrBadOption (a level out of range, a model it does not
// take), ErrNoDictionary or ErrNoKey. What a spec does not say (a key, a
// dictionary's bytes) the caller gives through the factory it passes to
// WithFactory; the factories codec packages register hold no keys, so
// seal's refuses to build without them.
type Factory func(Spec) (Codec, error)

// BuildOption configures NewCodec and NewChain.
type BuildOption func(*build) error

type build struct {
	factories map[string]Factory // overriding the default registry's
}

// WithFactory builds the codecs named name with f instead of the default
// registry's factory: it is how a caller gives a codec what its spec does
// not say, such as seal's keys (seal.Factory(seal.WithPSK(…))) or zstd's
// dictionaries (zstd.Factory(zstd.WithDictionaries(…))). Of two for one
// name, the later wins.
func WithFactory(name string, f Factory) BuildOption {
	return func(b *build) error {
		if err := checkWord(name, maxCodecName); err != nil || f == nil {
			return fmt.Errorf("%w: factory %q (nil: %t)", ErrBadOption, name, f == nil)
		}
		b.factories[name] = f
		return nil
	}
}

func newBuild(opts []BuildOption) (*build, error) {
	b := &build{factories: map[string]Factory{}}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// NewCodec builds the codec s names, with the factory registered under
// its name in the default registry (a codec package registers its
// factory when imported) or the one WithFactory gives. Errors wrap
// ErrSpec, and ErrUnknownCodec for a name no factory builds, or the
// factory's error.
func NewCodec(s Spec, opts ...BuildOption) (Codec, error) {
	b, err := newBuild(opts)
	if err != nil {
		return nil, err
	}
	return b.codec(s)
}

// NewChain builds the codecs of a chain, as NewCodec does each, and checks
// that they may nest as New requires: one codec, or a compression codec
// then seal. Errors wrap ErrSpec, and ErrNesting for codecs that may not
// nest.
func NewChain(c Chain, opts ...BuildOption) ([]Codec, error) {
	b, err := newBuild(opts)
	if err != nil {
		return nil, err
	}
	if len(c) == 0 || len(c) > MaxDepth {
		return nil, fmt.Errorf("%w %q: %d codecs, want 1 to %d", ErrSpec, c.String(), len(c), MaxDepth)
	}
	codecs := make([]Codec, len(c))
	for i, s := range c {
		if codecs[i], err = b.codec(s); err != nil {
			return nil, err
		}
	}
	if err := checkNesting(codecs); err != nil {
		return nil, &refusedSpec{c.String(), err}
	}
	return codecs, nil
}

func (b *build) codec(s Spec) (Codec, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	f := b.factories[s.Name]
	if f == nil {
		f = defaultRegistry.factory(s.Name)
	}
	if f == nil {
		names := defaultRegistry.factoryNames()
		for n := range b.factories {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		have := "have " + strings.Join(names, ", ")
		if len(names) == 0 {
			have = noCodecImported
		}
		return nil, &refusedSpec{s.String(), fmt.Errorf("%w (%s)", ErrUnknownCodec, have)}
	}
	c, err := f(s)
	if err != nil {
		return nil, &refusedSpec{s.String(), err}
	}
	if c == nil || c.Name() != s.Name {
		return nil, fmt.Errorf("%w %q: the factory for %s built another codec", ErrBadOption, s.String(), s.Name)
	}
	return c, nil
}

// checkNesting refuses two codecs that are not a compression codec then
// seal (see New).
func checkNesting(codecs []Codec) error {
	if len(codecs) == 2 && (kindOf(codecs[0]) != KindCompression || kindOf(codecs[1]) != KindSeal) {
		return fmt.Errorf("%w: %s then %s", ErrNesting, codecs[0].Name(), codecs[1].Name())
	}
	return nil
}
