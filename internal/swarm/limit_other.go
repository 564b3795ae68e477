//go:build !unix

package swarm

// openFileLimit is 0 (unknown) where the limit cannot be read.
func openFileLimit() int { return 0 }
