//go:build unix

package swarm

import "syscall"

// openFileLimit is how many files this process may hold open (its soft
// RLIMIT_NOFILE, which the Go runtime raises to the hard limit at start),
// at most 1<<30 (an unlimited one is as good), or 0 when unknown.
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return int(min(r.Cur, 1<<30))
}
