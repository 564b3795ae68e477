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
// for Accept to return them: in the backlog, or taken by an Accept (a
// request waiting for its host's answer in flight, an answer being sent,
// a connection ready).
func BacklogLen(l *Listener) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.backlog) + len(l.taken)
}
