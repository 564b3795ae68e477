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
	// DictSize is the size TrainDictionary makes a dictionary at most:
	// what the samples share beyond it is mostly noise for a message's
	// worth of data, and a larger dictionary costs every codec built
	// with it.
	DictSize = 8 << 10
	// MaxDictSize bounds a dictionary: one TrainDictionary makes, and one
	// a model file holds (encoding.Models).
	MaxDictSize = 16 << 20
	// MaxTrainSamples bounds the samples TrainDictionary takes.
	MaxTrainSamples = 1 << 16
)

// TrainDictionary builds a zstd dictionary with ID id (not 0) from sample
// documents, with github.com/klauspost/compress/dict: the byte strings
// the samples share, and entropy tables fitted to them. Samples like the
// documents to come help most. The dictionary is in the zstd dictionary
// format (WithDictionaries, WithEncoderDictionary, and a model file
// encoding.Models reads). Errors wrap encoding.ErrBadOption.
func TrainDictionary(id uint32, samples [][]byte) ([]byte, error) {
	return trainDictionary(id, samples, DictSize)
}

// trainDictionary is TrainDictionary with a size bound, 256 bytes to
// MaxDictSize (tests).
func trainDictionary(id uint32, samples [][]byte, size int) ([]byte, error) {
	if size < 256 || size > MaxDictSize {
		return nil, fmt.Errorf("%w: zstd dictionary size %d (256 to %d)", encoding.ErrBadOption, size, MaxDictSize)
	}
	if id == 0 {
		return nil, fmt.Errorf("%w: zstd dictionary ID 0", encoding.ErrBadOption)
	}
	if len(samples) == 0 || len(samples) > MaxTrainSamples {
		return nil, fmt.Errorf("%w: zstd dictionary needs 1 to %d samples, got %d", encoding.ErrBadOption, MaxTrainSamples, len(samples))
	}
	d, err := dict.BuildZstdDict(samples, dict.Options{MaxDictSize: size, HashBytes: 6, ZstdDictID: id})
	if err != nil {
		total := 0
		for _, s := range samples {
			total += len(s)
		}
		return nil, fmt.Errorf("%w: zstd dictionary: samples too few or too alike to train on (%d, %d bytes in all: %w); give more, like the documents to come", encoding.ErrBadOption, len(samples), total, err)
	}
	if got, err := dictIDOf(d); err != nil || got != id {
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
	id, err := dictIDOf(file)
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
