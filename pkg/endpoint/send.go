package endpoint

import (
	"encoding/binary"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// smallMax bounds the element data of a message sent as one prepared
// frame (writeSmall); larger messages go through the stream's buffered
// writer, their large elements straight from the caller's memory.
const smallMax = 16 << 10

// smallMessage reports whether m is sent with writeSmall.
func smallMessage(m *message.Message) bool {
	n := 0
	for _, e := range m.Elements() {
		if n += len(e.Data); n > smallMax || e.Signature != nil {
			return false
		}
	}
	return true
}

// writeSmall encodes m's whole frame in the sender's buffer and writes it
// to the stream in one call. The message is encoded first, behind room
// left for the header, whose length field needs the message's size; so a
// small message is planned once and copied once. encoded is false, with
// the encoder's error, when m cannot be encoded, or with a LimitError when
// it is over limit (0: unknown); nothing is written then.
// The stream's buffered writer is empty between Sends, so writing around
// it keeps the order.
func (snd *sender) writeSmall(service, param string, m *message.Message, limit int64) (encoded bool, err error) {
	room := len(service) + len(param) + 3*binary.MaxVarintLen64
	b := snd.frame
	if cap(b) < room+64 {
		b = make([]byte, room, room+256)
	}
	b, err = wire.Append(b[:room], m)
	if err != nil {
		return false, err
	}
	if size := int64(len(b) - room); limit > 0 && size > limit {
		return false, &LimitError{Peer: snd.peer, Size: size, Limit: limit}
	}
	h := snd.hdr[:0]
	h = binary.AppendUvarint(h, uint64(len(service)))
	h = append(h, service...)
	h = binary.AppendUvarint(h, uint64(len(param)))
	h = append(h, param...)
	h = binary.AppendUvarint(h, uint64(len(b)-room))
	snd.hdr = h
	start := room - len(h)
	copy(b[start:], h)
	_, err = snd.st.Write(b[start:])
	if cap(b) <= 64<<10 {
		snd.frame = b[:0]
	}
	return true, err
}
