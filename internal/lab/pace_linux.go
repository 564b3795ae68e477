package lab

import (
	"runtime"
	"syscall"
	"time"
)

// pace waits until due. time.Sleep would send bursts: Go's timers fire
// through the network poller, whose wait on Linux has millisecond
// resolution, so a paced sender would send a millisecond's messages at
// once (1,500 at 1.5 M/s) and the latency would show their queueing. A
// nanosleep system call, which blocks only this goroutine's thread,
// wakes within about 0.1 ms.
func pace(due time.Time) {
	// A thread asleep in a system call keeps its P until the runtime
	// takes it back, and with it the goroutines this one just made
	// runnable (a flusher, yamux's writer): let them run first.
	runtime.Gosched()
	d := time.Until(due)
	for d > 0 {
		ts := syscall.NsecToTimespec(int64(d))
		syscall.Nanosleep(&ts, nil)
		d = time.Until(due)
	}
}
