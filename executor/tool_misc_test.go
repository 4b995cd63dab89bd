package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

func TestBudgetPersistsOversizeAndReplacesEarlier(t *testing.T) {
	e := newToolEnv(t)
	e.s.Budget = session.NewBudget(50_000)
	// Grep's inline limit is 100 000: a 120 000-char result is persisted right away.
	for i := 0; i < 40; i++ {
		e.file(t, fmt.Sprintf("g/f%02d.txt", i), strings.Repeat("needle "+strings.Repeat("x", 90)+"\n", 40))
	}
	r := e.mustCall(t, "Grep", Input{"pattern": "needle", "output_mode": "content", "head_limit": 0})
	if r.Data["persistedOutputPath"] == nil || !strings.Contains(text(r), "<persisted-output>") {
		t.Fatalf("not persisted: %.200q", text(r))
	}
	// Medium results fill the aggregate budget; the earliest large ones are replaced.
	var replaced []map[string]any
	for i := 0; i < 4; i++ {
		r := e.mustCall(t, "Bash", Input{"command": "head -c 20000 /dev/zero | tr '\\0' a"})
		if rr, ok := r.Data["replaced_results"].([]map[string]any); ok {
			replaced = append(replaced, rr...)
		}
	}
	if len(replaced) == 0 {
		t.Fatal("the aggregate budget replaced nothing")
	}
	p, _ := replaced[0]["path"].(string)
	if b, err := os.ReadFile(p); err != nil || len(b) != 20000 {
		t.Fatalf("replaced result file %s: %d bytes, %v", p, len(b), err)
	}
	if !strings.Contains(replaced[0]["preview"].(string), "<persisted-output>") {
		t.Fatalf("preview %q", replaced[0]["preview"])
	}
	if e.s.Budget.Total() > 50_000 {
		t.Fatalf("budget total %d", e.s.Budget.Total())
	}
}

func TestToolSearchAndPlanMode(t *testing.T) {
	e := newToolEnv(t)
	r := e.mustCall(t, "ToolSearch", Input{"query": "select:KillShell,BashOutput"})
	if m := r.Data["matches"].([]string); len(m) != 2 || !strings.Contains(text(r), `"shell_id"`) {
		t.Fatalf("%v %q", m, text(r))
	}
	r = e.mustCall(t, "ToolSearch", Input{"query": "background output"})
	if m := r.Data["matches"].([]string); len(m) == 0 || m[0] != "BashOutput" {
		t.Fatalf("keywords: %v", m)
	}
	for _, name := range []string{"Read", "Bash", "Write", "Edit", "Glob", "Grep", "ToolSearch"} {
		if e.defs[name].ShouldDefer() {
			t.Errorf("%s deferred", name)
		}
	}

	if !e.defs["EnterPlanMode"].IsReadOnly(Input{}) || e.defs["ExitPlanMode"].IsReadOnly(Input{}) {
		t.Fatal("EnterPlanMode must be read-only and ExitPlanMode not (so leaving plan mode asks)")
	}
	accept := permission.ModeAcceptEdits
	e.s.Apply(session.Update{Mode: &accept})
	r = e.mustCall(t, "EnterPlanMode", Input{})
	if r.ContextChange == nil || *r.ContextChange.Mode != permission.ModePlan {
		t.Fatalf("%+v", r.ContextChange)
	}
	e.h.applyContextChange(e.s, r.ContextChange)
	r = e.mustCall(t, "ExitPlanMode", Input{"plan": "1. do it"})
	if r.ContextChange == nil || *r.ContextChange.Mode != permission.ModeAcceptEdits {
		t.Fatalf("%+v", r.ContextChange)
	}
	e.h.applyContextChange(e.s, r.ContextChange)
	if _, err := e.call(t, "ExitPlanMode", Input{}); err == nil {
		t.Fatal("ExitPlanMode outside plan mode succeeded")
	}
	// A session put in plan mode by its owner (not by EnterPlanMode) is not loosened by a
	// tool call: there is no earlier mode to go back to.
	plan := permission.ModePlan
	e.s.Apply(session.Update{Mode: &plan})
	if _, err := e.call(t, "ExitPlanMode", Input{"plan": "x"}); err == nil {
		t.Fatal("ExitPlanMode left a plan mode the owner had set")
	}
	// Nor one the owner set after the agent's EnterPlanMode: an owner who narrowed the session
	// to default and then put it in plan did not choose the acceptEdits it was entered from.
	e.s.Apply(session.Update{Mode: &accept})
	r = e.mustCall(t, "EnterPlanMode", Input{})
	e.h.applyContextChange(e.s, r.ContextChange)
	def := permission.ModeDefault
	e.s.Apply(session.Update{Mode: &def})
	e.s.Apply(session.Update{Mode: &plan})
	if r, err := e.call(t, "ExitPlanMode", Input{"plan": "x"}); err == nil {
		t.Fatalf("ExitPlanMode went back to a mode the owner had left: %+v", r.ContextChange)
	}
}

func TestPathFactsResolvedAsOwner(t *testing.T) {
	e := newToolEnv(t)
	target := e.file(t, "real/secret.txt", "s")
	link := filepath.Join(e.dir, "link")
	if err := os.Symlink(filepath.Dir(target), link); err != nil {
		t.Fatal(err)
	}
	c := &Call{Tool: e.defs["Read"], Input: Input{"file_path": link + "/secret.txt"}, Session: e.s}
	facts, err := e.defs["Read"].CheckPermissions(context.Background(), c)
	if err != nil || len(facts.Paths) != 1 || facts.Paths[0].Resolved != target {
		t.Fatalf("%+v %v", facts, err)
	}
	c.Input = Input{"file_path": "/dev/zero"}
	facts, _ = e.defs["Read"].CheckPermissions(context.Background(), c)
	if facts.Paths[0].Special != "device" {
		t.Fatalf("%+v", facts)
	}
	b, err := e.h.ReadFileAs(context.Background(), e.s, target, 1024)
	if err != nil || string(b) != "s" {
		t.Fatalf("ReadFileAs %q %v", b, err)
	}
}

// TestBashPathFactsEachResolved: every path a command names gets its own fact, in the
// command's order, resolved as the owner: the worker is asked for them all at once.
func TestBashPathFactsEachResolved(t *testing.T) {
	e := newToolEnv(t)
	target := e.file(t, "real/secret.txt", "s")
	if err := os.Symlink(filepath.Dir(target), filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 9 {
		names = append(names, fmt.Sprintf("f%d.txt", i))
	}
	cmd := "cat link/secret.txt " + strings.Join(names, " ") + " /dev/zero > out.txt"
	cl := classifier.Classify(cmd, classifier.Options{Cwd: e.dir, WorkDirs: []string{e.dir}})
	ch := make(chan *classifier.Classification, 1)
	ch <- cl
	c := &Call{Tool: e.defs["Bash"], Input: Input{"command": cmd}, Session: e.s, bash: ch}
	facts, err := e.defs["Bash"].CheckPermissions(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]permission.PathFact{}
	add := func(f permission.PathFact) { want[f.Requested] = f }
	add(permission.PathFact{Requested: filepath.Join(e.dir, "link/secret.txt"), Resolved: target, Access: permission.Read})
	for _, n := range names {
		p := filepath.Join(e.dir, n)
		add(permission.PathFact{Requested: p, Resolved: p, Access: permission.Read})
	}
	add(permission.PathFact{Requested: "/dev/zero", Resolved: "/dev/zero", Access: permission.Read, Special: "device"})
	out := filepath.Join(e.dir, "out.txt")
	add(permission.PathFact{Requested: out, Resolved: out, Access: permission.Write, Redirect: true})
	if len(cl.Paths) != len(want) || len(facts.Paths) != len(want) {
		t.Fatalf("%d paths classified, %d facts, want %d: %+v", len(cl.Paths), len(facts.Paths), len(want), facts.Paths)
	}
	for i, pu := range cl.Paths {
		if f := facts.Paths[i]; f.Requested != pu.Path || !reflect.DeepEqual(f, want[pu.Path]) {
			t.Errorf("fact %d: %+v, want %+v (the classifier's path %d is %s)", i, f, want[pu.Path], i, pu.Path)
		}
	}
}

// BenchmarkToolRead4K is the Read tool on a 4 KB file through the sandboxed worker, against
// os.ReadFile of the same file.
func BenchmarkToolRead4K(b *testing.B) {
	e := newToolEnv(b)
	p := e.file(b, "f.txt", strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!\n", 64))
	e.mustCall(b, "Read", Input{"file_path": p})
	b.Run("tool", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			e.mustCall(b, "Read", Input{"file_path": p})
		}
	})
	b.Run("os.ReadFile", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGrepTree is Grep over the Go source tree, against rg run directly with the same flags.
// The worker gets as many cores as rg has outside (2 here): the default quota is one core.
func BenchmarkGrepTree(b *testing.B) {
	e := newToolEnvCfg(b, config.Sandbox{CPUQuotaMilli: int64(runtime.NumCPU()) * 1000})
	root := "/usr/local/go/src"
	if _, err := os.Stat(root); err != nil {
		b.Skip("no Go source tree at " + root)
	}
	in := Input{"pattern": "func New[A-Z]", "path": root, "output_mode": "files_with_matches", "head_limit": 0}
	e.mustCall(b, "Grep", in)
	b.Run("tool", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			e.mustCall(b, "Grep", in)
		}
	})
	args, _ := GrepArgs(in, root)
	b.Run("rg", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if out, err := exec.Command("rg", args...).Output(); err != nil || len(out) == 0 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEdit1MB is one Edit of a 1 MB file (read state refreshed by the edit itself).
func BenchmarkEdit1MB(b *testing.B) {
	e := newToolEnv(b)
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		fmt.Fprintf(&sb, "line %d of a large file with some text\n", sb.Len())
	}
	p := e.file(b, "big.txt", sb.String()+"MARKER 0\n")
	e.mustCall(b, "Read", Input{"file_path": p})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.mustCall(b, "Edit", Input{"file_path": p, "old_string": fmt.Sprintf("MARKER %d", i), "new_string": fmt.Sprintf("MARKER %d", i+1)})
	}
}

// TestResultsDirKeptPerSession: a session's results directory is made and checked once, found
// again by later calls, made again when it was removed under them, and forgotten with the
// session.
func TestResultsDirKeptPerSession(t *testing.T) {
	e := newToolEnv(t)
	dir, err := e.h.resultsDir(e.s)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o710 {
		t.Fatalf("results dir %s: %v %v", dir, fi, err)
	}
	if _, ok := e.h.resultsMade.Load(e.s.ID); !ok {
		t.Fatal("a checked results dir is not remembered")
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if r := e.mustCall(t, "Bash", Input{"command": "true"}); r.IsError {
		t.Fatalf("Bash after the results dir was removed: %v", r.Content)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o710 {
		t.Fatalf("results dir not made again: %v %v", fi, err)
	}
	e.h.StopSession(e.s.ID)
	if _, ok := e.h.resultsMade.Load(e.s.ID); ok {
		t.Error("a stopped session's results dir is still remembered")
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("a stopped session's results dir is still there: %v", err)
	}
}

// TestHiddenPathsSayWhy: a file tool refused on a deny path says the sandbox hides it, not
// only "permission denied"; a refusal elsewhere keeps its own message.
func TestHiddenPathsSayWhy(t *testing.T) {
	e := newToolEnvCfg(t, config.Sandbox{DenyPaths: []string{"~/.ssh"}})
	key := e.file(t, ".ssh/id_rsa", "secret\n")
	for name, in := range map[string]Input{
		"Read": {"file_path": key},
		"Grep": {"pattern": "secret", "path": filepath.Dir(key)},
	} {
		_, err := e.call(t, name, in)
		if err == nil || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "the sandbox hides "+filepath.Dir(key)) {
			t.Errorf("%s of a hidden path: %v", name, err)
		}
	}
	locked := e.file(t, "locked", "x\n")
	if err := os.Chown(locked, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := e.call(t, "Read", Input{"file_path": locked})
	if err == nil || !errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "hides") {
		t.Errorf("Read of a root-only file: %v", err)
	}
	// A write the kernel refuses on a protected path says why and how to lift it.
	cfg := e.file(t, ".git/config", "[core]\n")
	e.mustCall(t, "Read", Input{"file_path": cfg})
	_, err = e.call(t, "Write", Input{"file_path": cfg, "content": "[core]\n\tfsmonitor = id\n"})
	if err == nil || !strings.Contains(err.Error(), "is protected") {
		t.Errorf("Write of .git/config: %v", err)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
}

// TestWorkerHidesWhatAppearsLater: the file worker is long-lived, and its mounts hide what
// existed when it started. A deny path made since (by its user, on the host) is hidden from the
// file tools too: the next call gets a worker that hides it. So is a deny path replaced since.
func TestWorkerHidesWhatAppearsLater(t *testing.T) {
	e := newToolEnvCfg(t, config.Sandbox{DenyPaths: []string{"~/.aws", "~/.netrc"}})
	e.file(t, "warm.txt", "hello\n")
	if res := e.mustCall(t, "Grep", Input{"pattern": "hello", "path": e.dir}); !strings.Contains(text(res), "warm.txt") {
		t.Fatalf("Grep before: %q", text(res))
	}
	e.file(t, ".aws/credentials", "SECRETKEY\n")
	e.file(t, ".netrc", "machine h password SECRETPW\n")
	for _, in := range []Input{
		{"pattern": "SECRET", "path": e.dir, "output_mode": "content"},
		{"pattern": "SECRET", "path": e.dir, "output_mode": "files_with_matches"},
	} {
		res, err := e.call(t, "Grep", in)
		if err == nil && strings.Contains(text(res), "SECRET") || err == nil && strings.Contains(text(res), ".aws") {
			t.Errorf("Grep %v over a deny path made after the worker started: %q", in["output_mode"], text(res))
		}
	}
	// Replaced on the host after a worker hid it: the cover is of the old file.
	if err := os.Rename(filepath.Join(e.dir, ".netrc"), filepath.Join(e.dir, "old")); err != nil {
		t.Fatal(err)
	}
	e.file(t, ".netrc", "machine h password SECRETAGAIN\n")
	if res, err := e.call(t, "Grep", Input{"pattern": "SECRETAGAIN", "path": e.dir, "output_mode": "content"}); err == nil && strings.Contains(text(res), "SECRETAGAIN") {
		t.Errorf("Grep over a deny path replaced after the worker started: %q", text(res))
	}
}

// TestFileToolPathsBounded: a path past PATH_MAX, absolute or joined to the cwd, is refused at
// validation, before any lookup as the owner (which cost by the square of its length).
func TestFileToolPathsBounded(t *testing.T) {
	e := newToolEnv(t)
	long := strings.Repeat("/a", 3000)
	for name, in := range map[string]Input{
		"Read":  {"file_path": long},
		"Write": {"file_path": long, "content": "x"},
		"Glob":  {"pattern": "*", "path": long[1:]},
		"Grep":  {"pattern": "x", "path": long},
	} {
		if _, err := e.call(t, name, in); err == nil || !strings.Contains(err.Error(), "over the 4096") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestGrepArgsValuesStayValues: a type or glob that reads as an rg option (--pre runs a
// program on each file) reaches rg joined to its own option, never as an option of its own.
func TestGrepArgsValuesStayValues(t *testing.T) {
	t.Parallel()
	for _, in := range []Input{
		{"pattern": "x", "type": "--pre=/bin/id"},
		{"pattern": "x", "glob": "--pre=/bin/id"},
		{"pattern": "x", "glob": "*.go,--pre=/bin/id"},
	} {
		args, _ := GrepArgs(in, "/p")
		for _, a := range args {
			if strings.HasPrefix(a, "--pre") {
				t.Errorf("%v: rg gets %q as an option: %q", in, a, args)
			}
		}
	}
}
