package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

func TestCgroupLayoutMatchesMode(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 999.501 & sleep 999.502")
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
	noHostProcess("999.501")(t, nil, nil, "")
	if err := cg.remove(); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveTreeThawsAFrozenCall: a daemon that died between freezing a call's cgroup and
// thawing it (freezeKill) left the call frozen; the next daemon's reaping (removeTree) still
// kills it and removes the cgroup. On v1, thawing only the root leaves a cgroup that froze
// itself frozen, and its SIGKILLed tasks with it.
func TestRemoveTreeThawsAFrozenCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	if s.cg.v2 {
		t.Skip("cgroup v2: cgroup.kill kills frozen tasks, nothing is left frozen")
	}
	cg, err := s.cg.newCgroup("frozen", "call", s.limits)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sleep", "999.401")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(cg.dirs["freezer"], "freezer.state")
	t.Cleanup(func() { // whatever the outcome, leave nothing frozen on the machine
		_ = os.WriteFile(state, []byte("THAWED"), 0)
		_ = cmd.Process.Kill()
	})
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if err := cg.addProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(state, "FROZEN"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(state)
		if string(b) == "FROZEN\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("freezer state %q, want FROZEN", b)
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.cg.removeTree(""); err != nil {
		t.Errorf("reaping: %v", err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the frozen call's task is still there 5 s after the reaping")
	}
	for c, d := range cg.dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s cgroup %s not removed: %v", c, d, err)
		}
	}
}

// TestNewCgroupSeesAHalfRemovedRun: a call name comes again while its last run's cgroup is
// being removed (a session's restarted worker; the janitor removes one hierarchy after the
// other). A create that saw only some dirs gone and reused the rest lost them to that removal
// (the attach then failed); it must report the name taken, in whichever hierarchy is left, so
// the caller flushes the janitor and tries again.
func TestNewCgroupSeesAHalfRemovedRun(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for c := range s.cg.dirs {
		old, err := s.cg.newCgroup("half", "call", s.limits)
		if err != nil {
			t.Fatal(err)
		}
		// Every hierarchy removed but c.
		for k, d := range old.dirs {
			if k != c {
				if err := unix.Rmdir(d); err != nil {
					t.Fatal(err)
				}
			}
		}
		if cg, err := s.cg.newCgroup("half", "call", s.limits); !errors.Is(err, os.ErrExist) {
			if cg != nil {
				_ = cg.remove()
			}
			t.Errorf("only the %s dir left: create = %v, want os.ErrExist", c, err)
		}
		if err := unix.Rmdir(old.dirs[c]); err != nil {
			t.Fatal(err)
		}
		cg, err := s.cg.newCgroup("half", "call", s.limits)
		if err != nil {
			t.Fatalf("all removed: %v", err)
		}
		if err := cg.remove(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLayoutHolds: a /proc/PID/cgroup text is inside the subtree when any controller sandboxd
// uses (v1), or the unified entry (v2), is the root or below it; a sibling that shares the
// root's name as a prefix is not.
func TestLayoutHolds(t *testing.T) {
	v1 := &cgroupLayout{rel: map[cgroup1.Name]string{cgroup1.Pids: "/sandboxd", cgroup1.Memory: "/system.slice/sb.service/sandboxd"}}
	v2 := &cgroupLayout{v2: true, rel2: "/system.slice/sb.service/sandboxd"}
	for _, tc := range []struct {
		l    *cgroupLayout
		text string
		want bool
	}{
		{v1, "8:pids:/sandboxd/user-1000/s_x/c1\n7:memory:/\n", true},
		{v1, "8:pids:/sandboxd\n", true},
		{v1, "7:memory:/system.slice/sb.service/sandboxd/user-1000/pool-3\n", true},
		{v1, "8:pids:/sandboxd-other/x\n7:memory:/user.slice\n", false},
		{v1, "9:name=systemd:/sandboxd/x\n0::/sandboxd/x\n", false},
		{v1, "", false},
		{v2, "0::/system.slice/sb.service/sandboxd/user-1000/s_x/c1\n", true},
		{v2, "0::/system.slice/sb.service/daemon\n", false},
		{v2, "0::/system.slice/sb.service/sandboxd2\n", false},
		{v2, "8:pids:/system.slice/sb.service/sandboxd/x\n", false},
	} {
		if got := tc.l.holds([]byte(tc.text)); got != tc.want {
			t.Errorf("v2=%v %q: holds %v, want %v", tc.l.v2, tc.text, got, tc.want)
		}
	}
}
