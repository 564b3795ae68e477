package jxtatcp

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// limitUnsent sets TCP_NOTSENT_LOWAT on nc to n bytes (n > 0): the
// socket takes more bytes to send only while fewer than n of those it
// holds are unsent, so a write returns once its bytes are all but n on
// the wire instead of once they are in the send buffer, which Linux
// grows to megabytes.
func limitUnsent(nc net.Conn, n int) {
	sc, ok := nc.(syscall.Conn)
	if !ok || n <= 0 {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	})
}
