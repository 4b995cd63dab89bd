package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

func TestCgroupLayoutMatchesMode(t *testing.T) {
	s := newTestSandbox(t, Config{})
	mode := cgroups.Mode()
	t.Logf("cgroup mode %v, v2 layout %v, dirs %v", mode, s.cg.v2, s.cg.dirs)
	if (mode == cgroups.Unified) != s.cg.v2 {
		t.Fatalf("mode %v but v2 layout %v", mode, s.cg.v2)
	}
}

// TestCgroupV2Kill exercises the v2 paths (CLONE_INTO_CGROUP, cgroup.kill, removal) on any
// cgroup2 mount, including a hybrid host's controller-less /sys/fs/cgroup/unified.
func TestCgroupV2Kill(t *testing.T) {
	testutil.RequireRoot(t)
	mounts, err := cgroupfs.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	own, err := cgroupfs.Own()
	if err != nil {
		t.Fatal(err)
	}
	mnt, ok := mounts[""]
	if !ok {
		t.Skip("no cgroup2 mount on this host")
	}
	dir := filepath.Join(mnt, own[""], "sandboxd-test-v2kill")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cg := &cgroup{v2: true, dirs: map[string]string{"": dir}, fd: fd}
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 999.301 & sleep 999.302")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(cgroupfs.ProcsUnder(dir)) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(cgroupfs.ProcsUnder(dir)); n < 3 {
		t.Fatalf("%d processes in the cgroup, want 3 (born inside)", n)
	}
	if err := cg.kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for !cg.empty() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !cg.empty() {
		t.Fatal("processes survived cgroup.kill")
	}
	noHostProcess("999.301")(t, nil, nil, "")
	if err := cg.remove(); err != nil {
		t.Fatal(err)
	}
}
