package pathinfo

import (
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// NewWithProgressTimeout is New with a shorter progress timeout, so that
// a test of a trickling peer need not wait for the real one.
func NewWithProgressTimeout(h host.Host, models *adaptive.Models, d time.Duration) (*Service, error) {
	return newService(h, models, d)
}

const MaxProbing = maxProbing
