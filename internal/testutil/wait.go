package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test after a minute: for
// what a peer's goroutines do in their own time, never for timing.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}
