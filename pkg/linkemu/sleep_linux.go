//go:build linux

package linkemu

import (
	"syscall"
	"time"
)

// preciseSleep blocks the calling thread in nanosleep, which the kernel's
// high-resolution timers end within tens of microseconds; the runtime
// hands the thread's other goroutines to another thread meanwhile.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
