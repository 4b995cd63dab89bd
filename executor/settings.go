package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// settingsFileMax bounds a settings file read back for an update.
const settingsFileMax = 1 << 20

// UpdateSettingsAs rewrites one settings file as the session owner: update gets the current
// content (nil when the file does not exist) and returns the new one, written only over the
// content it was given.
//
// Every child of the session, its long-lived worker included, has the settings directories
// (.sandboxd/, ~/.config/sandboxd/) read-only: an agent must never widen its own rules. So
// this write gets a worker of its own, started for it and stopped after it: the daemon's
// binary, serving only the read and the write the daemon sends it, confined as the owner with
// base (the session root or the owner's home) as its only writable directory and every
// protected path under it read-only except the one directory that holds file. Nothing of the
// agent runs in it, and the owner's own permissions still decide whether the write succeeds:
// never root's.
//
// WARNING: widens the write access of one child beyond the session's rules; rerun
// TestApprovalRememberWritesSettings as root after changing.
func (h *Host) UpdateSettingsAs(ctx context.Context, s *session.Session, base, file string, update func(old []byte) ([]byte, error)) error {
	if h.sandbox == nil {
		return errcode.Msg(errcode.Unavailable, "the daemon has no sandbox configured")
	}
	if !filepath.IsAbs(file) || !insideDir(file, base) || file == base {
		return errcode.New(errcode.Validation, fmt.Errorf("settings file %s is not under %s", file, base))
	}
	if h.sandbox.MadeByRunningCall(file, s.Owner.UID) {
		// A running call's, about to be moved aside, or missing at that call's start, where
		// what this wrote would be moved aside too: never the base of the user's rules.
		return errcode.New(errcode.Conflict, fmt.Errorf("%s is a protected path a running call guards: it was missing when the call started, and what appears there is the call's, moved aside; try again once the call has ended", file))
	}
	path := h.tools().WorkerPath
	if path == "" {
		path = "/proc/self/exe"
	}
	spec := h.Spec(s, false, "settings", []string{path, worker.Arg})
	spec.Undumpable = true // as the file worker: it answers the daemon
	// What it makes no one else may write, whatever the owner's umask (002 is common): a
	// settings file or dir others may write is read as an untrusted project's, and the rule
	// remembered in it would not hold.
	spec.Umask |= 0o022
	spec.Dir = base
	spec.WritableDirs = []string{base}
	spec.ProtectedPaths = nil
	for _, p := range sandbox.ProtectedCandidates([]string{base}, base, s.Owner.Home, s.HomeLeadsTo()) {
		if !insideDir(file, p) {
			spec.ProtectedPaths = append(spec.ProtectedPaths, p)
		}
	}
	var ro []string
	if rs := s.RuleSet(); rs != nil {
		ro = rs.KernelPaths(permission.Deny).ReadOnly
	}
	spec.ProtectedPatterns = append(sandbox.ProtectedPatterns([]string{base}, base), ro...)

	daemonEnd, childEnd, err := worker.Socketpair()
	if err != nil {
		return errcode.New(errcode.SandboxSetup, err)
	}
	spec.ExtraFiles = []*os.File{childEnd}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	proc, err := h.sandbox.Start(wctx, spec)
	childEnd.Close()
	if err != nil {
		daemonEnd.Close()
		return errcode.New(errcode.SandboxSetup, fmt.Errorf("start the settings writer: %w", err))
	}
	client, err := worker.NewClient(daemonEnd)
	if err != nil {
		_ = proc.Kill("worker_setup")
		_, _ = proc.Wait()
		return errcode.New(errcode.SandboxSetup, err)
	}
	werr := func() error {
		old, err := client.ReadFile(ctx, file, settingsFileMax)
		var expect *worker.Expect
		switch {
		case err == nil:
			expect = &worker.Expect{SHA256: sha256hex(old)}
		case errcode.Of(err) == errcode.ErrnoENOENT || errors.Is(err, os.ErrNotExist):
			old = nil
		default:
			return fmt.Errorf("read %s as uid %d: %w", file, s.Owner.UID, err)
		}
		next, err := update(old)
		if err != nil {
			return err
		}
		if _, err := client.Write(ctx, file, next, expect); err != nil {
			return fmt.Errorf("write %s as uid %d: %w", file, s.Owner.UID, err)
		}
		return nil
	}()
	client.Close()
	if _, err := proc.Wait(); err != nil && werr == nil {
		werr = fmt.Errorf("settings writer: %w", err)
	}
	return werr
}
