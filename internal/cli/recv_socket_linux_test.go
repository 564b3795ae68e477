package cli_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestRecvSocketInterruptedWhileStdoutBlocked: recv --socket whose stdout
// is a pipe nobody reads, stuck in a write to it, still ends on SIGINT or
// SIGTERM, exiting 130 or 143 and resetting the socket, so that send
// --socket fails. Before, the signal's reset ended the socket but the copy
// stayed in its write until stdout drained, and recv never exited (here:
// "recv --socket did not exit after interrupt while its stdout was
// blocked", and the same after terminated).
// Linux only: it fills the pipe knowing its size (F_GETPIPE_SZ, FIONREAD).
func TestRecvSocketInterruptedWhileStdoutBlocked(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			a := newPipeAdv(t, "unicast")
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pr.Close() }) // never read: recv's writes block
			size := pipeSize(t, pw, 16<<10)
			recv := startTo(t, nil, pw, "recv", "--socket", "--pipe", a, "--listen", loopback)
			pw.Close() // recv holds its own copy
			// Far more than the pipe holds.
			send, stderr, exited := startSendSocket(t, a, recv.addrs[0], 1<<20)

			// Once the pipe is full, recv, with more to copy, is stuck
			// in a write to its stdout: a write of at most pipeBuf bytes
			// waits for room for all of it (it is atomic), so the pipe
			// may stay short of full by less than one such write (QUIC
			// delivers a stream in packet-sized reads).
			hang := time.After(time.Minute) // a hang, not a timing bound
			for pipeHolds(t, pr) <= size-pipeBuf {
				select {
				case <-hang:
					t.Fatalf("recv --socket's stdout never filled (%d of %d bytes)", pipeHolds(t, pr), size)
				case <-time.After(10 * time.Millisecond):
				}
			}
			recv.cmd.Process.Signal(sig)
			select {
			case <-recv.done:
			case <-time.After(time.Minute): // a hang, not a timing bound
				t.Fatalf("recv --socket did not exit after %v while its stdout was blocked", sig)
			}
			if code := recv.wait(t); code != 128+int(sig) {
				t.Fatalf("recv --socket interrupted: exit %d, want %d; stderr %q", code, 128+int(sig), recv.stderr)
			}
			if got := strings.Join(recv.stderr, "\n"); !strings.Contains(got, "cut short after") {
				t.Errorf("recv's stderr %q does not say the stream was cut short", got)
			}
			select {
			case <-exited:
			case <-time.After(time.Minute): // a hang, not a timing bound
				t.Fatal("send --socket did not exit after its receiver was interrupted")
			}
			if code := send.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("send --socket whose receiver was interrupted mid-stream: exit %d, want 1; stderr %q", code, stderr.String())
			}
		})
	}
}

// pipeSize asks the kernel to make w's pipe hold want bytes and returns
// what it holds (at least a page).
func pipeSize(t *testing.T, w *os.File, want int) int {
	t.Helper()
	var size int
	fcntl(t, w, func(fd uintptr) (r uintptr, errno syscall.Errno) {
		if _, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETPIPE_SZ, uintptr(want)); errno != 0 {
			return 0, errno
		}
		r, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETPIPE_SZ, 0)
		size = int(r)
		return r, errno
	})
	return size
}

// pipeBuf is Linux's PIPE_BUF: a pipe write of at most this many bytes
// is atomic.
const pipeBuf = 4096

// pipeHolds returns how many bytes r's pipe holds, unread.
func pipeHolds(t *testing.T, r *os.File) int {
	t.Helper()
	var n int32
	fcntl(t, r, func(fd uintptr) (uintptr, syscall.Errno) {
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		return 0, errno
	})
	return int(n)
}

// fcntl runs f on file's descriptor, leaving it non-blocking (Fd would
// make it blocking).
func fcntl(t *testing.T, file *os.File, f func(fd uintptr) (uintptr, syscall.Errno)) {
	t.Helper()
	sc, err := file.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var errno syscall.Errno
	if err := sc.Control(func(fd uintptr) { _, errno = f(fd) }); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
}
