package interrupt_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/interrupt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			if sig == syscall.SIGHUP {
				hupNotIgnored(t)
			}
			ctx, stop := interrupt.Context(context.Background())
			defer stop()
			if _, ok := interrupt.Cause(ctx); ok {
				t.Fatal("a signal cause before any signal")
			}
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			<-ctx.Done()
			s, ok := interrupt.Cause(ctx)
			if !ok || s.Sig != sig || s.ExitCode() != 128+int(sig) {
				t.Fatalf("cause %v (%v), exit %d", s, ok, s.ExitCode())
			}
			if want := "interrupted by " + map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}[sig]; s.Error() != want {
				t.Fatalf("%q, want %q", s.Error(), want)
			}
		})
	}
}

func TestStopIsNoSignal(t *testing.T) {
	ctx, stop := interrupt.Context(context.Background())
	stop()
	<-ctx.Done()
	if s, ok := interrupt.Cause(ctx); ok {
		t.Fatalf("stopped, yet cause %v", s)
	}
}

// TestHangupIgnoredStaysIgnored: a process started with SIGHUP ignored
// (nohup) keeps ignoring it. The SIGHUP is sent before the SIGTERM, and
// Go hands pending signals on in ascending order (SIGHUP is 1), so a
// Context listening for it would end by it.
func TestHangupIgnoredStaysIgnored(t *testing.T) {
	signal.Ignore(syscall.SIGHUP)
	defer signal.Reset(syscall.SIGHUP)
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	<-ctx.Done()
	if s, ok := interrupt.Cause(ctx); !ok || s.Sig != syscall.SIGTERM {
		t.Fatalf("cause %v (%v), want SIGTERM: the ignored SIGHUP was caught", s, ok)
	}
	if !signal.Ignored(syscall.SIGHUP) {
		t.Fatal("SIGHUP no longer ignored")
	}
}

// hupNotIgnored has SIGHUP caught, not ignored, until t ends, as in a
// process started from a terminal: the tests may run under nohup or a
// tool that ignores SIGHUP, which Context then leaves alone.
func hupNotIgnored(t *testing.T) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(c) })
}
