package sandbox

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

func sleepSpec(call string) *Spec {
	return &Spec{Path: "/bin/sleep", Args: []string{"30"}, UID: nobody, GID: nobody, Dir: "/",
		Session: "life", Call: call}
}

func cgroupGone(t *testing.T, s *Sandbox, rel string) {
	t.Helper()
	for c, d := range s.cg.dirs {
		if _, err := os.Stat(filepath.Join(d, rel)); err == nil {
			t.Errorf("%s cgroup %s still exists", c, rel)
		}
	}
}

// callCgroupGone checks that p's own cgroup (under the session, or pool/<n> for a pooled
// call) is removed; Wait leaves the removal to the janitor, so it may take a moment.
func callCgroupGone(t *testing.T, p *Process) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c, d := range p.cg.dirs {
		for {
			_, err := os.Stat(d)
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s cgroup %s still exists", c, d)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// subtreeLeft lists the cgroup directories under the sandbox's root, in every hierarchy.
func subtreeLeft(s *Sandbox) []string {
	var left []string
	for _, d := range s.cg.dirs {
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() && path != d {
				left = append(left, path)
			}
			return nil
		})
	}
	return left
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})

	t.Run("kill reason", func(t *testing.T) {
		p, err := s.Start(context.Background(), sleepSpec("kill"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Pid() <= 0 {
			t.Fatalf("pid %d", p.Pid())
		}
		if err := p.Kill("user_abort"); err != nil {
			t.Fatal(err)
		}
		res, err := p.Wait()
		if err != nil || res.KilledBy != "user_abort" || res.Signal != "killed" || res.ExitCode != -1 {
			t.Fatalf("res=%+v err=%v", res, err)
		}
		cgroupGone(t, s, "life/kill")
		callCgroupGone(t, p)
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := s.Start(ctx, sleepSpec("cancel"))
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(50*time.Millisecond, cancel)
		res, err := p.Wait()
		if err != nil || res.KilledBy != "cancelled" || res.TimedOut {
			t.Fatalf("res=%+v err=%v", res, err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		p, err := s.Start(ctxTimeout(t, 100*time.Millisecond), sleepSpec("timeout"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Wait()
		if err != nil || !res.TimedOut || res.KilledBy != "timeout" || res.Duration > 5*time.Second {
			t.Fatalf("res=%+v err=%v", res, err)
		}
	})

	t.Run("kill session", func(t *testing.T) {
		p, err := s.Start(context.Background(), sleepSpec("sess"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.KillSession("life", "session_deleted"); err != nil {
			t.Fatal(err)
		}
		res, err := p.Wait()
		if err != nil || res.KilledBy != "session_deleted" {
			t.Fatalf("res=%+v err=%v", res, err)
		}
		cgroupGone(t, s, "life")
		callCgroupGone(t, p)
	})

	t.Run("stats", func(t *testing.T) {
		res, _, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/sh",
			Args: []string{"-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"},
			UID:  nobody, GID: nobody, Dir: "/", Session: "life", Call: "stats"})
		if err != nil || res.ExitCode != 0 || res.CPUTimeMs <= 0 || res.PeakMemoryBytes <= 0 || res.Duration <= 0 {
			t.Fatalf("res=%+v err=%v", res, err)
		}
	})
}

// TestReapLeftovers: New kills and removes what a crashed daemon left under its subtree.
func TestReapLeftovers(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	p, err := s.Start(context.Background(), sleepSpec("left"))
	if err != nil {
		t.Fatal(err)
	}
	// A second daemon instance with the same root plays the restarted daemon. The first one's
	// filler must be idle: a live daemon's filler would race the reaping, which a real restart
	// (one daemon per cgroup name, daemon/run.go) never sees. A take that left a spare starts
	// no refill while its call runs.
	waitPoolReady(t, s, poolMin-1)
	s2, err := New(s.cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	res, err := p.Wait()
	if err != nil || res.Signal != "killed" {
		t.Fatalf("leftover not killed: res=%+v err=%v", res, err)
	}
	cgroupGone(t, s, "life")
	callCgroupGone(t, p)
}

func TestClose(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	p, err := s.Start(context.Background(), sleepSpec("close"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.KilledBy != "daemon_closed" {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	// The last call of a closed sandbox takes its cgroup, and the pool's parent, with it.
	callCgroupGone(t, p)
	cgroupGone(t, s, filepath.Join("user-65534", poolDir))
	if _, err := s.Start(context.Background(), sleepSpec("after")); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// TestDaemonCrash: when the daemon dies (SIGKILL, no cleanup), its calls die with it
// (PR_SET_PDEATHSIG re-armed after the uid change, then the PID namespace goes), and the next
// daemon start reaps the cgroups left behind.
func TestDaemonCrash(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{daemonEnv + "=" + s.cfg.CgroupRoot}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "started ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	// A pooled call, a call started for itself, then the daemon's idle pooled inits.
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "started ")) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	if len(pids) < 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q: want a pooled call, a cold call and idle pooled inits", line)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("process %d (of %v) outlived its daemon", pid, pids)
		}
	}
	noHostProcess("999.201")(t, nil, nil, "")
	// The restarted daemon reaps the leftover cgroups; closed, it leaves none of its own.
	s2, err := New(s.cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	cgroupGone(t, s, "crash")
	if left := subtreeLeft(s); len(left) > 0 {
		t.Errorf("cgroups left after the restart and close: %v", left)
	}
}
