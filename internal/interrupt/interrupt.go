// Package interrupt ends a command's context when it is interrupted
// (SIGINT) or told to stop (SIGTERM), with the signal as the context's
// cause, so that the command can say which and exit 128+N, as shells
// expect. The p2pmsg command and the Testground runner (tgrun) share it.
package interrupt

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// Signal is the cause of a context ended by a signal.
type Signal struct{ Sig syscall.Signal }

func (e Signal) Error() string {
	switch e.Sig {
	case syscall.SIGINT:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return "interrupted by " + e.Sig.String()
}

// ExitCode is the exit status of a command the signal cut short: 128+N.
func (e Signal) ExitCode() int { return 128 + int(e.Sig) }

// Context returns ctx ended, with a Signal as its cause, by SIGINT or
// SIGTERM; its CancelFunc stops listening for them.
func Context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(Signal{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// Cause returns the signal that ended ctx, if one did.
func Cause(ctx context.Context) (Signal, bool) {
	var s Signal
	ok := errors.As(context.Cause(ctx), &s)
	return s, ok
}
