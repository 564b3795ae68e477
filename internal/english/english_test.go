package english_test

import (
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/english"
)

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{0, "0 message copies"},
		{1, "1 message copy"},
		{2, "2 message copies"},
		{-1, "-1 message copies"},
	} {
		if got := english.Count(c.n, "message copy", "message copies"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func ExampleCount() {
	for _, n := range []int{1, 3} {
		fmt.Printf("Targets met in %s.\n", english.Count(n, "cell", "cells"))
	}
	// Output:
	// Targets met in 1 cell.
	// Targets met in 3 cells.
}
