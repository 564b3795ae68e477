package pathinfo

import "time"

// WithProgressTimeout shortens how long a probe window may take, so that
// a test of a trickling peer need not wait for the real one.
func WithProgressTimeout(d time.Duration) Option {
	return func(c *config) error { c.progress = d; return nil }
}

const MaxProbing = maxProbing
