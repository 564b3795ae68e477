//go:build !linux

package jxtatcp

import "net"

// newConnReader reads nc as it is: TCP_QUICKACK is Linux's.
func newConnReader(nc net.Conn) interface{ Read([]byte) (int, error) } { return nc }
