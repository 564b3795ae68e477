package jxtatcp

import (
	"net"
	"syscall"
)

// unreadBytes reports whether bytes have arrived on nc that nothing has
// read yet: for counting a frame lost when its connection is closed to
// make room. It peeks without waiting and without taking the reader's
// lock (RawConn.Control), so it may run beside a reader blocked in Read.
func unreadBytes(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	n := 0
	raw.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}
