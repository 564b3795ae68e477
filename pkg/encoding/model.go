package encoding

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ModelLoader reads the model files of one codec (RegisterModelFormat)
// and builds codecs with what they hold.
type ModelLoader interface {
	// Add reads one model file, which starts with the format's magic, and
	// keeps its model. It refuses a file that is corrupt or too large and
	// a model whose ID it already holds, with errors wrapping
	// ErrBadOption, and returns the model's ID (not 0) otherwise.
	Add(file []byte) (id uint32, err error)
	// Factory returns the factory that builds the codec with every model
	// added: its codecs decode what any of them encoded, and encode with
	// the one a spec names by ID (xml@7, zstd:19@9).
	Factory() Factory
}

type modelFormat struct {
	codec, magic string
	newLoader    func() ModelLoader
}

var (
	formatsMu    sync.RWMutex
	modelFormats []modelFormat
)

// RegisterModelFormat makes Models read the model files of a codec:
// those that start with magic (at least 4 bytes), read by a loader from
// newLoader. Codec packages register theirs when imported, as they
// register their codecs and factories. It fails with ErrDuplicate if a
// codec or a magic is taken, ErrBadOption for a bad name or magic.
func RegisterModelFormat(codec, magic string, newLoader func() ModelLoader) error {
	if err := checkWord(codec, maxCodecName); err != nil || len(magic) < 4 || newLoader == nil {
		return fmt.Errorf("%w: model format of %q (magic %q)", ErrBadOption, codec, magic)
	}
	formatsMu.Lock()
	defer formatsMu.Unlock()
	for _, f := range modelFormats {
		if f.codec == codec || strings.HasPrefix(f.magic, magic) || strings.HasPrefix(magic, f.magic) {
			return fmt.Errorf("%w: model format of %q", ErrDuplicate, codec)
		}
	}
	modelFormats = append(modelFormats, modelFormat{codec, magic, newLoader})
	return nil
}

// Models are shared models (trained XML models, zstd dictionaries) read
// from model files, each recognised by its content among the formats
// codec packages register: the codecs built with them (BuildOptions)
// encode with the model a spec names by ID (xml@7, zstd:19@9), and
// decode (Registry) what was encoded with any of them. An encoded
// element's header records the model's ID, and a receiver without it
// fails with an error wrapping ErrNoDictionary that names the ID.
//
// The zero value holds no models and is ready to use. Add must not be
// called concurrently with other methods; what the others return is safe
// for concurrent use.
type Models struct {
	loaders map[string]ModelLoader // by codec name
}

// Add reads a model file and keeps its model, returning the name of the
// codec it is for and the model's ID. It fails with an error wrapping
// ErrBadOption for a file no registered format recognises, a corrupt
// one, or a second model of one codec with the same ID.
func (m *Models) Add(file []byte) (codec string, id uint32, err error) {
	formatsMu.RLock()
	var f *modelFormat
	var names []string
	for i := range modelFormats {
		names = append(names, modelFormats[i].codec)
		if bytes.HasPrefix(file, []byte(modelFormats[i].magic)) {
			f = &modelFormats[i]
		}
	}
	formatsMu.RUnlock()
	if f == nil {
		slices.Sort(names)
		return "", 0, fmt.Errorf("%w: not a model file (know those of %s)", ErrBadOption, strings.Join(names, ", "))
	}
	if m.loaders == nil {
		m.loaders = map[string]ModelLoader{}
	}
	l := m.loaders[f.codec]
	if l == nil {
		l = f.newLoader()
	}
	if id, err = l.Add(file); err != nil {
		return f.codec, 0, err
	}
	m.loaders[f.codec] = l
	return f.codec, id, nil
}

// BuildOptions are the options under which NewCodec and NewChain build
// the codecs the models are for with them (see ModelLoader.Factory).
func (m *Models) BuildOptions() []BuildOption {
	var opts []BuildOption
	for name, l := range m.loaders {
		opts = append(opts, WithFactory(name, l.Factory()))
	}
	return opts
}

// Registry returns a registry to decode with (WithRegistry): the default
// registry's codecs, those the models are for built with them.
func (m *Models) Registry() (*Registry, error) {
	r, err := NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, name := range defaultRegistry.Names() {
		c, err := defaultRegistry.Lookup(name)
		if err != nil {
			return nil, err
		}
		if l := m.loaders[name]; l != nil {
			if c, err = l.Factory()(Spec{Name: name}); err != nil {
				return nil, err
			}
		}
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}
