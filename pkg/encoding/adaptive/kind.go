package adaptive

import (
	"strings"

	"github.com/klauspost/compress"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// NumClasses is the number of compressibility classes.
const NumClasses = 4

// Compressibility classes, from klauspost/compress's Estimate of a sample
// of the data (an order-1 prediction rate and the spread of the byte
// histogram, normalised to 0..1).
const (
	ClassIncompressible uint8 = iota // Estimate < 0.1: random, already compressed
	ClassLow                         // < 0.3
	ClassMedium                      // < 0.5
	ClassHigh                        // >= 0.5: markup, logs, tables
)

// sampleSize is how much of an element Classify looks at: the whole
// element up to this size, otherwise this much from its start and its
// middle, half each.
const sampleSize = 2 << 10

// maxKindMIME bounds the media type a Kind keeps.
const maxKindMIME = 64

// Kind is what the scheme knows of an element's content before encoding
// it: its media type (lower case, without parameters) and a
// compressibility class from a cheap estimate on a sample. Compression
// ratios are learned per codec and Kind.
type Kind struct {
	MIME  string
	Class uint8
}

func (k Kind) String() string {
	return k.MIME + "/" + [...]string{"incompressible", "low", "medium", "high"}[k.Class%NumClasses]
}

// Classify returns the kind of an element. It reads at most 2 KiB of its
// data, so it costs a few microseconds whatever the element's size.
func Classify(e message.Element) Kind {
	return Kind{MIME: mediaType(encoding.Unmark(e).Type()), Class: classOf(e.Data)}
}

func classOf(data []byte) uint8 {
	sample := data
	if len(data) > sampleSize {
		half := sampleSize / 2
		mid := len(data) / 2
		sample = make([]byte, 0, sampleSize)
		sample = append(sample, data[:half]...)
		sample = append(sample, data[mid:mid+half]...)
	}
	est := compress.Estimate(sample)
	switch {
	case est < 0.1:
		return ClassIncompressible
	case est < 0.3:
		return ClassLow
	case est < 0.5:
		return ClassMedium
	}
	return ClassHigh
}

func mediaType(s string) string {
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > maxKindMIME {
		s = s[:maxKindMIME]
	}
	return s
}

// numRatioClasses splits decode speeds by how much the codec compressed:
// decoding stored or barely compressed data is a copy, decoding a 10:1
// stream is real work per output byte.
const numRatioClasses = 4

func ratioClass(r float64) int {
	switch {
	case r < 0.15:
		return 0
	case r < 0.35:
		return 1
	case r < 0.7:
		return 2
	}
	return 3
}
