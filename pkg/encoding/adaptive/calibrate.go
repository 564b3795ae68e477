package adaptive

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// CalibrationSizes are the sizes of the built-in sample documents codecs
// are calibrated on.
var CalibrationSizes = []int{1 << 10, 16 << 10, 128 << 10}

var (
	samplesOnce sync.Once
	samples     [][]byte
)

// calibrationSamples are synthetic XML documents (records with IDs,
// names, dates, amounts and free text from a fixed generator) of
// CalibrationSizes, each well-formed.
func calibrationSamples() [][]byte {
	samplesOnce.Do(func() {
		words := []string{"order", "shipment", "invoice", "customer", "pallet", "urgent", "delivery", "warehouse",
			"payment", "contact", "priority", "express", "pending", "damaged", "replacement", "account"}
		names := []string{"Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jana"}
		for _, size := range CalibrationSizes {
			rng := rand.New(rand.NewPCG(uint64(size), 0x63616c))
			var b bytes.Buffer
			b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<records>\n")
			const end = "</records>\n"
			for id := 1000; ; id++ {
				var r bytes.Buffer
				r.WriteString("  <record id=\"" + strconv.Itoa(id) + "\">\n    <name>")
				r.WriteString(names[rng.IntN(len(names))] + " " + names[rng.IntN(len(names))] + "son")
				r.WriteString("</name>\n    <date>2004-0" + strconv.Itoa(1+rng.IntN(9)) + "-" + strconv.Itoa(10+rng.IntN(18)) + "</date>\n")
				r.WriteString("    <amount>" + strconv.FormatFloat(float64(rng.IntN(100000))/100, 'f', -1, 64) + "</amount>\n    <note>")
				for w := 3 + rng.IntN(8); w > 0; w-- {
					r.WriteString(words[rng.IntN(len(words))])
					if w > 1 {
						r.WriteByte(' ')
					}
				}
				r.WriteString("</note>\n  </record>\n")
				if b.Len()+r.Len()+len(end) > size {
					break
				}
				b.Write(r.Bytes())
			}
			b.WriteString(end)
			samples = append(samples, b.Bytes())
		}
	})
	return samples
}

// Calibrate measures each codec on the built-in samples: payload size and
// encode time go into the class-level estimates of the samples' kind, the
// decode time into this node's decode profile. It costs one encode and one
// decode of each sample per codec, after a warm-up on the smallest, and
// stops early for a codec slower than 5 ms on a sample; codecs that fail
// on the samples are skipped.
func (m *Models) Calibrate(codecs []encoding.Codec, clock Clock) error {
	if clock == nil {
		clock = systemClock{}
	}
	b := encoding.Binding{Namespace: "adaptive", Name: "calibration"}
	for _, c := range codecs {
		spec := specOf(c)
		if _, err := c.Encode(nil, calibrationSamples()[0], b); err != nil { // warm-up: pools, tables
			continue
		}
		for _, doc := range calibrationSamples() {
			k := Classify(message.Element{MIME: message.XMLUTF8, Data: doc})
			// The faster of two encodes: the first also warms the codec up
			// for this size, and one of two is less likely descheduled.
			var enc []byte
			var dt time.Duration
			var err error
			for i := range 2 {
				t0 := clock.Now()
				enc, err = c.Encode(enc[:0], doc, b)
				if d := clock.Now().Sub(t0); i == 0 || d < dt {
					dt = d
				}
				if err != nil {
					break
				}
			}
			if err != nil {
				break
			}
			m.mu.Lock()
			m.recordEncode(spec, k, len(doc), len(enc), dt, false)
			m.mu.Unlock()
			m.calibrateDecode(c, enc, len(doc), b, clock)
			if dt > calibrationBudget {
				break // a slow codec: larger samples are extrapolated
			}
		}
	}
	return nil
}

// calibrationBudget stops a codec's calibration at the first sample whose
// encode takes longer.
const calibrationBudget = 5 * time.Millisecond

// CalibrateDecode measures decoding with every codec of reg that nothing
// is known of yet, on the built-in samples, so that this node's profile
// covers them before it has received any. Codecs that cannot encode the
// samples with their defaults (a key is missing) are skipped.
func (m *Models) CalibrateDecode(reg *encoding.Registry, clock Clock) {
	if clock == nil {
		clock = systemClock{}
	}
	b := encoding.Binding{Namespace: "adaptive", Name: "calibration"}
	for _, name := range reg.Names() {
		if m.hasDecode(name) {
			continue
		}
		c, err := reg.Lookup(name)
		if err != nil {
			continue
		}
		for _, doc := range calibrationSamples() {
			enc, err := c.Encode(nil, doc, b)
			if err != nil {
				break
			}
			m.calibrateDecode(c, enc, len(doc), b, clock)
		}
	}
}

func (m *Models) calibrateDecode(c encoding.Codec, enc []byte, n int, b encoding.Binding, clock Clock) {
	if _, err := c.Decode(nil, enc, c.Params(), b, n); err != nil { // warm-up
		return
	}
	dst := make([]byte, 0, n)
	var dt time.Duration
	for i := range 2 {
		t0 := clock.Now()
		out, err := c.Decode(dst, enc, c.Params(), b, n)
		if d := clock.Now().Sub(t0); i == 0 || d < dt {
			dt = d
		}
		if err != nil || len(out) != n {
			return
		}
	}
	m.RecordDecode(c.Name(), n, len(enc), dt)
}
