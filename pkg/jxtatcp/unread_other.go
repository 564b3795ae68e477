//go:build !linux

package jxtatcp

import "net"

// unreadBytes reports false: peeking at a socket without waiting is done
// only on Linux, so elsewhere a frame lost to eviction is counted only
// once its reader has seen its first byte.
func unreadBytes(net.Conn) bool { return false }
