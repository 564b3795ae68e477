package lab

import (
	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// newCodec builds the codec a spec names (encoding.ParseSpec), where a
// spec may name codecbench's models by name (xml@employees). The
// experiments hold no keys, so seal is refused (encoding.ErrNoKey).
func newCodec(spec string) (encoding.Codec, error) {
	s, err := encoding.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return encoding.NewCodec(s, codecbench.ModelOptions()...)
}
