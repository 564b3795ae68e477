package testutil

import (
	"encoding/binary"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// EndpointFrame is an endpoint frame for service/param carrying m, as a
// peer writes it on its endpoint stream, built by hand as a hostile or
// raw peer would (the endpoint's format: service length + 1, service,
// param length, param, body length, body).
func EndpointFrame(t testing.TB, service, param string, m *message.Message) []byte {
	t.Helper()
	body, err := wire.Append(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	f := binary.AppendUvarint(nil, uint64(len(service))+1)
	f = append(f, service...)
	f = binary.AppendUvarint(f, uint64(len(param)))
	f = append(f, param...)
	f = binary.AppendUvarint(f, uint64(len(body)))
	return append(f, body...)
}
