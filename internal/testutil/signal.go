package testutil

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
)

// Interrupt starts cmd, sends it sig once a line of its stderr satisfies
// ready (which may keep state across lines), and returns its exit code
// and the last line it wrote to stderr. cmd is killed when the test ends
// if it is still running.
func Interrupt(t testing.TB, cmd *exec.Cmd, sig syscall.Signal, ready func(line string) bool) (code int, last string) {
	t.Helper()
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() && !ready(sc.Text()) {
	}
	cmd.Process.Signal(sig)
	for sc.Scan() {
		last = sc.Text()
	}
	cmd.Wait()
	return cmd.ProcessState.ExitCode(), last
}
