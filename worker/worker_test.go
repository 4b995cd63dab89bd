package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if IsWorker() {
		Main()
	}
	goleak.VerifyTestMain(m)
}

// nobody is the unprivileged uid the tests run workers as, never root.
const nobody = 65534

// startWorker runs this test binary as a worker. As root it drops to nobody (as the daemon
// drops to the caller); otherwise it runs as the current user.
func startWorker(t testing.TB) *Client {
	t.Helper()
	daemon, child, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", Arg)
	cmd.ExtraFiles = []*os.File{child}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	c, err := NewClient(daemon)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// ownedDir is a temp dir the worker's user owns.
func ownedDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// writeOwned writes a file owned by the worker's user.
func writeOwned(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.Chown(filepath.Dir(path), nobody, nobody)
		if err := os.Chown(path, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}
