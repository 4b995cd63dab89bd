package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// interruptible returns ctx cancelled by SIGINT or SIGTERM, for a command with something to
// undo before it exits; stop ends the catching and returns the signal that came, or 0.
//
// sbctl catches signals nowhere else: relaying them costs a thread of the runtime's from the
// moment they are caught, which every start would pay (about 0.7 ms of a 2.5 ms `sbctl
// status` here), and a command with nothing to undo does best to die of the signal.
func interruptible(ctx context.Context) (context.Context, func() syscall.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var got os.Signal
	done := make(chan struct{})
	go func() {
		defer close(done)
		if s, ok := <-ch; ok {
			got = s
			cancel()
		}
	}()
	return ctx, func() syscall.Signal {
		signal.Stop(ch) // no send on ch after it returns
		close(ch)
		<-done
		cancel()
		if s, ok := got.(syscall.Signal); ok {
			return s
		}
		return 0
	}
}
