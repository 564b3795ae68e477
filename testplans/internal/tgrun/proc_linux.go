package tgrun

import "syscall"

// procAttr puts an instance in a process group of its own, so a timeout
// ends its children too, and ends it if tgrun dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
