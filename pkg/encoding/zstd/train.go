package zstd

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/dict"
	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Training bounds.
const (
	// DefaultDictSize is the size TrainDictionary makes a dictionary at
	// most, unless WithMaxDictSize says otherwise.
	DefaultDictSize = 8 << 10
	// MaxDictSize bounds a dictionary: one TrainDictionary makes, and one
	// a model file holds (encoding.Models).
	MaxDictSize = 16 << 20
	// MaxTrainSamples bounds the samples TrainDictionary takes.
	MaxTrainSamples = 1 << 16
)

// TrainOption configures TrainDictionary.
type TrainOption func(*train) error

type train struct {
	size int
}

// WithMaxDictSize bounds the dictionary's size, 256 bytes to MaxDictSize.
// Default: DefaultDictSize.
func WithMaxDictSize(n int) TrainOption {
	return func(t *train) error {
		if n < 256 || n > MaxDictSize {
			return fmt.Errorf("%w: zstd dictionary size %d (256 to %d)", encoding.ErrBadOption, n, MaxDictSize)
		}
		t.size = n
		return nil
	}
}

// TrainDictionary builds a zstd dictionary with ID id (not 0) from sample
// documents, with github.com/klauspost/compress/dict: the byte strings
// the samples share, and entropy tables fitted to them. Samples like the
// documents to come help most. The dictionary is in the zstd dictionary
// format (WithDictionaries, WithEncoderDictionary, and a model file
// encoding.Models reads). Errors wrap encoding.ErrBadOption.
func TrainDictionary(id uint32, samples [][]byte, opts ...TrainOption) ([]byte, error) {
	t := train{size: DefaultDictSize}
	for _, o := range opts {
		if err := o(&t); err != nil {
			return nil, err
		}
	}
	if id == 0 {
		return nil, fmt.Errorf("%w: zstd dictionary ID 0", encoding.ErrBadOption)
	}
	if len(samples) == 0 || len(samples) > MaxTrainSamples {
		return nil, fmt.Errorf("%w: zstd dictionary needs 1 to %d samples, got %d", encoding.ErrBadOption, MaxTrainSamples, len(samples))
	}
	d, err := dict.BuildZstdDict(samples, dict.Options{MaxDictSize: t.size, HashBytes: 6, ZstdDictID: id})
	if err != nil {
		return nil, fmt.Errorf("%w: zstd dictionary: %w", encoding.ErrBadOption, err)
	}
	if got, err := DictID(d); err != nil || got != id {
		return nil, fmt.Errorf("%w: zstd dictionary: built with ID %d, want %d", encoding.ErrBadOption, got, id)
	}
	return d, nil
}

// dictMagic starts every zstd dictionary (0xEC30A437, little endian).
const dictMagic = "\x37\xa4\x30\xec"

// dictLoader reads zstd dictionaries as model files (encoding.Models).
type dictLoader struct {
	dicts [][]byte
	ids   map[uint32]bool
}

// Add checks a dictionary (its ID, its size, its entropy tables) and
// keeps it.
func (l *dictLoader) Add(file []byte) (uint32, error) {
	if len(file) > MaxDictSize {
		return 0, fmt.Errorf("%w: zstd dictionary of %d bytes, limit %d", encoding.ErrBadOption, len(file), MaxDictSize)
	}
	id, err := DictID(file)
	if err != nil {
		return 0, err
	}
	if l.ids[id] {
		return 0, fmt.Errorf("%w: zstd dictionary %d given twice", encoding.ErrBadOption, id)
	}
	if _, err := kzstd.InspectDictionary(file); err != nil {
		return 0, fmt.Errorf("%w: zstd dictionary %d: %w", encoding.ErrBadOption, id, err)
	}
	if l.ids == nil {
		l.ids = map[uint32]bool{}
	}
	l.ids[id] = true
	l.dicts = append(l.dicts, bytes.Clone(file))
	return id, nil
}

// Factory returns Factory(WithDictionaries(every dictionary added)).
func (l *dictLoader) Factory() encoding.Factory {
	return Factory(WithDictionaries(l.dicts...))
}
