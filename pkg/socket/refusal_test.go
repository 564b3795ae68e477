package socket

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestResetRefusal: only the listening peer's reset of the stream
// before its answer reads as a refusal; a timeout, a connection that
// closed, a reset of this side's own or for another reason keep their
// own error.
func TestResetRefusal(t *testing.T) {
	remote := func(code network.StreamErrorCode) error { return &network.StreamError{ErrorCode: code, Remote: true} }
	for _, tc := range []struct {
		name    string
		err     error
		wantErr error // nil: not a refusal
	}{
		{"over the resource limits", remote(network.StreamResourceLimitExceeded), ErrRefused},
		{"negotiating, over the resource limits", fmt.Errorf("failed to negotiate protocol: %w", remote(network.StreamResourceLimitExceeded)), ErrRefused},
		{"reset without a code", remote(network.StreamNoError), ErrRefused},
		{"reset here", &network.StreamError{ErrorCode: network.StreamResourceLimitExceeded}, nil},
		{"negotiation failed", remote(network.StreamProtocolNegotiationFailed), nil},
		{"peer shutting down", remote(network.StreamShutdown), nil},
		{"connection closed", &network.ConnError{ErrorCode: network.ConnShutdown, Remote: true}, nil},
		{"connection lost", fmt.Errorf("%w: connection closed: EOF", network.ErrReset), nil},
		{"timeout", os.ErrDeadlineExceeded, nil},
		{"protocol not supported", errors.New("protocols not supported: [/p2pmsg/socket/1.0.0]"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := resetRefusal(peer.ID("p"), tc.err)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("%v read as %v", tc.err, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, network.ErrReset) || !strings.Contains(err.Error(), "MaxSocketStreamsPerPeer") {
				t.Fatalf("%v read as %v", tc.err, err)
			}
		})
	}
}
