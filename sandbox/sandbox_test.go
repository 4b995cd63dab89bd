package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// run starts spec with stdout/stderr captured and waits.
func run(t testing.TB, s *Sandbox, ctx context.Context, spec *Spec) (*Result, string, error) {
	t.Helper()
	res, out, _, err := runProc(t, s, ctx, spec)
	return res, out, err
}

// runProc is run that also returns the Process (nil when Start failed).
func runProc(t testing.TB, s *Sandbox, ctx context.Context, spec *Spec) (*Result, string, *Process, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Stdout == nil {
		spec.Stdout = w
	}
	if spec.Stderr == nil {
		spec.Stderr = w
	}
	p, err := s.Start(ctx, spec)
	w.Close()
	if err != nil {
		r.Close()
		return nil, "", nil, err
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = buf.ReadFrom(r); close(done) }()
	res, err := p.Wait()
	<-done
	r.Close()
	return res, buf.String(), p, err
}

const nobody = 65534

func TestStartBasic(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
		Path: "/bin/sh", Args: []string{"-c", "id -u; echo $FOO; exit 3"},
		Env: []string{"FOO=bar", "PATH=/usr/bin:/bin"}, Dir: "/",
		UID: nobody, GID: nobody, Session: "s1", Call: "c1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || !strings.Contains(out, "65534\nbar") {
		t.Fatalf("res=%+v out=%q", res, out)
	}
}

// TestInitErrors: a failing setup step comes back as a typed error and nothing runs.
func TestInitErrors(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	cases := []struct {
		name  string
		spec  Spec
		errno syscall.Errno
		step  string
	}{
		{"missing program", Spec{Path: "/nonexistent/prog"}, syscall.ENOENT, "execve"},
		{"missing dir", Spec{Path: "/bin/true", Dir: "/nonexistent"}, syscall.ENOENT, "chdir"},
		{"dir the caller cannot enter", Spec{Path: "/bin/true", Dir: "/root"}, syscall.EACCES, "chdir"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.UID, spec.GID, spec.Session, spec.Call = nobody, nobody, "s", "c"+string(rune('a'+i))
			_, _, err := run(t, s, ctxTimeout(t, 5*time.Second), &spec)
			var ie *InitError
			if !errors.As(err, &ie) || !errors.Is(err, tc.errno) || !errors.Is(err, ErrInitFailed) ||
				!strings.HasPrefix(ie.Step, tc.step) || errcode.Of(err) != errcode.SandboxSetup {
				t.Fatalf("err = %v, want %v in step %s with code %s", err, tc.errno, tc.step, errcode.SandboxSetup)
			}
		})
	}
	t.Run("bad spec", func(t *testing.T) {
		_, err := s.Start(context.Background(), &Spec{Path: "/bin/true", Session: "a/b", Call: "c"})
		if !errors.Is(err, ErrBadSpec) || errcode.Of(err) != errcode.SandboxSetup {
			t.Fatalf("err = %v", err)
		}
	})
}

// onBothPaths runs, as nobody, a shell script in a pooled init and then in an init started for
// the call, requiring each to take that path and exit 0, and returns the two outputs. spec
// adds what the test is about; call is "c0" (pooled) or "c1".
func onBothPaths(t *testing.T, s *Sandbox, session string, script func(call string) string, spec func(*Spec)) [2]string {
	t.Helper()
	var outs [2]string
	for i, pooled := range []bool{true, false} {
		s.noPool.Store(!pooled)
		if pooled {
			waitPoolReady(t, s, 1)
		}
		call := fmt.Sprintf("c%d", i)
		sp := &Spec{Path: "/bin/sh", Args: []string{"-c", script(call)}, Dir: "/",
			Env: []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody, Session: session, Call: call}
		spec(sp)
		res, out, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), sp)
		if err != nil || res.ExitCode != 0 || p.pooled != pooled {
			t.Fatalf("pooled=%v: %v %+v pooled=%v\n%s", pooled, err, res, p != nil && p.pooled, out)
		}
		outs[i] = out
	}
	return outs
}

// TestPrivateTmp: every call has its own /tmp of its size, pooled or not; a call's dir that
// lives under the host's /tmp is there, writable, and nothing else of the host's /tmp is.
func TestPrivateTmp(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	dir := hostTempDir(t, "/tmp", "sbx-tmp-tree-")
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("in\n"), 0o644)
	os.Chmod(dir, 0o755)
	os.Chown(dir, nobody, nobody)
	secret, err := os.CreateTemp("/tmp", "sbx-host-only-")
	if err != nil {
		t.Fatal(err)
	}
	secret.Close()
	defer os.Remove(secret.Name())
	outs := onBothPaths(t, s, "tmp", func(call string) string {
		return fmt.Sprintf("cat %[1]s/in.txt; echo x > %[1]s/out-%[2]s && echo wrote; "+
			"test -e %[3]s && echo host-tmp-visible; df -k /tmp /dev/shm | tail -2 | awk '{print $2}'", dir, call, secret.Name())
	}, func(sp *Spec) {
		sp.Dir, sp.WritableDirs = dir, []string{dir}
		sp.Limits = Limits{TmpSizeBytes: 8 << 20} // not the pool's: a pooled init resizes its /tmp
	})
	for i, out := range outs {
		if out != "in\nwrote\n8192\n8192\n" {
			t.Fatalf("call c%d: %q, want the dir's file, a write to it, no host /tmp, 8 MiB /tmp and /dev/shm", i, out)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("out-c%d", i))); err != nil {
			t.Fatalf("call c%d: the write did not reach the host: %v", i, err)
		}
	}
}

// TestCoveredDirs: denied and masked directories are covered by one empty, read-only fs that
// nobody may enter or write, pooled or not (clones of it, one superblock: ~6 µs a cover where a
// tmpfs of its own cost ~20).
func TestCoveredDirs(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	base := hostTempDir(t, "/var/tmp", "sbx-cover-")
	deny1, deny2 := filepath.Join(base, "secret1"), filepath.Join(base, "secret2")
	for _, d := range []string{deny1, deny2} {
		os.Mkdir(d, 0o755)
		os.WriteFile(filepath.Join(d, "key"), []byte("k\n"), 0o644)
	}
	os.Chmod(base, 0o755)
	script := fmt.Sprintf(`for d in %[1]s %[2]s; do cat $d/key 2>/dev/null && echo readable; touch $d/new 2>/dev/null && echo writable; done
awk '$5 == "%[1]s" || $5 == "%[2]s" || $5 == "/sys/firmware" {for (i = 7; $i != "-"; i++); print $3, $(i+1), substr($6, 1, 2)}' /proc/self/mountinfo | sort -u`, deny1, deny2)
	outs := onBothPaths(t, s, "cover", func(string) string { return script },
		func(sp *Spec) { sp.DenyPaths = []string{deny1, deny2} })
	for i, out := range outs {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 1 || !strings.HasSuffix(lines[0], " tmpfs ro") {
			t.Fatalf("call c%d: covers %q, want one read-only tmpfs behind all three, nothing readable or writable", i, out)
		}
	}
}

// TestReadOnlyDirs: a read-only dir is readable and not writable wherever it lies, pooled or
// not; it gets a mount of its own only where the read-only root would not show it as the host
// has it (under the private /tmp here), never elsewhere (one clone and move fewer a call).
func TestReadOnlyDirs(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	plain := hostTempDir(t, "/var/tmp", "sbx-ro-")
	inTmp := hostTempDir(t, "/tmp", "sbx-ro-")
	for _, d := range []string{plain, inTmp} {
		os.WriteFile(filepath.Join(d, "f"), []byte("host\n"), 0o644)
		os.Chmod(d, 0o777) // only the mount keeps nobody from writing
	}
	script := fmt.Sprintf(`for d in %[1]s %[2]s; do cat $d/f; touch $d/new 2>/dev/null && echo writable; done
awk '$5 == "%[1]s" || $5 == "%[2]s" {print $5, substr($6, 1, 2)}' /proc/self/mountinfo`, plain, inTmp)
	outs := onBothPaths(t, s, "ro", func(string) string { return script },
		func(sp *Spec) { sp.ReadOnlyDirs = []string{plain, inTmp} })
	for i, out := range outs {
		if want := "host\nhost\n" + inTmp + " ro\n"; out != want {
			t.Fatalf("call c%d: %q, want both read, neither written, a mount for the one in /tmp only (%q)", i, out, want)
		}
	}
}

// TestSessionNetnsCopies: each start gets its own copy of the session's network namespace fd,
// so closing one (as every start does when done) leaves the session's namespace in place.
func TestSessionNetnsCopies(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	ino := func(f *os.File) uint64 { return fileIno(t, f) }
	a, err := s.sessionNetns("copies")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.sessionNetns("copies")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Fd() == b.Fd() || ino(a) != ino(b) {
		t.Fatalf("fds %d and %d, namespaces %d and %d: want two copies of one namespace", a.Fd(), b.Fd(), ino(a), ino(b))
	}
	want := ino(a)
	a.Close()
	s.mu.Lock()
	orig := s.netns["copies"]
	s.mu.Unlock()
	if ino(orig) != want {
		t.Fatal("closing a start's copy closed the session's namespace")
	}
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/readlink", Args: []string{"/proc/self/ns/net"},
		Dir: "/", UID: nobody, GID: nobody, Session: "copies", Call: "c1"})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(out) != fmt.Sprintf("net:[%d]", want) {
		t.Fatalf("%v %+v %q, want net:[%d]", err, res, out, want)
	}
}

// TestUndumpable: a program started Undumpable runs with a real gid apart from its effective
// one, so the kernel makes it non-dumpable at exec: a process of the same uid and gid cannot
// read its memory or ptrace it (here /proc/PID/environ, which takes the same check). Access
// checks still use the effective gid. The same program started normally is readable, so the
// check is not vacuous. (A shell would set its effective gid to the real one, as bash and dash
// do when they differ; the file worker is not a shell.)
func TestUndumpable(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, undumpable := range []bool{false, true} {
		t.Run(fmt.Sprint(undumpable), func(t *testing.T) {
			p, err := s.Start(ctxTimeout(t, 30*time.Second), &Spec{
				Path: "/bin/sleep", Args: []string{"60"}, Env: []string{"SECRET=x"}, Dir: "/",
				UID: nobody, GID: nobody, Session: "s1", Call: fmt.Sprint("c", undumpable), Undumpable: undumpable,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Kill("test"); _, _ = p.Wait() }()
			var child string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Pid(), p.Pid()))
				if f := strings.Fields(string(kids)); len(f) == 1 {
					if cmd, _ := os.ReadFile("/proc/" + f[0] + "/cmdline"); strings.HasPrefix(string(cmd), "/bin/sleep\x00") {
						child = f[0]
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("the program never started")
				}
			}
			status, err := os.ReadFile("/proc/" + child + "/status")
			if err != nil {
				t.Fatal(err)
			}
			wantGid := "Gid:\t65534\t65534\t65534\t65534"
			if undumpable {
				wantGid = "Gid:\t65533\t65534\t65534\t65534" // the caller's gid is the overflow one
			}
			if !strings.Contains(string(status), wantGid) {
				t.Errorf("status has no %q:\n%s", wantGid, status)
			}
			cat := exec.Command("cat", "/proc/"+child+"/environ")
			cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			env, err := cat.CombinedOutput()
			if readable := err == nil && strings.Contains(string(env), "SECRET=x"); readable == undumpable {
				t.Errorf("undumpable %v: a process of the same uid and gid read its environment: %v, %q", undumpable, readable, env)
			}
		})
	}
}
