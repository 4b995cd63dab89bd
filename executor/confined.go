package executor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// confinedOutputLimit bounds what a hook or classifier command may print.
const confinedOutputLimit = 64 << 10

// confinedRun is the end of a short admin-configured command (a hook, auto mode's
// classifier) run as the session owner inside the session's confinement.
type confinedRun struct {
	stdout, stderr []byte
	exitCode       int
	timedOut       bool
}

var confinedSeq atomic.Uint64

// runConfined runs `bash -c command` confined as s's owner (read-only mounts when readOnly),
// with stdin on its standard input; ctx's deadline kills it with its cgroup.
func (h *Host) runConfined(ctx context.Context, s *session.Session, readOnly bool, prefix, command string, stdin []byte) (*confinedRun, error) {
	callID := fmt.Sprintf("%s-%d", prefix, confinedSeq.Add(1))
	spec := h.Spec(s, readOnly, callID, []string{"/bin/bash", "--noprofile", "--norc", "-c", command})
	return h.startConfined(ctx, spec, stdin)
}

func (h *Host) startConfined(ctx context.Context, spec *sandbox.Spec, stdin []byte) (*confinedRun, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	spec.Stdin, spec.Stdout, spec.Stderr = stdinR, outW, errW
	proc, err := h.sandbox.Start(ctx, spec)
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		return nil, errcode.Setup(fmt.Errorf("start confined command: %w", err))
	}
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		_, _ = stdinW.Write(stdin)
		stdinW.Close()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&stdout, io.LimitReader(outR, confinedOutputLimit))
		_, _ = io.Copy(io.Discard, outR)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&stderr, io.LimitReader(errR, confinedOutputLimit))
		_, _ = io.Copy(io.Discard, errR)
	}()
	res, werr := proc.Wait()
	// What the command wrote before it ended is still in the pipes: read it all, then close.
	// Closing at once lost a hook's stderr (its block reason) whenever the reader had not
	// run yet. A writer that outlived the command (its cgroup is gone, so none should) gets
	// a second.
	deadline := time.Now().Add(time.Second)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	_ = stdinW.SetWriteDeadline(deadline)
	wg.Wait()
	outR.Close()
	errR.Close()
	if werr != nil {
		return nil, werr
	}
	return &confinedRun{stdout: stdout.Bytes(), stderr: stderr.Bytes(), exitCode: res.ExitCode, timedOut: res.TimedOut || ctx.Err() != nil}, nil
}
