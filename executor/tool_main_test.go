package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// TestMain hands the re-executed test binary to the worker when it was started as one.
func TestMain(m *testing.M) {
	if worker.IsWorker() {
		worker.Main()
	}
	goleak.VerifyTestMain(m)
}

// nobody is the unprivileged user the tool tests run as: never root.
const nobody = 65534

type toolEnv struct {
	h    *Host
	s    *session.Session
	dir  string // the session's cwd, owned by nobody
	defs map[string]*Tool
}

// newToolEnv starts a Host with a real sandbox and a session of nobody in a fresh directory.
func newToolEnv(t testing.TB) *toolEnv {
	t.Helper()
	return newToolEnvCfg(t, config.Sandbox{})
}

// newToolEnvCfg is newToolEnv with a sandbox configuration.
func newToolEnvCfg(t testing.TB, cfg config.Sandbox) *toolEnv {
	t.Helper()
	testutil.RequireRoot(t)
	// Its own cgroup subtree: a sandbox reaps its subtree at start, and packages test in parallel.
	root := "sandboxd-test-executor-" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	sb, err := sandbox.New(sandbox.Config{CgroupRoot: root}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	base, err := os.MkdirTemp("", "sandboxd-tools-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	dir := filepath.Join(base, "work")
	for _, d := range []string{state, dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	h := NewHost(zaptest.NewLogger(t), sb, cfg, state)
	st := session.NewStore()
	s := st.Create(session.Caller{UID: nobody, GID: nobody, User: "nobody", Home: dir},
		session.Params{Cwd: dir, Mode: permission.ModeDefault})
	env := &toolEnv{h: h, s: s, dir: dir, defs: map[string]*Tool{}}
	for _, d := range BuiltinDefs(h) {
		tool, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		env.defs[d.Name] = tool
	}
	h.Tools().Registry = func() []*Tool {
		var out []*Tool
		for _, tool := range env.defs {
			out = append(out, tool)
		}
		return out
	}
	t.Cleanup(func() {
		sb.Close()
		h.CloseTools()
		if err := sb.RemoveCgroups(); err != nil {
			t.Errorf("remove cgroups: %v", err)
		}
	})
	return env
}

var callSeq int

// call runs one tool call the way the pipeline does: schema, validate, backfill, run, budget.
func (e *toolEnv) call(t testing.TB, name string, in Input) (*Result, error) {
	t.Helper()
	tool := e.defs[name]
	if tool == nil {
		t.Fatalf("no tool %s", name)
	}
	if err := tool.ValidateSchema(map[string]any(in)); err != nil {
		return nil, err
	}
	callSeq++
	c := &Call{Tool: tool, ToolUseID: "toolu_" + time.Now().Format("150405.000000000"), Input: in.Clone(), Session: e.s, Mode: e.s.Mode(), host: e.h}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tool.Validate(ctx, c); err != nil {
		return nil, err
	}
	if err := tool.Backfill(c); err != nil {
		return nil, err
	}
	r, err := tool.Call(ctx, c, nil)
	if err != nil {
		return nil, e.h.explainHidden(c, err)
	}
	return e.h.Budget(c, r)
}

func (e *toolEnv) mustCall(t testing.TB, name string, in Input) *Result {
	t.Helper()
	r, err := e.call(t, name, in)
	if err != nil {
		t.Fatalf("%s %v: %v", name, in, err)
	}
	return r
}

// file writes a file owned by nobody in the session directory and returns its path.
func (e *toolEnv) file(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(p); d != e.dir && len(d) > len(e.dir); d = filepath.Dir(d) {
		_ = os.Chown(d, nobody, nobody)
	}
	if err := os.Chown(p, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return p
}

func text(r *Result) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}
