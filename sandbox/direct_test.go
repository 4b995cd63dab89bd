package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// directFixture is a directory the nobody caller works in: an executable script without #!,
// a non-executable file, a script whose interpreter is missing, a directory, and a bin dir
// holding a non-executable `cat` (bash skips it in a PATH search).
func directFixture(t *testing.T) string {
	t.Helper()
	dir := hostTempDir(t, "/var/tmp", "sbx-direct-")
	files := []struct {
		name, body string
		mode       os.FileMode
	}{
		{"noshebang", "echo script $0 $1\n", 0o755},
		{"noexec", "#!/bin/sh\necho never\n", 0o644},
		{"badinterp", "#!/nonexistent/interp\n", 0o755},
		{"hello", "#!/bin/sh\necho hello from $0\n", 0o755},
		{"bin/cat", "#!/bin/sh\necho wrong cat\n", 0o644},
	}
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, f.name), f.mode)
	}
	os.Chmod(dir, 0o755)
	chownR(t, dir)
	return dir
}

// TestDirectMatchesBash: a simple command exec'd by the init, without bash, prints, exits and
// sees exactly what `bash -c` running the same command shows (bash execs a simple command
// itself, so bash without Direct is the reference), for found programs and for every case
// that falls back to bash: not found, not executable, no #!, a bad interpreter, a directory,
// a non-executable file earlier in PATH, an empty PATH element.
func TestDirectMatchesBash(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	dir := directFixture(t)
	path := "PATH=/usr/local/bin:/usr/bin:/bin"
	cases := []struct {
		cmd  string
		argv []string
		path string
	}{
		{"printenv", []string{"printenv"}, path},
		{"/usr/bin/env", []string{"/usr/bin/env"}, path},
		{`sh -c 'echo "$0" "$@"; pwd; test -e /proc/self/fd/3 && echo fd3 || echo no fd3' zero "one two" ''`, []string{"sh", "-c", `echo "$0" "$@"; pwd; test -e /proc/self/fd/3 && echo fd3 || echo no fd3`, "zero", "one two", ""}, path},
		{"no-such-command-xyz", []string{"no-such-command-xyz"}, path},
		{"./noexec", []string{"./noexec"}, path},
		{"./noshebang arg", []string{"./noshebang", "arg"}, path},
		{"./badinterp", []string{"./badinterp"}, path},
		{"./adir", []string{"./adir"}, path},
		{"/nonexistent/x", []string{"/nonexistent/x"}, path},
		{"cat /dev/null", []string{"cat", "/dev/null"}, "PATH=" + dir + "/bin:/usr/bin:/bin"},
		{"hello", []string{"hello"}, "PATH=/usr/bin::/bin"},
		{"noshebang", []string{"noshebang"}, "PATH=/nonexistent:" + dir},
	}
	for i, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			run1 := func(direct []string, call string) (int, string) {
				res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
					Path: "/bin/bash", Args: []string{"--noprofile", "--norc", "-c", tc.cmd}, Direct: direct,
					Env: []string{tc.path, "HOME=/", "LANG=C.UTF-8"}, Dir: dir, WritableDirs: []string{dir},
					UID: nobody, GID: nobody, Session: "direct", Call: call,
				})
				if err != nil {
					t.Fatal(err)
				}
				return res.ExitCode, out
			}
			wantCode, want := run1(nil, fmt.Sprintf("b%d", i))
			gotCode, got := run1(tc.argv, fmt.Sprintf("d%d", i))
			if tc.argv[0] == "printenv" || tc.argv[0] == "/usr/bin/env" {
				want, got = sortedLines(want), sortedLines(got)
			}
			if gotCode != wantCode || got != want {
				t.Fatalf("direct: exit %d, output %q\nbash -c: exit %d, output %q", gotCode, got, wantCode, want)
			}
		})
	}
}

func sortedLines(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// TestDirectRunsWithoutFallback: the program is exec'd by the init itself (the fallback does
// not run), with PWD, SHLVL=0 and _ as bash sets them, and without the caller's ExtraFiles;
// when it cannot be exec'd, the fallback runs and has them.
func TestDirectRunsWithoutFallback(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	dir := directFixture(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	start := func(call string, direct []string, fallback string) (int, string) {
		res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
			Path: "/bin/sh", Args: []string{"-c", fallback}, Direct: direct,
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, ExtraFiles: []*os.File{w},
			UID: nobody, GID: nobody, Session: "direct", Call: call,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode, out
	}
	code, out := start("c1", []string{"sh", "-c", `echo "$PWD|$SHLVL|$_"; test -e /proc/self/fd/3 && echo fd3 open; exit 0`}, "echo FALLBACK")
	if code != 0 || out != dir+"|0|/usr/bin/sh\n" {
		t.Fatalf("direct run: exit %d, %q; want %q", code, out, dir+"|0|/usr/bin/sh\n")
	}
	code, out = start("c2", []string{"no-such-command-xyz"}, "echo FALLBACK; test -e /proc/self/fd/3 && echo fd3 open")
	if code != 0 || out != "FALLBACK\nfd3 open\n" {
		t.Fatalf("fallback: exit %d, %q", code, out)
	}
	// An environment that already has PWD (or SHLVL, _) is bash's to adjust: fallback.
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
		Path: "/bin/sh", Args: []string{"-c", "echo FALLBACK"}, Direct: []string{"true"},
		Env: []string{"PATH=/usr/bin:/bin", "PWD=/"}, Dir: dir, UID: nobody, GID: nobody, Session: "direct", Call: "c3",
	})
	if err != nil || res.ExitCode != 0 || out != "FALLBACK\n" {
		t.Fatalf("PWD in env: %v %+v %q", err, res, out)
	}
}

// TestDirectProgramIsNotPID1: the init stays PID 1 of the call's namespace, as bash did, so the
// program has a process's ordinary signal semantics (PID 1 would ignore its own SIGTERM) and
// the orphans it leaves are reaped rather than kept as zombies.
func TestDirectProgramIsNotPID1(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is needed to leave orphans behind")
	}
	s := newTestSandbox(t, Config{})
	dir := directFixture(t)
	run1 := func(call string, direct []string) (*Result, string) {
		res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), &Spec{
			Path: "/bin/sh", Args: []string{"-c", "echo FALLBACK"}, Direct: direct,
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, UID: nobody, GID: nobody, Session: "direct", Call: call,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res, out
	}
	res, out := run1("sig", []string{"sh", "-c", "echo $$; kill -TERM $$; sleep 5; echo survived"})
	if out != "2\n" || res.ExitCode != 128+15 || res.Duration > 4*time.Second {
		t.Fatalf("kill -TERM of itself: exit %d after %v, %q; want pid 2, exit 143 at once", res.ExitCode, res.Duration, out)
	}
	orphans := `import glob, os, time
for _ in range(5):
    if os.fork() == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.wait()
time.sleep(0.3)
print(sum(open(f).read().rsplit(") ", 1)[1][0] == "Z" for f in glob.glob("/proc/[0-9]*/stat")))`
	if _, out = run1("orphans", []string{"python3", "-c", orphans}); out != "0\n" {
		t.Fatalf("zombies left by orphans: %q, want 0", out)
	}
}
