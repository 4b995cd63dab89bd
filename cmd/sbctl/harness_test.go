package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// These tests run the real binaries: sandboxd as a subprocess on a socket and state directory
// of its own under /var/tmp (every child has a private /tmp, and a throwaway user must reach
// both), and sbctl and sbctl-full as the agents run them.

// bins are the binaries built once per test process.
type bins struct {
	dir, sandboxd, sbctl, full string
}

var (
	// buildMu makes one build at a time (the machine's cores are shared) and guards what
	// follows.
	buildMu  sync.Mutex
	binDir   string
	buildErr = map[string]error{} // by output path: built (nil) or failed
)

// buildBin builds package pkg as binDir/name once per test process. prebuilt, when set, is
// copied instead (so that every user can run it from the 0755 directory).
func buildBin(tb testing.TB, name, pkg, prebuilt string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if binDir == "" {
		dir, err := os.MkdirTemp("/var/tmp", "sbctl-test-bin-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			tb.Fatal(err)
		}
		binDir = dir
	}
	out := filepath.Join(binDir, name)
	err, done := buildErr[out]
	if !done {
		if prebuilt != "" {
			var data []byte
			if data, err = os.ReadFile(prebuilt); err == nil {
				err = os.WriteFile(out, data, 0o755)
			}
		} else if b, e := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); e != nil {
			err = fmt.Errorf("build %s: %v\n%s", pkg, e, b)
		}
		buildErr[out] = err
	}
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// buildBins builds the daemon and both sbctl binaries.
func buildBins(tb testing.TB) bins {
	tb.Helper()
	testutil.RequireRoot(tb)
	// SANDBOXD_BIN names a daemon built beforehand (e.g. while the tree's daemon packages are
	// mid-change).
	b := buildClientBins(tb)
	b.sandboxd = buildBin(tb, "sandboxd", "../sandboxd", os.Getenv("SANDBOXD_BIN"))
	return b
}

// buildClientBins builds sbctl and sbctl-full only, for the commands that need no daemon.
func buildClientBins(tb testing.TB) bins {
	tb.Helper()
	sbctl := buildBin(tb, "sbctl", ".", "")
	full := buildBin(tb, "sbctl-full", "./full", "")
	return bins{dir: binDir, sbctl: sbctl, full: full}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// daemon is a sandboxd subprocess.
type daemon struct {
	dir, socket string
	cmd         *exec.Cmd
}

func startDaemon(tb testing.TB, b bins, configYAML string) *daemon {
	tb.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "sbctl-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// Its own cgroup subtree: a daemon reaps its subtree at start, and test packages run at once.
	name := fmt.Sprintf("sandboxd-test-sbctl-%d-%s", os.Getpid(), strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name()))
	cfg := filepath.Join(dir, "sandboxd.yaml")
	if strings.Contains(configYAML, "sandbox:\n") {
		configYAML = strings.Replace(configYAML, "sandbox:\n", "sandbox:\n  cgroup_name: "+name+"\n", 1)
	} else {
		configYAML += "\nsandbox:\n  cgroup_name: " + name + "\n"
	}
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	d := &daemon{dir: dir, socket: filepath.Join(dir, "sandboxd.sock")}
	d.cmd = exec.Command(b.sandboxd, "--socket", d.socket, "--state-dir", filepath.Join(dir, "state"), "--config", cfg, "--log-level", "warn")
	var logs bytes.Buffer
	d.cmd.Stdout, d.cmd.Stderr = &logs, &logs
	if err := d.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
		if tb.Failed() {
			tb.Logf("daemon log:\n%s", logs.String())
		}
	})
	c := client.New(d.socket)
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			return d
		}
		if time.Now().After(deadline) {
			tb.Fatalf("daemon did not come up: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// asUser makes cmd run as u with the groups a login gives, in its home.
func asUser(tb testing.TB, cmd *exec.Cmd, u testutil.User) {
	tb.Helper()
	out, err := exec.Command("id", "-G", u.Name).Output()
	if err != nil {
		tb.Fatalf("id -G %s: %v", u.Name, err)
	}
	var groups []uint32
	for _, f := range strings.Fields(string(out)) {
		var g uint32
		fmt.Sscan(f, &g)
		groups = append(groups, g)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: groups}}
	cmd.Dir = u.Home
}

// ownedDirs makes each dir (in order, so a child may follow its parent) owned by u.
func ownedDirs(tb testing.TB, u testutil.User, dirs ...string) {
	tb.Helper()
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
			tb.Fatal(err)
		}
	}
}

// userHome makes a throwaway user whose home is under /var/tmp (not the children's private
// /tmp), with a runtime dir of its own for the hook's state.
func userHome(tb testing.TB, prefix string) (testutil.User, string) {
	tb.Helper()
	u := testutil.CreateUser(tb, prefix)
	home, err := os.MkdirTemp("/var/tmp", "sbctl-home-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(home) })
	rt := filepath.Join(home, ".run")
	if err := os.Mkdir(rt, 0o700); err != nil {
		tb.Fatal(err)
	}
	for _, p := range []string{home, rt} {
		if err := os.Chown(p, int(u.UID), int(u.GID)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Chmod(home, 0o755); err != nil {
		tb.Fatal(err)
	}
	u.Home = home
	return u, rt
}
