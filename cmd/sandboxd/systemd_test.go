package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestUnderSystemd runs the units as a host would: systemd as PID 1 (in fresh pid, mount,
// cgroup, uts and ipc namespaces on this machine's root file system), the socket and service
// units of systemd/ as runtime units with ExecStart pointed at this build, and a throwaway
// user calling through the socket. It checks what systemd-analyze verify cannot: that socket
// activation starts the daemon, Type=notify makes it active, a call runs confined under the
// unit's hardening and sandbox (and writes its file), a reload keeps the service running and a
// stop ends it cleanly.
func TestUnderSystemd(t *testing.T) {
	if testing.Short() {
		t.Skip("boots systemd; skipped with -short")
	}
	testutil.RequireRoot(t)
	pid1 := ""
	for _, p := range []string{"/lib/systemd/systemd", "/usr/lib/systemd/systemd"} {
		if _, err := os.Stat(p); err == nil {
			pid1 = p
			break
		}
	}
	for _, tool := range []string{"unshare", "nsenter", "setpriv", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: cannot boot systemd here", tool)
		}
	}
	if pid1 == "" {
		t.Skip("systemd is not installed (Debian: apt-get install systemd): the units are not run")
	}
	if _, err := os.Stat("/sys/fs/cgroup/systemd"); err != nil {
		// The boot below mounts the hybrid layout this host has; a cgroup v2-only host would
		// mount cgroup2 alone.
		t.Skip("not a hybrid cgroup host: this test mounts the v1 hierarchies for systemd")
	}

	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-systemd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, pkg := range map[string]string{"sandboxd": ".", "sbctl": "../sbctl"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	units := filepath.Join(dir, "units")
	masks := filepath.Join(dir, "masks")
	for _, d := range []string{units, masks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"sandboxd.service", "sandboxd.socket"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("/usr/bin/sandboxd"), []byte(filepath.Join(dir, "sandboxd")))
		if err := os.WriteFile(filepath.Join(units, u), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := "[Unit]\nDescription=sandboxd under systemd (test)\nRequires=sandboxd.socket\nAfter=sandboxd.socket\n"
	if err := os.WriteFile(filepath.Join(units, "sbtest.target"), []byte(target), 0o644); err != nil {
		t.Fatal(err)
	}
	// The boot shares this host's kernel and file system: what would change the host (sysctls,
	// modules, users, tmpfiles, utmp, the persistent journal, timers that run apt) is masked.
	for _, u := range []string{"systemd-sysctl.service", "systemd-modules-load.service", "systemd-sysusers.service",
		"systemd-tmpfiles-setup.service", "systemd-tmpfiles-setup-dev.service", "systemd-journal-flush.service",
		"systemd-update-utmp.service", "timers.target", "getty.target", "console-getty.service"} {
		if err := os.Symlink("/dev/null", filepath.Join(masks, u)); err != nil {
			t.Fatal(err)
		}
	}
	// The state and configuration directories the unit names are bound to ones of this test,
	// so the host's are neither used nor changed (made, empty, only if missing; removed after).
	state, conf := filepath.Join(dir, "state"), filepath.Join(dir, "conf")
	for _, d := range []string{state, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(conf, "sandboxd.yaml"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/var/lib/sandboxd", "/etc/sandboxd"} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(d) })
		}
	}

	cg := fmt.Sprintf("sbsystemd-%d", os.Getpid())
	boot := `set -e
for h in /sys/fs/cgroup/*/; do
	mkdir -p "$h$CG"
	if [ -f "${h}cpuset.cpus" ]; then cat "${h}cpuset.cpus" > "$h$CG/cpuset.cpus"; cat "${h}cpuset.mems" > "$h$CG/cpuset.mems"; fi
	echo $$ > "$h$CG/cgroup.procs"
done
exec unshare --pid --fork --mount --cgroup --uts --ipc --propagation private bash -c '
	set -e
	mount -t proc proc /proc
	umount -R /sys/fs/cgroup
	mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
	for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
		mkdir /sys/fs/cgroup/$c
		mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
	done
	mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
	mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
	mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
	mount -t tmpfs -o mode=755 tmpfs /run
	mkdir -p /run/systemd/system /run/systemd/system.control
	cp -a "$UNITS"/. /run/systemd/system/
	cp -a "$MASKS"/. /run/systemd/system.control/
	mount --bind "$STATE" /var/lib/sandboxd
	mount --bind "$CONF" /etc/sandboxd
	hostname sbsystemd
	exec env -i container=sandboxd-test "$PID1" --system --log-target=console --log-level=info --unit=sbtest.target
'`
	cmd := exec.Command("bash", "-c", boot)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CG=" + cg, "UNITS=" + units, "MASKS=" + masks,
		"STATE=" + state, "CONF=" + conf, "PID1=" + pid1}
	var console bytes.Buffer
	cmd.Stdout, cmd.Stderr = &console, &console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// systemd is the pid namespace's init: killing it ends everything inside. It is
		// unshare's child, found before unshare goes.
		if p := childOf(cmd.Process.Pid); p > 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		removeCgroupTree(t, cg)
		if t.Failed() {
			t.Logf("systemd's console:\n%s", console.String())
		}
	})

	// systemd's pid on this host: unshare's child, once it is systemd (before, the boot
	// script's own commands come and go).
	var sd int
	deadline := time.Now().Add(30 * time.Second)
	for sd == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if c := childOf(cmd.Process.Pid); c > 0 {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); string(comm) == "systemd\n" {
				sd = c
			}
		}
	}
	if sd == 0 {
		t.Fatalf("systemd did not start:\n%s", console.String())
	}
	inside := func(args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(sd), "-a"}, args...)...).CombinedOutput()
		return string(out), err
	}
	show := func(unit, props string) string {
		out, _ := inside("systemctl", "show", "-p", props, unit)
		return strings.TrimSpace(out)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				st, _ := inside("systemctl", "status", "--no-pager", "sandboxd.socket", "sandboxd.service")
				t.Fatalf("%s: timed out\n%s", what, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("the socket listening", func() bool { return show("sandboxd.socket", "ActiveState") == "ActiveState=active" })
	if st := show("sandboxd.service", "ActiveState"); st != "ActiveState=inactive" {
		t.Fatalf("the service started before anyone connected: %s", st)
	}

	// The first connection starts the service; sbctl status answers once it is ready.
	out, err := inside(filepath.Join(dir, "sbctl"), "status")
	if err != nil || !strings.Contains(out, ": ok") {
		t.Fatalf("sbctl status through the socket: %v\n%s", err, out)
	}
	// READY=1 goes out as the socket is served; systemd may read it after sbctl's answer.
	waitFor("active after READY=1", func() bool {
		return show("sandboxd.service", "ActiveState,SubState,Type") == "Type=notify\nActiveState=active\nSubState=running"
	})

	// A throwaway user's call, confined under the unit's hardening: its own seccomp filter
	// and no_new_privs, the host read-only, its directory writable.
	u := testutil.CreateUser(t, "sbsd")
	// Its directory where calls see it as the host has it (each call has a private /tmp).
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	call := fmt.Sprintf(`cd %s && %s bash --mode bypassPermissions -- "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; echo made > made.txt; touch /etc/sbsystemd-test 2>/dev/null || echo etc read-only"`,
		work, filepath.Join(dir, "sbctl"))
	out, err = inside("setpriv", "--reuid", strconv.Itoa(int(u.UID)), "--regid", strconv.Itoa(int(u.GID)), "--clear-groups",
		"env", "HOME="+u.Home, "PATH=/usr/bin:/bin", "bash", "-c", call)
	if want := "NoNewPrivs:\t1\nSeccomp:\t2\netc read-only\n"; err != nil || out != want {
		t.Fatalf("the user's call under systemd: %v\n%q, want %q", err, out, want)
	}
	fi, err := os.Stat(filepath.Join(work, "made.txt"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != u.UID {
		t.Fatalf("the call's file: %v %v", fi, err)
	}
	// The daemon runs with UMask=0077; the call created its file with its creator's umask.
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("a file made under umask 022: mode %#o, want 0644", fi.Mode().Perm())
	}
	work2 := filepath.Join(dir, "work2")
	if err := os.Mkdir(work2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work2, int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	out, err = inside("setpriv", "--reuid", strconv.Itoa(int(u.UID)), "--regid", strconv.Itoa(int(u.GID)), "--clear-groups",
		"env", "HOME="+u.Home, "PATH=/usr/bin:/bin", "bash", "-c",
		fmt.Sprintf("umask 027 && cd %s && %s bash --mode bypassPermissions -- 'echo made > made.txt'", work2, filepath.Join(dir, "sbctl")))
	if fi, err := os.Stat(filepath.Join(work2, "made.txt")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a file made under umask 027: %v %v (%s), want mode 0640", fi, err, out)
	}
	if _, err := os.Stat("/etc/sbsystemd-test"); err == nil {
		os.Remove("/etc/sbsystemd-test")
		t.Fatal("a call wrote /etc")
	}

	// Reload: RELOADING=1, then READY=1 again; the same process goes on.
	mainPID := show("sandboxd.service", "MainPID")
	if out, err := inside("systemctl", "reload", "sandboxd.service"); err != nil {
		t.Fatalf("systemctl reload: %v\n%s", err, out)
	}
	// systemctl returns once ExecReload (kill -HUP) has; the unit is "reloading" until the
	// daemon's READY=1.
	waitFor("active again after the reload", func() bool {
		return show("sandboxd.service", "ActiveState") == "ActiveState=active"
	})
	if st := show("sandboxd.service", "MainPID"); st != mainPID {
		t.Fatalf("after reload: %s, was %s", st, mainPID)
	}

	// Stop: STOPPING=1, the drain, a clean exit; the socket stays for the next client.
	if out, err := inside("systemctl", "stop", "sandboxd.service"); err != nil {
		t.Fatalf("systemctl stop: %v\n%s", err, out)
	}
	if st := show("sandboxd.service", "ActiveState,Result"); st != "Result=success\nActiveState=inactive" {
		t.Fatalf("after stop: %s", st)
	}
	if st := show("sandboxd.socket", "ActiveState"); st != "ActiveState=active" {
		t.Fatalf("the socket after the service stopped: %s", st)
	}
}

// childOf returns the first child of pid, 0 when it has none (yet).
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// removeCgroupTree removes the cgroup name and everything below it in every hierarchy,
// deepest first, once the processes in it are gone.
func removeCgroupTree(t *testing.T, name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		deadline := time.Now().Add(10 * time.Second)
		for i := len(dirs) - 1; i >= 0; i-- {
			for os.Remove(dirs[i]) != nil && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		if _, err := os.Stat(root); err == nil {
			t.Errorf("cgroup %s left behind", root)
		}
	}
}
