//go:build !linux

package linkemu

import "time"

// preciseSleep has no better clock than the runtime's here.
func preciseSleep(d time.Duration) { time.Sleep(d) }
