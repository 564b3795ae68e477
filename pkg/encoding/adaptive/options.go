package adaptive

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Option configures a Scheme.
type Option func(*config) error

type config struct {
	models  *Models
	peer    Peer
	encOpts []encoding.Option
	share   float64
	trace   func(Decision)
}

// defaultShare is the exploration share: a hundredth of the traffic's
// predicted time goes to learning, a cost no user would notice.
const defaultShare = 0.01

// WithModels sets the models the scheme learns into and decides from.
// Default: new, empty models of its own.
func WithModels(m *Models) Option {
	return func(c *config) error {
		if m == nil {
			return fmt.Errorf("%w: nil models", encoding.ErrBadOption)
		}
		c.models = m
		return nil
	}
}

// WithPeer sets what the scheme knows of the receiver (the path to it and
// its decode profile) and where it reports its exchanges. Default: none;
// the path is assumed a 100 Mbit/s LAN, where compression pays only for
// large, compressible elements, and the receiver to decode as fast as
// this node.
func WithPeer(p Peer) Option {
	return func(c *config) error {
		if p == nil {
			return fmt.Errorf("%w: nil peer", encoding.ErrBadOption)
		}
		c.peer = p
		return nil
	}
}

// WithEncoding gives the scheme the encoding layer's options, as
// encoding.New takes them: the candidates encode with them (which
// elements are selected, the pipe ID they are bound to) and Decode
// decodes with them (registry, limits, policy, required seals). Default:
// none.
func WithEncoding(opts ...encoding.Option) Option {
	return func(c *config) error {
		c.encOpts = append(c.encOpts, opts...)
		return nil
	}
}

// withExploration sets the share, 0 to 1, of each element's predicted
// time that is added to the budget of trial encodes; 0 turns trials off
// (tests). Default: defaultShare.
func withExploration(share float64) Option {
	return func(c *config) error {
		if share < 0 || share > 1 {
			return fmt.Errorf("%w: exploration share %g", encoding.ErrBadOption, share)
		}
		c.share = share
		return nil
	}
}

// WithTrace calls f with every decision, after the element is encoded.
// f must not block. Default: none.
func WithTrace(f func(Decision)) Option {
	return func(c *config) error { c.trace = f; return nil }
}
