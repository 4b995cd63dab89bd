package sandbox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func onlyZygote(t *testing.T, s *Sandbox, session string) *zygote {
	t.Helper()
	s.zmu.Lock()
	defer s.zmu.Unlock()
	var found *zygote
	for _, z := range s.zygotes {
		if z.session == session {
			if found != nil {
				t.Fatal("more than one zygote for the session")
			}
			found = z
		}
	}
	if found == nil {
		t.Fatal("no zygote for the session")
	}
	return found
}

// TestZygote: calls of one session share a zygote, yet a call sees, signals and reaches neither
// its sibling calls nor the zygote; /tmp is per session; the zygote holds no call's fds; a dead
// zygote reports its calls killed and the next call gets a new one.
func TestZygote(t *testing.T) {
	s := newTestSandbox(t, Config{})
	if !s.zygoteEligible() {
		t.Skip("landlock ABI < 6: every call takes a per-call init")
	}
	long, err := s.Start(context.Background(), &Spec{Path: "/bin/sleep", Args: []string{"999.401"},
		UID: nobody, GID: nobody, Dir: "/", Session: "zy", Call: "long"})
	if err != nil {
		t.Fatal(err)
	}
	z := onlyZygote(t, s, "zy")
	if long.cmd != nil {
		t.Fatal("call did not go through the zygote")
	}

	t.Run("siblings", func(t *testing.T) {
		res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/sh",
			Args: []string{"-c", "ls /proc | grep '^[0-9]' | wc -l; cat /proc/1/status 2>&1 | head -1; " +
				"pgrep -c sleep; kill -9 $(pgrep sleep) 1 2>&1; echo tmp > /tmp/zy-shared; echo done"},
			Env: []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody, Dir: "/", Session: "zy", Call: "sib"})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out, "\n")
		if n, _ := strconv.Atoi(strings.TrimSpace(lines[0])); n < 1 || n > 4 {
			t.Errorf("sees %s processes:\n%s", lines[0], out)
		}
		if strings.Contains(out, "Name:") || !strings.Contains(out, "\n0\n") || !strings.Contains(out, "done") {
			t.Errorf("sibling or zygote visible (res %+v):\n%s", res, out)
		}
		if onlyZygote(t, s, "zy") != z {
			t.Error("second call got another zygote")
		}
		res, out, err = run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/cat", Args: []string{"/tmp/zy-shared"},
			UID: nobody, GID: nobody, Dir: "/", Session: "zy", Call: "tmp"})
		if err != nil || res.ExitCode != 0 || out != "tmp\n" {
			t.Errorf("/tmp not per session: %+v %q %v", res, out, err)
		}
	})

	t.Run("zygote fds", func(t *testing.T) {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", z.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var fds []string
		for _, e := range ents {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", z.cmd.Process.Pid, e.Name()))
			fds = append(fds, e.Name()+"->"+target)
		}
		// stdio (/dev/null), the signalfd, the control socket: nothing of a call.
		if len(fds) != 5 {
			t.Errorf("zygote fds: %v", fds)
		}
	})

	t.Run("death", func(t *testing.T) {
		z.kill()
		res, err := long.Wait()
		if err != nil || res.Signal != "killed" || res.ExitCode != -1 {
			t.Fatalf("res=%+v err=%v", res, err)
		}
		noHostProcess("999.401")(t, nil, nil, "")
		<-z.done
		res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/echo", Args: []string{"again"},
			UID: nobody, GID: nobody, Dir: "/", Session: "zy", Call: "again"})
		if err != nil || res.ExitCode != 0 || out != "again\n" {
			t.Fatalf("after zygote death: %+v %q %v", res, out, err)
		}
		if onlyZygote(t, s, "zy") == z {
			t.Error("dead zygote reused")
		}
	})

	t.Run("reserved session name", func(t *testing.T) {
		_, err := s.Start(context.Background(), &Spec{Path: "/bin/true", Session: zygoteCgroupPrefix + "-1", Call: "c"})
		if err == nil {
			t.Fatal("a session took a zygote's cgroup name")
		}
	})

	t.Run("kill session kills zygote", func(t *testing.T) {
		z := onlyZygote(t, s, "zy")
		if err := s.KillSession("zy"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-z.done:
		case <-time.After(5 * time.Second):
			t.Fatal("zygote outlived its session")
		}
		cgroupGone(t, s, "zy")
		cgroupGone(t, s, z.cg.dirs[keyOf(z.cg.dirs)][len(s.cg.dirs[keyOf(z.cg.dirs)])+1:])
	})
}

// TestEscapePerCallInit runs the escape suite's confinement once more through a per-call init
// (what a session without a usable zygote gets) for the cases about namespaces and /tmp.
func TestEscapePerCallInit(t *testing.T) {
	s := newTestSandbox(t, Config{})
	s.noZygote = true
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/sh",
		Args: []string{"-c", "ls /proc | grep -c '^[0-9]'; echo x > /tmp/f && echo wrote; grep -c Seccomp:.2 /proc/self/status"},
		Env:  []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody, Dir: "/", Session: "pci", Call: "c"})
	if err != nil || res.ExitCode != 0 || !strings.Contains(out, "wrote\n1\n") {
		t.Fatalf("res=%+v err=%v out=%q", res, err, out)
	}
}

func keyOf(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
