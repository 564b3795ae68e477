// Package interrupt ends a command's context when it is interrupted
// (SIGINT), told to stop (SIGTERM) or loses its terminal (SIGHUP), with
// the signal as the context's cause, so that the command can say which,
// finish as it would when stopped (drain, save what it learnt) and exit
// 128+N, as shells expect. The p2pmsg command and the Testground runner
// (tgrun) share it.
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
	case syscall.SIGHUP:
		return "interrupted by SIGHUP"
	}
	return "interrupted by " + e.Sig.String()
}

// ExitCode is the exit status of a command the signal cut short: 128+N.
func (e Signal) ExitCode() int { return 128 + int(e.Sig) }

// Context returns ctx ended, with a Signal as its cause, by SIGINT,
// SIGTERM or SIGHUP; its CancelFunc stops listening for them. SIGHUP is
// left alone when the process started with it ignored (nohup), since
// listening for a signal undoes its being ignored.
func Context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := make(chan os.Signal, 1)
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	signal.Notify(ch, sigs...)
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
