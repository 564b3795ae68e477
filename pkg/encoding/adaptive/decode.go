package adaptive

import (
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// timedCodec times its codec's decodes into the models.
type timedCodec struct {
	encoding.Codec
	models *Models
	clock  Clock
}

// Kind is the timed codec's kind, so that nesting rules see through the
// timing.
func (t *timedCodec) Kind() encoding.Kind { return encoding.KindOf(t.Codec) }

func (t *timedCodec) Decode(dst, src []byte, p encoding.Params, b encoding.Binding, max int) ([]byte, error) {
	t0 := t.clock.Now()
	start := len(dst)
	out, err := t.Codec.Decode(dst, src, p, b, max)
	if err == nil {
		t.models.RecordDecode(t.Codec.Name(), len(out)-start, len(src), t.clock.Now().Sub(t0))
	}
	return out, err
}

// TimeDecodes is the option of encoding.NewDecoder (and DecodeElement)
// that times every decode into m, with clock (nil: the system clock): what
// a receiver learns the decode Profile it serves its senders from.
func (m *Models) TimeDecodes(clock Clock) encoding.Option {
	if clock == nil {
		clock = systemClock{}
	}
	return encoding.WithDecodeWrap(func(c encoding.Codec) encoding.Codec {
		return &timedCodec{Codec: c, models: m, clock: clock}
	})
}

// newTimedDecoder returns the scheme's decoder: the configured options,
// bound to the pipe of WithPipeID unless they say otherwise, timing its
// decodes into the models.
func newTimedDecoder(c *config) (*encoding.Decoder, error) {
	var opts []encoding.Option
	if c.pipeID != "" {
		opts = append(opts, encoding.WithPipeID(c.pipeID))
	}
	opts = append(opts, c.decodeOpts...)
	opts = append(opts, c.models.TimeDecodes(c.clock))
	return encoding.NewDecoder(opts...)
}
