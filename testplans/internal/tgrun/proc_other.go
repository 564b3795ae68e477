//go:build !linux

package tgrun

import "syscall"

// procAttr puts an instance in a process group of its own, so a timeout
// ends its children too.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
