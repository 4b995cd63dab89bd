package main

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestInterrupt: Ctrl-C (SIGINT) or SIGTERM on `sbctl bash` ends the confined command it was
// running, and leaves no short-lived session behind; sbctl exits as the signal would have it.
func TestInterrupt(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, _ := userHome(t, "sbint")
	c := client.New(d.socket)
	defer c.Close()
	sessions := func() int {
		var l protocol.SessionList
		if err := c.Do(context.Background(), client.MethodGet, "/v1/sessions", nil, &l); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range l.Sessions {
			if s.Owner.UID == u.UID {
				n++
			}
		}
		return n
	}
	// interrupt starts sbctl bash with args as u, waits until its command runs, sends sig, and
	// returns how sbctl ended once the command is gone.
	interrupt := func(sig syscall.Signal, marker string, args ...string) *exec.ExitError {
		t.Helper()
		cmd := exec.Command(b.sbctl, append([]string{"--socket", d.socket, "bash"}, args...)...)
		asUser(t, cmd, u)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		running := func() bool {
			return exec.Command("pgrep", "-u", strconv.Itoa(int(u.UID)), "-f", "^sleep "+marker+"$").Run() == nil
		}
		for deadline := time.Now().Add(20 * time.Second); !running(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("the command did not start: %v", <-done)
			}
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("sbctl did not end on %v", sig)
		}
		for deadline := time.Now().Add(10 * time.Second); running(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the confined command outlived sbctl's %v", sig)
			}
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("sbctl ended with %v after %v", err, sig)
		}
		return ee
	}

	id := strings.TrimSpace(string(mustRun(t, u, b.sbctl, "--socket", d.socket, "session", "new", "--mode", "bypassPermissions", "--cwd", u.Home)))
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		ee := interrupt(sig, "61.5", "--session", id, "--", "sleep 61.5")
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("sbctl bash --session on %v: %v, want death by the signal", sig, ee)
		}
	}
	before := sessions()
	ee := interrupt(syscall.SIGINT, "62.5", "--mode", "bypassPermissions", "--", "sleep 62.5")
	if ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Errorf("sbctl bash in a short-lived session on SIGINT: %v, want exit %d", ee, 128+int(syscall.SIGINT))
	}
	if n := sessions(); n != before {
		t.Errorf("sessions of the user: %d after the interrupt, %d before: the short-lived one was left", n, before)
	}
}

// mustRun runs a command as u and returns its stdout.
func mustRun(t *testing.T, u testutil.User, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	asUser(t, cmd, u)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}
