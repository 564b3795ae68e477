package lab

import (
	"syscall"
	"time"
)

// pace waits d, until due. time.Sleep would send bursts: Go's timers fire
// through the network poller, whose wait on Linux has millisecond
// resolution, so a paced sender would send a millisecond's messages at
// once (1,500 at 1.5 M/s) and the latency would show their queueing. A
// nanosleep system call, which blocks only this goroutine's thread,
// wakes within about 0.1 ms.
func pace(due time.Time, d time.Duration) {
	for d > 0 {
		ts := syscall.NsecToTimespec(int64(d))
		syscall.Nanosleep(&ts, nil)
		d = time.Until(due)
	}
}
