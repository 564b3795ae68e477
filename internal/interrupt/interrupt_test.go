package interrupt_test

import (
	"context"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/interrupt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
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
			if want := "interrupted by " + map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]; s.Error() != want {
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
