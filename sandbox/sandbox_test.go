package sandbox

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// run starts spec with stdout/stderr captured and waits.
func run(t *testing.T, s *Sandbox, ctx context.Context, spec *Spec) (*Result, string, error) {
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
		return nil, "", err
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = buf.ReadFrom(r); close(done) }()
	res, err := p.Wait()
	<-done
	r.Close()
	return res, buf.String(), err
}

func TestStartBasic(t *testing.T) {
	testutil.RequireRoot(t)
	s, err := New(Config{}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, out, err := run(t, s, ctx, &Spec{
		Path: "/bin/sh", Args: []string{"-c", "id -u; echo $FOO; exit 3"},
		Env: []string{"FOO=bar", "PATH=/usr/bin:/bin"}, Dir: "/",
		UID: 65534, GID: 65534, Session: "s1", Call: "c1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || !strings.Contains(out, "65534\nbar") {
		t.Fatalf("res=%+v out=%q", res, out)
	}
}
