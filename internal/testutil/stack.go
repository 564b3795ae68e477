package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// WaitBlocked waits until a goroutine that is not running has fn
// (package-qualified, as runtime.Stack prints it: "endpoint.writeLarge",
// "endpoint.(*sender).send") on its stack, or, if top, as its first frame
// outside the runtime: the call a test started has reached the wait it is
// to be interrupted in. Like WaitFor, it fails the test after a minute.
func WaitBlocked(t testing.TB, fn string, top bool) {
	t.Helper()
	WaitBlockedN(t, 1, fn, top)
}

// WaitBlockedN is WaitBlocked for n goroutines waiting in fn at once.
func WaitBlockedN(t testing.TB, n int, fn string, top bool) {
	t.Helper()
	buf := make([]byte, 8<<20)
	WaitFor(t, fmt.Sprintf("%d goroutines waiting in %s", n, fn), func() bool {
		waiting := 0
		size := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:size]), "\n\n") {
			lines := strings.Split(g, "\n")
			if strings.Contains(lines[0], "[running]") || strings.Contains(lines[0], "[runnable]") {
				continue
			}
			for i := 1; i < len(lines); i += 2 { // a function's line, then its file's
				f := lines[i]
				if strings.Contains(f, fn+"(") {
					waiting++
					break
				}
				if top && !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "internal/") {
					break
				}
			}
		}
		return waiting >= n
	})
}
