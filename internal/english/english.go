// Package english words counts in the command's output and the
// experiments' reports: "1 cell", "2 cells". It sits beside internal/cli,
// internal/lab and internal/swarm, which write them and share no other
// package (a swarm peer links no lab code).
package english

import "strconv"

// Count is n followed by singular when n is 1 and by plural otherwise
// ("0 cells", "1 cell", "2 cells"). Both forms are given because English
// plurals are not all the singular with an s ("copy", "copies").
func Count(n int, singular, plural string) string {
	noun := plural
	if n == 1 {
		noun = singular
	}
	return strconv.Itoa(n) + " " + noun
}
