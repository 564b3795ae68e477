//go:build !linux

package jxtatcp

import "net"

// limitUnsent does nothing: TCP_NOTSENT_LOWAT is set only on Linux.
func limitUnsent(net.Conn, int) {}
