package node

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// heard reports whether the remote end of c, an accepted TCP connection,
// has sent anything on it (the kernel's count of bytes received,
// TCP_INFO, Linux 4.1 on), and whether that could be told: not for a
// connection that does not hand out its socket (WebSocket).
func heard(c any) (sent, known bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return false, false
	}
	return info.Bytes_received > 0, true
}
