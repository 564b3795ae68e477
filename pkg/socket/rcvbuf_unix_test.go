//go:build unix

package socket_test

import "syscall"

// fixedReceiveBuffer fixes a socket's receive buffer at 64 KiB before it
// connects: a fixed size stops its autotuning, so that a peer that stops
// reading stalls its sender once the sender's buffer fills, and is not
// given room again and again as the buffer grows.
//
// Not the least the system allows (a few KiB on Linux): with a window
// that small, Linux bounds the sender's segments to half of it, and once
// the reader resumes, the window it offers can stay below one segment;
// the sender then sends only on its persist timer, about 560 bytes per
// probe, and the megabytes queued while the peer did not read take
// minutes to drain (an answer behind them missed its deadline in CI).
func fixedReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
	}); cerr != nil {
		return cerr
	}
	return err
}
