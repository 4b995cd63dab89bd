package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// lowNofileEnv marks the re-run of TestLowOpenFilesLimit under the low limit.
const lowNofileEnv = "SANDBOXD_TEST_LOW_NOFILE"

// A daemon started under an open-files limit below what its children need (ulimit -n 256,
// sandbox.open_files_max 4096) either raises its limit and runs calls, or, without
// CAP_SYS_RESOURCE to raise it, refuses to start saying so: never a daemon that serves and
// fails every call at setting up its child. The test binary re-runs itself under the limit:
// without the capability a lowered hard limit cannot be restored for the other tests.
func TestLowOpenFilesLimit(t *testing.T) {
	testutil.RequireRoot(t)
	if os.Getenv(lowNofileEnv) == "" {
		cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" -test.run='^TestLowOpenFilesLimit$' -test.v -test.count=1`, os.Args[0])
		cmd.Env = append(os.Environ(), lowNofileEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestLowOpenFilesLimit") {
			t.Fatalf("under ulimit -n 256: %v\n%s", err, out)
		}
		return
	}
	probe := unix.Rlimit{Cur: 4096, Max: 4096}
	canRaise := unix.Setrlimit(unix.RLIMIT_NOFILE, &probe) == nil
	if canRaise {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 256, Max: 256}); err != nil {
			t.Fatal(err)
		}
		td := startDaemon(t, "")
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, testHostDir(t)))
		if _, res := td.call(t, s.ID, "Bash", `{"command":"ulimit -n"}`); res.IsError || len(res.Content) == 0 || strings.TrimSpace(res.Content[0].Text) != "4096" {
			t.Errorf("a call under a daemon started with ulimit -n 256: %+v", res)
		}
		return
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("sandbox:\n  cgroup_name: sandboxd-test-low-nofile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Socket: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), ConfigPath: cfg, ConfigRequired: true}, zaptest.NewLogger(t))
	if err == nil {
		d.shutdown()
		t.Fatal("a daemon started under ulimit -n 256, which it cannot raise")
	}
	if !strings.Contains(err.Error(), "LimitNOFILE") {
		t.Errorf("the refusal does not say what to change: %v", err)
	}
}
