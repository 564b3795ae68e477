// Package specfactory builds the encoding.Factory of a codec package from
// its constructor and options: the codec packages of pkg/encoding share it,
// and it is no part of the API (a codec elsewhere writes its Factory).
package specfactory

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// New is the factory of a codec built by newCodec from options:
// base first, then withLevel(level) when the spec gives a level, then,
// when it names a model, withModel(ID) for the model's decimal ID (the
// model itself must come with base). A nil withModel means the codec
// takes no model. zstd's and xml's Factory are New with their
// dictionaries or models.
func New[O any, C encoding.Codec](name string, newCodec func(...O) (C, error), base []O, withLevel func(int) O, withModel func(uint32) O) encoding.Factory {
	return func(s encoding.Spec) (encoding.Codec, error) {
		opts := slices.Clone(base)
		if s.Level != 0 {
			opts = append(opts, withLevel(s.Level))
		}
		if s.Model != "" {
			if withModel == nil {
				return nil, fmt.Errorf("%w: %s takes no model", encoding.ErrBadOption, name)
			}
			id, ok := s.DictID()
			if !ok {
				return nil, fmt.Errorf("%w: %s model %q: want a numeric model ID", encoding.ErrBadOption, name, s.Model)
			}
			opts = append(opts, withModel(id))
		}
		c, err := newCodec(opts...)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Level is the factory of a codec that takes a level, min to max, and no
// model: at builds it at the spec's level, or at def when it gives none.
func Level(name string, min, max, def int, at func(level int) encoding.Codec) encoding.Factory {
	return func(s encoding.Spec) (encoding.Codec, error) {
		l := cmp.Or(s.Level, def)
		if l < min || l > max {
			return nil, LevelError(name, l, min, max)
		}
		if s.Model != "" {
			return nil, fmt.Errorf("%w: %s takes no model", encoding.ErrBadOption, name)
		}
		return at(l), nil
	}
}

// LevelError is the error for a level a codec does not have: it wraps
// encoding.ErrBadOption and names the codec's levels, min to max, so that
// whoever typed the spec sees what to type instead. Every codec package of
// pkg/encoding reports a bad level with it, so they all say it alike.
func LevelError(name string, level, min, max int) error {
	return fmt.Errorf("%w: %s level %d out of range %d to %d", encoding.ErrBadOption, name, level, min, max)
}
