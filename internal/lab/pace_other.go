//go:build !linux

package lab

import "time"

// pace waits d, until due.
func pace(_ time.Time, d time.Duration) { time.Sleep(d) }
