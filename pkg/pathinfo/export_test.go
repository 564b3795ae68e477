package pathinfo

import (
	"context"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// NewWithProgressTimeout is New with a shorter progress timeout, so that
// a test of a trickling peer need not wait for the real one.
func NewWithProgressTimeout(h host.Host, models *adaptive.Models, d time.Duration) (*Service, error) {
	return newService(h, models, d)
}

const MaxProbing = maxProbing

// RequestProfile asks p for its profile as a Monitor does, with body
// run between writing the request and ending the stream.
func (s *Service) RequestProfile(ctx context.Context, p peer.ID, body func(io.Writer) error) ([]byte, error) {
	return s.request(ctx, p, []byte{opProfile}, body, adaptive.MaxProfileSize)
}
