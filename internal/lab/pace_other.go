//go:build !linux

package lab

import "time"

// pace waits until due.
func pace(due time.Time) { time.Sleep(time.Until(due)) }
