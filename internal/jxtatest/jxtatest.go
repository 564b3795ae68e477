// Package jxtatest holds test helpers for p2pmsg peers that are also JXTA
// peers (endpoint.WithJXTA). It is apart from internal/testutil because
// it imports pkg/endpoint, whose own tests use testutil.
package jxtatest

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
)

// NewEndpoint starts a loopback node whose endpoint is also a JXTA
// peer listening on a loopback TCP port, with a fresh JXTA identity; both
// close when the test ends.
func NewEndpoint(t testing.TB, opts ...jxtatcp.Option) (*endpoint.Service, *jxtatcp.Identity) {
	t.Helper()
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := endpoint.New(testutil.NewNode(t), endpoint.WithJXTA(ident, "tcp://127.0.0.1:0", opts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return ep, ident
}

// SigningModes runs f as two subtests: with JXSE's default CBJX signing
// ("signed", no options) and with it off ("unsigned", for JXSE peers
// started with CBJX_DISABLE), passing the transport options of each.
func SigningModes(t *testing.T, f func(t *testing.T, unsigned bool, opts []jxtatcp.Option)) {
	t.Helper()
	t.Run("signed", func(t *testing.T) { f(t, false, nil) })
	t.Run("unsigned", func(t *testing.T) { f(t, true, []jxtatcp.Option{jxtatcp.WithUnsigned()}) })
}
