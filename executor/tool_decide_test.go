package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// The tests here decide each call with the embedded Rego policy on the facts the tool
// gathers, as the pipeline does, and run it only when allowed (issue 16: reproductions 6 and
// 10, item 7).

// decideEnv is a toolEnv whose session has rules and whose calls the real policy decides.
type decideEnv struct {
	*toolEnv
	engine *policy.Engine
}

func newDecideEnv(t *testing.T, deny ...string) *decideEnv {
	t.Helper()
	e := newToolEnv(t)
	engine, err := policy.New(context.Background(), policy.Config{}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	t.Cleanup(func() { engine.Close() })
	var rules []permission.Rule
	for _, text := range deny {
		r, err := permission.ParseRuleFor(text, permission.Deny)
		if err != nil {
			t.Fatalf("rule %s: %v", text, err)
		}
		r.Source, r.Origin = permission.SourceSession, "session"
		rules = append(rules, r)
	}
	e.s.SetRuleSet(permission.NewRuleSet(rules, permission.Effective{}, permission.Anchors{Home: e.dir, Cwd: e.dir}))
	return &decideEnv{toolEnv: e, engine: engine}
}

// decide runs a call through validation, backfill, CheckPermissions and the policy, and then,
// only when the policy allows it, the tool.
func (e *decideEnv) decide(t *testing.T, name string, in Input) (permission.Decision, *Result, error) {
	t.Helper()
	c, d := e.decideOnly(t, name, in)
	if d.Behavior != permission.Allow {
		return d, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.Tool.Call(ctx, c, nil)
	return d, r, err
}

// decideOnly is decide without the run: the call, ready to run, and its decision.
func (e *decideEnv) decideOnly(t *testing.T, name string, in Input) (*Call, permission.Decision) {
	t.Helper()
	tool := e.defs[name]
	if err := tool.ValidateSchema(map[string]any(in)); err != nil {
		t.Fatalf("schema: %v", err)
	}
	c := &Call{Tool: tool, ToolUseID: "toolu_decide", Input: in.Clone(), Session: e.s, Mode: e.s.Mode(), host: e.h}
	if cmd, ok := in["command"].(string); ok && name == "Bash" {
		// As the pipeline's classify step does.
		ch := make(chan *classifier.Classification, 1)
		ch <- classifyLine(e.s, cmd, classifier.Options{WorkDirs: e.s.Dirs(), Cwd: e.s.Cwd(), Home: e.s.Owner.Home})
		c.bash = ch
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tool.Validate(ctx, c); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if err := tool.Backfill(c); err != nil {
		t.Fatalf("backfill: %v", err)
	}
	tf, err := tool.CheckPermissions(ctx, c)
	if err != nil {
		t.Fatalf("facts: %v", err)
	}
	snap := e.s.Snapshot()
	d, err := e.engine.Decide(ctx, &permission.Facts{
		Tool: tool.Name(), Input: c.Input, Mode: c.Mode,
		Caller: permission.Caller{UID: snap.Owner.UID, GID: snap.Owner.GID, User: snap.Owner.User},
		Cwd:    snap.Cwd, Dirs: snap.AdditionalDirs, Home: snap.Owner.Home,
		ReadOnly: tool.IsReadOnly(c.Input), ToolFacts: tf,
	}, e.s.RuleSet())
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return c, d
}

// outsideDir is a directory outside the session's, that its owner (nobody) can read and its
// worker can see (not under /tmp, which the sandbox replaces).
func outsideDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "sandboxd-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadDecidesOnWhatItOpens: the policy's facts name the file Read will open (the name's
// Unicode or spacing variant, the symlink's target), and Read opens that file or nothing.
func TestReadDecidesOnWhatItOpens(t *testing.T) {
	e := newDecideEnv(t, "Read(caf\u00e9.txt)") // NFC
	out := outsideDir(t)
	writeFile(t, out+"/secret.txt", "OUTSIDE-SECRET\n")

	t.Run("NFD spelling of a denied NFC name", func(t *testing.T) {
		e.file(t, "caf\u00e9.txt", "DENIED-CONTENT\n")
		d, r, err := e.decide(t, "Read", Input{"file_path": filepath.Join(e.dir, "cafe\u0301.txt")})
		if d.Behavior != permission.Deny || strings.Contains(text(r), "DENIED-CONTENT") {
			t.Fatalf("decision %s (%s); result %q %v", d.Behavior, d.Reason, text(r), err)
		}
	})
	t.Run("variant name is a symlink out of the workspace", func(t *testing.T) {
		if err := os.Symlink(out+"/secret.txt", filepath.Join(e.dir, "Shot 10.00\u202fAM.txt")); err != nil {
			t.Fatal(err)
		}
		d, r, err := e.decide(t, "Read", Input{"file_path": filepath.Join(e.dir, "Shot 10.00 AM.txt")})
		if d.Behavior == permission.Allow || strings.Contains(text(r), "OUTSIDE-SECRET") {
			t.Fatalf("decision %s (%s); result %q %v", d.Behavior, d.Reason, text(r), err)
		}
	})
	t.Run("variant decided and read", func(t *testing.T) {
		e.file(t, "Clip 9.00\u202fPM.txt", "variant\n")
		d, r, err := e.decide(t, "Read", Input{"file_path": filepath.Join(e.dir, "Clip 9.00 PM.txt")})
		if d.Behavior != permission.Allow || err != nil || !strings.Contains(text(r), "variant") || len(r.ExtraMessages) == 0 {
			t.Fatalf("decision %s (%s); result %+v %v", d.Behavior, d.Reason, r, err)
		}
	})
	t.Run("file swapped after the decision", func(t *testing.T) {
		p := e.file(t, "swap.txt", "decided\n")
		c, d := e.decideOnly(t, "Read", Input{"file_path": p})
		if d.Behavior != permission.Allow {
			t.Fatalf("decision %s (%s)", d.Behavior, d.Reason)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(out+"/secret.txt", p); err != nil {
			t.Fatal(err)
		}
		r, err := c.Tool.Call(context.Background(), c, nil)
		if err == nil || errcode.Of(err) != errcode.Conflict || strings.Contains(text(r), "OUTSIDE-SECRET") {
			t.Fatalf("read a swapped file: %q %v", text(r), err)
		}
	})
	t.Run("missing when decided, created after", func(t *testing.T) {
		p := filepath.Join(e.dir, "later.txt")
		c, d := e.decideOnly(t, "Read", Input{"file_path": p})
		if d.Behavior != permission.Allow {
			t.Fatalf("decision %s (%s)", d.Behavior, d.Reason)
		}
		if err := os.Symlink(out+"/secret.txt", p); err != nil {
			t.Fatal(err)
		}
		r, err := c.Tool.Call(context.Background(), c, nil)
		if errcode.Of(err) != errcode.ErrnoENOENT || strings.Contains(text(r), "OUTSIDE-SECRET") {
			t.Fatalf("read a file created after the decision: %q %v", text(r), err)
		}
	})
}

// TestDenyPathsAreHiddenInTheDecision: a file inside a deny_paths directory is decided as
// hidden, denied in every mode, not allowed as a read that would find nothing. Inside the
// sandbox it is unreachable anyway, but the decision alone is what sbctl hook gives an agent,
// which then reads the file itself: an allow there would hand it ~/.ssh/id_rsa.
func TestDenyPathsAreHiddenInTheDecision(t *testing.T) {
	e := &decideEnv{toolEnv: newToolEnvCfg(t, config.Sandbox{DenyPaths: []string{"~/.secrets", "~/.netrc"}})}
	engine, err := policy.New(context.Background(), policy.Config{}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	t.Cleanup(func() { engine.Close() })
	e.engine = engine
	e.s.SetRuleSet(permission.NewRuleSet(nil, permission.Effective{}, permission.Anchors{Home: e.dir, Cwd: e.dir}))
	key := e.file(t, ".secrets/id_rsa", "PRIVATE-KEY\n")
	e.file(t, ".netrc", "machine x password p\n")
	e.file(t, "ok.txt", "fine\n")
	for _, mode := range []permission.Mode{permission.ModeDefault, permission.ModeBypassPermissions} {
		e.s.Apply(session.Update{Mode: &mode})
		for _, c := range []struct {
			tool string
			in   Input
		}{
			{"Read", Input{"file_path": key}},
			{"Read", Input{"file_path": filepath.Join(e.dir, ".secrets", "missing")}},
			{"Read", Input{"file_path": filepath.Join(e.dir, ".netrc")}},
			{"Grep", Input{"pattern": "KEY", "path": filepath.Join(e.dir, ".secrets")}},
			{"Glob", Input{"pattern": "*", "path": filepath.Join(e.dir, ".secrets")}},
			{"Bash", Input{"command": "cat .secrets/id_rsa"}},
		} {
			_, d := e.decideOnly(t, c.tool, c.in)
			if d.Behavior != permission.Deny || !strings.Contains(d.Reason, "hidden") {
				t.Errorf("%s: %s %v: %s (%s); want a deny saying it is hidden", mode, c.tool, c.in, d.Behavior, d.Reason)
			}
		}
		if _, d := e.decideOnly(t, "Read", Input{"file_path": filepath.Join(e.dir, "ok.txt")}); d.Behavior != permission.Allow {
			t.Errorf("%s: a file outside deny_paths: %s (%s)", mode, d.Behavior, d.Reason)
		}
	}
}

// TestGlobBracesAreCheckedWhereTheyWalk: each brace alternative's literal directories are a
// read where they lead, however many alternatives the pattern has. Past 32 the pattern was
// checked as the text before its first brace, so `{up}/etc/{a,…,*}` was a read inside the
// session while the worker walked up/etc, through a link out of it.
func TestGlobBracesAreCheckedWhereTheyWalk(t *testing.T) {
	e := newDecideEnv(t)
	outside := filepath.Join(filepath.Dir(e.dir), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.dir, "up")); err != nil {
		t.Fatal(err)
	}
	var alts []string
	for i := range 40 {
		alts = append(alts, fmt.Sprintf("zz%d", i))
	}
	for _, p := range []string{"up/etc/*", "{up}/etc/{" + strings.Join(alts, ",") + ",*}", "{up,x}/etc/{" + strings.Join(alts, ",") + "}"} {
		if _, d := e.decideOnly(t, "Glob", Input{"pattern": p}); d.Behavior == permission.Allow {
			t.Errorf("Glob %.40q… walks through a link out of the session: %s (%s); want it checked as a read there", p, d.Behavior, d.Reason)
		}
	}
	// Alternatives that start in more than 32 directories are refused, each named or not.
	c := &Call{Tool: e.defs["Glob"], Input: Input{"pattern": "{" + strings.Join(alts, ",") + "}/*"}, Session: e.s, Mode: e.s.Mode(), host: e.h}
	if _, err := c.Tool.CheckPermissions(context.Background(), c); errcode.Of(err) != errcode.Validation {
		t.Errorf("a Glob starting in 40 directories: %v; want a validation error", err)
	}
	// Expanding is the decision's work too: past 256 alternatives (here 4 096 of one start) the
	// pattern is refused before it is expanded, where it cost 80 ms and 16 MB a decide.
	c.Input = Input{"pattern": "x/" + strings.Repeat("{"+strings.Repeat("a", 300)+",b}", 12)}
	if _, err := c.Tool.CheckPermissions(context.Background(), c); errcode.Of(err) != errcode.Validation {
		t.Errorf("a Glob of 4 096 alternatives: %v; want a validation error", err)
	}
}

// TestPartialCloneGitIsNotReadOnly: in a partial clone git fetches what it lacks as it reads,
// so a git line there is asked in default mode, however git is spelled; elsewhere it is not.
func TestPartialCloneGitIsNotReadOnly(t *testing.T) {
	e := newDecideEnv(t)
	e.file(t, ".git/HEAD", "ref: refs/heads/main\n")
	cfg := e.file(t, ".git/config", "[core]\n\tbare = false\n")
	for _, promisor := range []bool{false, true} {
		if promisor {
			os.WriteFile(cfg, []byte("[remote \"origin\"]\n\turl = http://127.0.0.1:9/x.git\n\tpromisor = true\n"), 0o644)
		}
		for _, cmd := range []string{"git cat-file -p 1234567", "g''it log -p", `gi\t show HEAD`, "ls && command git status"} {
			_, d := e.decideOnly(t, "Bash", Input{"command": cmd})
			if asked := d.Behavior != permission.Allow; asked != promisor {
				t.Errorf("%q, partial clone %v: %s (%s)", cmd, promisor, d.Behavior, d.Reason)
			}
		}
	}
}
