package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/harness"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// daemonBin is the sandboxd built once for the package; empty when not root.
var daemonBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		// Not under /tmp: every confined child gets a private /tmp, and the daemon re-executes
		// its own binary inside the sandbox.
		dir, err := os.MkdirTemp("/var/tmp", "faults-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// Sessions of non-root owners re-execute it too.
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if daemonBin, err = harness.Build(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// start runs a daemon for t in a fresh directory; it is killed and its cgroup removed at the end.
func start(t *testing.T, configYAML func(dir string) string) *harness.Daemon {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := ""
	if configYAML != nil {
		cfg = harness.DefaultConfig(dir) + configYAML(dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := harness.Start(ctx, harness.Options{Bin: daemonBin, Dir: dir, ConfigYAML: cfg})
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log tail:\n%s", d.LogTail(3000))
		}
		d.Close()
	})
	return d
}

// workDir is a session cwd under the daemon's directory.
func workDir(t *testing.T, d *harness.Daemon) string {
	t.Helper()
	w := filepath.Join(d.Dir, "work")
	if err := os.MkdirAll(w, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}
