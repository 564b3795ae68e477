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

// newTimedDecoder returns a decoder over a copy of the configured
// registry whose codecs time their decodes.
func newTimedDecoder(c *config) (*encoding.Decoder, error) {
	reg, err := encoding.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, name := range c.reg.Names() {
		codec, err := c.reg.Lookup(name)
		if err != nil {
			return nil, err
		}
		if err := reg.Register(&timedCodec{Codec: codec, models: c.models, clock: c.clock}); err != nil {
			return nil, err
		}
	}
	opts := []encoding.Option{
		encoding.WithRegistry(reg), encoding.WithLimits(c.maxElem, c.maxMsg),
		encoding.WithPolicy(c.policy),
	}
	if c.pipeID != "" {
		opts = append(opts, encoding.WithPipeID(c.pipeID))
	}
	opts = append(opts, c.decodeOpts...)
	if c.onErr != nil {
		opts = append(opts, encoding.WithErrorHandler(c.onErr))
	}
	return encoding.NewDecoder(opts...)
}
