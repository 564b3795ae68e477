package node

import (
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
)

// Security protocols a node can offer on stream transports (TCP), by the
// names WithSecurity takes. QUIC has TLS 1.3 built in and uses neither.
const (
	SecurityTLS   = "tls"   // TLS 1.3, libp2p protocol /tls/1.0.0
	SecurityNoise = "noise" // Noise XX, libp2p protocol /noise
)

// DefaultSecurity is the order in which a node offers its security
// protocols when WithSecurity is not given; see the package documentation
// for the measurement behind it.
var DefaultSecurity = []string{SecurityTLS, SecurityNoise}

// WithSecurity sets the security protocols the node offers on TCP, most
// preferred first (default DefaultSecurity): one or both of SecurityTLS and
// SecurityNoise, each at most once. Two nodes use the first protocol of the
// dialling node's list that the other also offers.
func WithSecurity(names ...string) Option {
	return func(c *config) error {
		if len(names) == 0 {
			return fmt.Errorf("%w: no security protocol", ErrBadOption)
		}
		for i, n := range names {
			if n != SecurityTLS && n != SecurityNoise {
				return fmt.Errorf("%w: security protocol %q (want %s or %s)", ErrBadOption, n, SecurityTLS, SecurityNoise)
			}
			if slices.Contains(names[:i], n) {
				return fmt.Errorf("%w: security protocol %q given twice", ErrBadOption, n)
			}
		}
		c.security = slices.Clone(names)
		return nil
	}
}

func securityOptions(names []string) []libp2p.Option {
	var opts []libp2p.Option
	for _, n := range names {
		switch n {
		case SecurityTLS:
			opts = append(opts, libp2p.Security(libp2ptls.ID, libp2ptls.New))
		case SecurityNoise:
			opts = append(opts, libp2p.Security(noise.ID, noise.New))
		}
	}
	return opts
}
