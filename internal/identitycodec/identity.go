// Package identitycodec is the identity codec of p2pmsg's encoding layer: it
// copies bytes unchanged. It builds on pkg/encoding and is useful as a
// baseline (codecbench, tests) and to mark elements as encoded without transforming them.
package identitycodec

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "identity"

// Codec copies bytes.
type Codec struct{}

var _ encoding.Codec = Codec{}

// New returns the identity codec. It takes no options.
func New() Codec { return Codec{} }

func init() {
	_ = encoding.Register(Codec{})
	_ = encoding.RegisterFactory(Name, factory)
}

// factory builds the codec the spec "identity" names: it takes no level
// and no model.
func factory(s encoding.Spec) (encoding.Codec, error) {
	if s.Level != 0 || s.Model != "" {
		return nil, fmt.Errorf("%w: identity takes no level or model", encoding.ErrBadOption)
	}
	return Codec{}, nil
}

// Name returns "identity".
func (Codec) Name() string { return Name }

// Params returns zero parameters.
func (Codec) Params() encoding.Params { return encoding.Params{} }

// Encode appends src to dst.
func (Codec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	return append(dst, src...), nil
}

// Decode appends src to dst if it is at most max bytes.
func (Codec) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	if len(src) > max {
		return dst, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, len(src), max)
	}
	return append(dst, src...), nil
}
