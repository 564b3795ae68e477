package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
)

// TestShortErrorPeerGone: an error that ends with the peer gone leads
// with it, as the other recognised causes do. A receiver that shuts down
// asks its senders to end their streams, and the next Send finds it gone
// ("pipe …: endpoint: opening stream to …: the peer went away (connection
// failed)"): before, the line led with the pipe's URN.
func TestShortErrorPeerGone(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("pipe urn:jxta:x: endpoint: opening stream to 12D3: %w (connection failed)", endpoint.ErrPeerGone),
		fmt.Errorf("pipe urn:jxta:x: %w", fmt.Errorf("endpoint: flushing to 12D3: %w", endpoint.ErrPeerGone)),
	} {
		if got := shortError(err); !strings.HasPrefix(got, "the peer went away: ") {
			t.Errorf("%v: %q, want it to lead with the peer gone", err, got)
		}
	}
	if got := shortError(errors.New("plain")); got != "plain" {
		t.Errorf("plain error: %q", got)
	}
}
