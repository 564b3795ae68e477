package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runRefused runs a lab command that must be refused before it measures
// anything. Were the value taken for the flag's default instead, the
// command would run for minutes; it is stopped after a while, and the
// test says it ran.
func runRefused(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary_, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v was not refused: it ran for a minute (stderr %q)", args, stderr.Bytes())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running p2pmsg: %v", err)
	}
	return result{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: cmd.ProcessState.ExitCode()}
}

// A lab flag given a value its help does not allow (zero where the
// command needs a positive count, rate or duration; a shape of no
// senders) is a wrong command line: exit 2 and one line naming the flag,
// not the flag's default taken silently and a run of minutes.
func TestLabRefusesZeroValues(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "swarm", "--peers", "0"},
		{"lab", "swarm", "--publishers", "0"},
		{"lab", "swarm", "--rate", "0"},
		{"lab", "swarm", "--duration", "0s"},
		{"lab", "swarm", "--targets", "0"},
		{"lab", "swarm", "--size", "0"},
		{"lab", "swarm", "--degree", "0"},
		{"lab", "swarm", "--relay-fraction", "0"},
		{"lab", "swarm", "--relays", "0"},
		{"lab", "swarm", "--churn", "0"},
		{"lab", "swarm", "--settle", "0s"},
		{"lab", "swarm", "--settle", "-1s"},
		{"lab", "rate", "--messages", "0"},
		{"lab", "rate", "--shapes", "0x1"},
		{"lab", "grid", "--slow-factor", "0"},
		{"lab", "grid", "--max-message", "0s"},
	} {
		r := runRefused(t, args...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
		if flag := args[2]; !strings.Contains(string(r.stderr), flag) {
			t.Errorf("%v: the error does not name %s: %s", args, flag, r.stderr)
		}
	}
}
