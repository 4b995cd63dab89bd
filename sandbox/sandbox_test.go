package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
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
