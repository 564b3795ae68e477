//go:build !windows

package jxtatcp

import (
	"errors"
	"syscall"
)

// refused reports whether a dial failed because nothing listens there.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
