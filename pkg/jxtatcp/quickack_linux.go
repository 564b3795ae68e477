package jxtatcp

import (
	"net"
	"syscall"
)

// quickAckReader reads from a TCP connection and, after each read,
// re-arms TCP_QUICKACK, which Linux clears as it goes: the data read is
// acknowledged at once instead of up to 40 ms later. JXSE's transport
// (Netty 3) leaves Nagle's algorithm on, so a JXSE peer writing two small
// messages back to back (a reliable-layer acknowledgement, then data)
// holds the second until the first is acknowledged; a delayed
// acknowledgement would add its delay to every such exchange.
type quickAckReader struct {
	nc  net.Conn
	raw syscall.RawConn
}

func newConnReader(nc net.Conn) interface{ Read([]byte) (int, error) } {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	return &quickAckReader{nc: nc, raw: raw}
}

func (r *quickAckReader) Read(b []byte) (int, error) {
	n, err := r.nc.Read(b)
	if n > 0 {
		r.raw.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		})
	}
	return n, err
}
