package swarm

import (
	"testing"

	"go.uber.org/goleak"
)

// The swarm's bandwidth counters (libp2p's go-flow-metrics) share one
// process-wide sweeper goroutine, which outlives every test by design; it
// is the only goroutine allowed to stay.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/libp2p/go-flow-metrics.(*sweeper).run"))
}
