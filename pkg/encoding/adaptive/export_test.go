package adaptive

import (
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// What the external tests need of the models' insides.

// Teach records that encoding e with spec gave out bytes in d.
func (m *Models) Teach(spec string, e message.Element, out int, d time.Duration) {
	m.recordEncode(spec, classify(e), true, len(e.Data), out, d)
}

// TeachDecode records that decoding in bytes into n with codec took d.
func (m *Models) TeachDecode(codec string, n, in int, d time.Duration) {
	m.recordDecode(codec, n, d)
}

var ParseModels = parseModels

// MarshalBinary is the form Save writes.
func (m *Models) MarshalBinary() ([]byte, error) { return m.marshal() }

// KindOf is the kind of e, as a Decision names it.
func KindOf(e message.Element) string { return classify(e).String() }

// The identity choice.
const Identity = identity

var WithExploration = withExploration
