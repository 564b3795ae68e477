package adaptive

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Exploration bounds what the scheme spends on learning.
type Exploration struct {
	// Share of each element's predicted time added to the budget for
	// shadow trials, 0 to 1. Default 0.01.
	Share float64
	// FirstSight bounds a first-sight trial: a candidate not yet measured
	// on a kind of content at some size, that might beat the best, is
	// trial-encoded once if its predicted encode time is at most
	// FirstSight times the best's predicted total (again if elements of
	// that kind and size become ten times as costly to send). Default 1.
	FirstSight float64
	// SendRate is the probability of sending a near-best candidate
	// instead of the best, 0 to 1. Default 0.02.
	SendRate float64
	// SendSlack is how much worse than the best, predicted, a candidate
	// sent for exploration may be. Default 0.1.
	SendSlack float64
	// StaleAfter is how many recorded measurements later an estimate is
	// refreshed by a shadow trial. Default 5000.
	StaleAfter uint64
	// MaxShadows bounds the shadow trials per element of candidates
	// unmeasured or stale; those of near ties (known, predicted within
	// 10% of the best) are bounded by Share alone. 0 disables shadow
	// trials. Default 2.
	MaxShadows int
}

// DefaultExploration is used unless WithExploration says otherwise.
var DefaultExploration = Exploration{Share: 0.01, FirstSight: 1, SendRate: 0.02, SendSlack: 0.1, StaleAfter: 5000, MaxShadows: 2}

// NoExploration turns learning off except from what is sent.
var NoExploration = Exploration{}

// Option configures a Scheme.
type Option func(*config) error

type config struct {
	// What sending an element as is reads first, together: see
	// Scheme.fast.
	sel   encoding.Selector // besides encoding.IsMarked; nil: none
	path  PathSource
	recv  ProfileSource
	trace func(Decision)

	calib  Calibration // the path source's, if it is one
	models *Models
	pipeID string
	// decodeOpts are the decoder's options (WithDecoding).
	decodeOpts []encoding.Option
	clock      Clock
	seed       uint64
	explore    Exploration
	calibrate  bool
}

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

// WithSelector sets which elements Encode considers, in addition to those
// created through a Producer. Default: only Producer-marked elements.
func WithSelector(s encoding.Selector) Option {
	return func(c *config) error {
		if s == nil {
			return fmt.Errorf("%w: nil selector", encoding.ErrBadOption)
		}
		c.sel = s
		return nil
	}
}

// WithPipeID binds encoded elements to a pipe, as encoding.WithPipeID
// does for the encoding schemes; Decode binds them to it too unless
// WithDecoding says otherwise. Without it sealed elements do not open
// (encoding.ErrUnbound).
func WithPipeID(id string) Option {
	return func(c *config) error {
		if id == "" {
			return fmt.Errorf("%w: empty pipe ID", encoding.ErrBadOption)
		}
		c.pipeID = id
		return nil
	}
}

// WithDecoding sets the options of Decode, which decodes as a decoder of
// encoding.NewDecoder(opts...) does (registry, limits, policy, required
// seals), timing every decode into the models (Models.TimeDecodes).
// Default: none, and the pipe ID of WithPipeID.
func WithDecoding(opts ...encoding.Option) Option {
	return func(c *config) error {
		c.decodeOpts = append(c.decodeOpts, opts...)
		return nil
	}
}

// WithPath sets where the scheme learns about the path to the receiver.
// If p is also a Calibration, the scheme corrects its codecs' predicted
// times by it. Default: DefaultPath.
func WithPath(p PathSource) Option {
	return func(c *config) error {
		if p == nil {
			return fmt.Errorf("%w: nil path source", encoding.ErrBadOption)
		}
		c.path = p
		c.calib, _ = p.(Calibration)
		return nil
	}
}

// WithReceiver sets where the scheme gets the receiver's decode profile.
// Default: none; the receiver is assumed to decode as fast as this node.
func WithReceiver(p ProfileSource) Option {
	return func(c *config) error {
		if p == nil {
			return fmt.Errorf("%w: nil profile source", encoding.ErrBadOption)
		}
		c.recv = p
		return nil
	}
}

// WithClock sets the clock encodes and decodes are timed with. Default:
// the system clock.
func WithClock(cl Clock) Option {
	return func(c *config) error {
		if cl == nil {
			return fmt.Errorf("%w: nil clock", encoding.ErrBadOption)
		}
		c.clock = cl
		return nil
	}
}

// WithSeed seeds the exploration's random choices. Default 1.
func WithSeed(seed uint64) Option {
	return func(c *config) error { c.seed = seed; return nil }
}

// WithExploration sets the exploration budget. Fields must be within their
// bounds. Default: DefaultExploration.
func WithExploration(e Exploration) Option {
	return func(c *config) error {
		if e.Share < 0 || e.Share > 1 || e.FirstSight < 0 || e.FirstSight > 100 || e.SendRate < 0 || e.SendRate > 1 ||
			e.SendSlack < 0 || e.SendSlack > 10 || e.MaxShadows < 0 || e.MaxShadows > 16 {
			return fmt.Errorf("%w: exploration %+v", encoding.ErrBadOption, e)
		}
		c.explore = e
		return nil
	}
}

// WithTrace calls f with every decision, after the element is encoded.
// f must not block. Default: none.
func WithTrace(f func(Decision)) Option {
	return func(c *config) error { c.trace = f; return nil }
}

// WithoutCalibration skips measuring candidates the models know nothing
// of when the scheme is made; they are then predicted from priors until
// tried.
func WithoutCalibration() Option {
	return func(c *config) error { c.calibrate = false; return nil }
}
