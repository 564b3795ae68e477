package testutil

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time, user and system, the process has used so
// far. Rate benchmarks report it per message: on a machine shared with
// other work it moves far less than the rate does, so two variants'
// costs compare where their rates are lost in the noise.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
