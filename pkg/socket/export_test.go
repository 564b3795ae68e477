package socket

import "time"

// WithJXTAAnswerWait sets how long a JXTA connect request waits in the
// backlog for Accept (jxtaAnswerWait otherwise).
func WithJXTAAnswerWait(d time.Duration) Option {
	return func(o *options) error {
		o.jxtaWait = d
		return nil
	}
}

// BacklogLen reports how many connections and JXTA connect requests wait
// for Accept.
func BacklogLen(l *Listener) int { return len(l.backlog) }
