package jxtatcp

import (
	"errors"
	"syscall"
)

// wsaECONNREFUSED is what a Windows dial fails with when nothing listens
// there: Winsock's WSAECONNREFUSED, which package syscall neither names
// nor matches to ECONNREFUSED (errors.Is).
const wsaECONNREFUSED = syscall.Errno(10061)

// refused reports whether a dial failed because nothing listens there.
func refused(err error) bool {
	return errors.Is(err, wsaECONNREFUSED) || errors.Is(err, syscall.ECONNREFUSED)
}
