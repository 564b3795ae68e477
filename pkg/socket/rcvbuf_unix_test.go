//go:build unix

package socket_test

import "syscall"

// smallReceiveBuffer sets a socket's receive buffer to the least the
// system allows (a few KiB on Linux; a fixed size also stops its
// autotuning), before it connects.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1)
	}); cerr != nil {
		return cerr
	}
	return err
}
