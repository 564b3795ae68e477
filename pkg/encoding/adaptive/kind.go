package adaptive

import (
	"strings"

	"github.com/klauspost/compress"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// numClasses is the number of compressibility classes: from
// klauspost/compress's Estimate of a sample (an order-1 prediction rate
// and the spread of the byte histogram, 0 to 1), below 0.1 (random,
// already compressed), 0.3, 0.5, and above (markup, logs, tables).
const numClasses = 4

// sampleSize is how much of an element classify looks at: the whole
// element up to this size, otherwise this much from its start and its
// middle, half each. Estimate's cost grows with its input; 2 KiB holds
// enough of a document's structure to tell its class.
const sampleSize = 2 << 10

// maxKindMIME bounds the media type a kind keeps (and the models file).
const maxKindMIME = 64

// kind is what the scheme knows of an element's content before encoding
// it: its media type (lower case, without parameters) and its
// compressibility class. Sizes are learned per codec and kind.
type kind struct {
	mime  string
	class uint8
}

var classNames = [numClasses]string{"incompressible", "low", "medium", "high"}

func (k kind) String() string { return k.mime + "/" + classNames[k.class%numClasses] }

func classify(e message.Element) kind {
	return kind{mime: mediaType(encoding.Unmark(e).Type()), class: classOf(e.Data)}
}

func classOf(data []byte) uint8 {
	sample := data
	if len(data) > sampleSize {
		half, mid := sampleSize/2, len(data)/2
		sample = append(append(make([]byte, 0, sampleSize), data[:half]...), data[mid:mid+half]...)
	}
	est, class := compress.Estimate(sample), uint8(0)
	for _, bound := range [numClasses - 1]float64{0.1, 0.3, 0.5} { // numClasses' bounds
		if est >= bound {
			class++
		}
	}
	return class
}

func mediaType(s string) string {
	s, _, _ = strings.Cut(s, ";")
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > maxKindMIME {
		s = s[:maxKindMIME]
	}
	return s
}
