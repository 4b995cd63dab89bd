package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sandboxd/sandboxd/permission"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const customDenyLs = `package sandboxd.custom

import rego.v1

deny contains "no ls on this host" if {
	input.tool == "Bash"
	some sub in input.bash.subcommands
	sub.argv[0] == "ls"
}

ask contains "writes to /srv need a human" if {
	some f in input.paths
	startswith(f.resolved, "/srv/")
}
`

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

var lsCall = call{cmd: "ls", bash: bash(sub(true, "ls"))}

func decide(t *testing.T, e *Engine, c call) permission.Decision {
	t.Helper()
	d, err := e.Decide(context.Background(), c.facts(), c.ruleSet(t))
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return d
}

func TestCustomPolicy(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "site.rego"), customDenyLs)
	e := newEngine(t, Config{PolicyDir: dir, InsecureSkipOwnerCheck: true})

	d := decide(t, e, lsCall)
	if d.Behavior != permission.Deny || d.Step != "custom_deny" || d.Reason != "no ls on this host" {
		t.Errorf("custom deny not applied: %+v", d)
	}
	// A custom ask is never auto-approved, even with an allow rule and in bypass mode.
	w := call{tool: "Edit", mode: permission.ModeBypassPermissions, paths: []permission.PathFact{wr("/srv/www/index.html")}, allow: []string{"Edit"}}
	if d := decide(t, e, w); d.Behavior != permission.Deny || d.Step != "custom_ask" {
		t.Errorf("custom ask in bypass should deny (bypass never asks): %+v", d)
	}
	w.mode = permission.ModeAuto
	if d := decide(t, e, w); outcome(d) != AU {
		t.Errorf("custom ask in auto should go to a person: %+v", d)
	}
}

func TestCustomPolicyCannotAllow(t *testing.T) {
	for name, src := range map[string]string{
		"other package":   "package sandboxd.main\n\nimport rego.v1\n\ndecision := {\"allow\": true}\n",
		"rules package":   "package sandboxd.rules\n\nimport rego.v1\n\nallow_hit := {\"rule\": \"x\", \"source\": \"x\"}\n",
		"top-level":       "package x\n\nimport rego.v1\n\ny := 1\n",
		"syntax error":    "package sandboxd.custom\n\ndeny contains x if {\n",
		"unsafe var":      "package sandboxd.custom\n\nimport rego.v1\n\ndeny contains x if { y := 1 }\n",
		"network builtin": "package sandboxd.custom\n\nimport rego.v1\n\ndeny contains r if { r := http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1/\"}).body }\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "bad.rego"), src)
			_, err := New(context.Background(), Config{PolicyDir: dir, InsecureSkipOwnerCheck: true}, nil)
			if err == nil {
				t.Fatal("bad custom policy accepted")
			}
			if !errors.Is(err, ErrPolicyCompile) && !errors.Is(err, ErrCustomPackage) {
				t.Errorf("error %v is neither ErrPolicyCompile nor ErrCustomPackage", err)
			}
		})
	}
}

func TestCustomPolicyOwnerCheck(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "site.rego"), customDenyLs)
	if err := os.Chmod(filepath.Join(dir, "site.rego"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Config{PolicyDir: dir}, nil); !errors.Is(err, permission.ErrUntrustedPolicyFile) {
		t.Fatalf("world-writable custom policy accepted: %v", err)
	}
}

func TestReloadKeepsOldPolicyOnError(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var events []ReloadEvent
	e := newEngine(t, Config{PolicyDir: dir, InsecureSkipOwnerCheck: true, OnReload: func(ev ReloadEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	d0 := e.Digest()
	if d := decide(t, e, lsCall); d.Behavior != permission.Allow {
		t.Fatalf("ls should be allowed before the custom policy: %+v", d)
	}
	writeFile(t, filepath.Join(dir, "site.rego"), customDenyLs)
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	d1 := e.Digest()
	if d1 == d0 {
		t.Error("digest unchanged after adding a module")
	}
	if d := decide(t, e, lsCall); d.Behavior != permission.Deny {
		t.Fatalf("custom deny not in force after reload: %+v", d)
	}
	writeFile(t, filepath.Join(dir, "site.rego"), "package sandboxd.custom\n\ndeny contains x if {\n")
	err := e.Reload(context.Background())
	if !errors.Is(err, ErrPolicyCompile) || !strings.Contains(err.Error(), "rego_parse_error") {
		t.Fatalf("broken file: want OPA's parse error, got %v", err)
	}
	if e.Digest() != d1 {
		t.Error("broken reload replaced the policy")
	}
	if d := decide(t, e, lsCall); d.Behavior != permission.Deny {
		t.Fatalf("old policy not kept: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3 || events[0].Trigger != "start" || events[1].Digest != d1 || events[2].Err == nil || events[2].Digest != d1 {
		t.Errorf("reload events: %+v", events)
	}
}

func TestWatcherReloads(t *testing.T) {
	dir := t.TempDir()
	reloaded := make(chan ReloadEvent, 8)
	e := newEngine(t, Config{PolicyDir: dir, InsecureSkipOwnerCheck: true, WatchInterval: 20 * time.Millisecond,
		OnReload: func(ev ReloadEvent) { reloaded <- ev }})
	<-reloaded // start
	writeFile(t, filepath.Join(dir, "site.rego"), customDenyLs)
	select {
	case ev := <-reloaded:
		if ev.Trigger != "watch" || ev.Err != nil {
			t.Fatalf("watch reload: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not reload")
	}
	if d := decide(t, e, lsCall); d.Behavior != permission.Deny {
		t.Fatalf("watched change not in force: %+v", d)
	}
}

// TestReloadConcurrent swaps policies while decisions run: every decision sees one whole
// policy (allow before, deny after), never an error or a mix.
func TestReloadConcurrent(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, Config{PolicyDir: dir, InsecureSkipOwnerCheck: true})
	rs := lsCall.ruleSet(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := e.Decide(context.Background(), lsCall.facts(), rs)
				if err != nil || (d.Behavior != permission.Allow && d.Step != "custom_deny") {
					errs <- errors.New("bad decision during reload: " + d.Reason)
					return
				}
			}
		}()
	}
	for i := range 6 {
		if i%2 == 0 {
			writeFile(t, filepath.Join(dir, "site.rego"), customDenyLs)
		} else if err := os.Remove(filepath.Join(dir, "site.rego")); err != nil {
			t.Fatal(err)
		}
		if err := e.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDecideErrors(t *testing.T) {
	e := newEngine(t, Config{})
	if _, err := e.Decide(context.Background(), nil, nil); !errors.Is(err, ErrNilFacts) {
		t.Errorf("nil facts: %v", err)
	}
	var zero Engine
	d, err := zero.Decide(context.Background(), lsCall.facts(), lsCall.ruleSet(t))
	if !errors.Is(err, ErrPolicyNotLoaded) || d.Behavior != permission.Deny {
		t.Errorf("unloaded engine: %+v %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := e.Decide(ctx, lsCall.facts(), lsCall.ruleSet(t)); err == nil || d.Behavior != permission.Deny {
		t.Errorf("cancelled context must deny with an error: %+v %v", d, err)
	}
}

func TestDecisionCache(t *testing.T) {
	e := newEngine(t, Config{DecisionCacheSize: 2})
	rs := lsCall.ruleSet(t)
	for range 3 {
		d, err := e.Decide(context.Background(), lsCall.facts(), rs)
		if err != nil || d.Behavior != permission.Allow {
			t.Fatalf("%+v %v", d, err)
		}
	}
	other := call{cmd: "make", bash: bash(sub(false, "make"))}
	if d, _ := e.Decide(context.Background(), other.facts(), rs); d.Behavior != permission.Ask {
		t.Errorf("cache returned another call's decision: %+v", d)
	}
	if n := e.cache.lru.Len(); n != 2 {
		t.Errorf("cache size %d", n)
	}
}

func TestRunTestsWithCustom(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "site.rego"), customDenyLs)
	writeFile(t, filepath.Join(dir, "site_test.rego"), `package sandboxd.custom_site_test

import data.sandboxd.custom
import rego.v1

test_denies_ls if {
	count(custom.deny) == 1 with input as {"tool": "Bash", "bash": {"subcommands": [{"argv": ["ls"]}]}, "paths": []}
}
`)
	report, ok, err := RunTests(context.Background(), dir)
	if err != nil || !ok {
		t.Fatalf("RunTests: ok=%v err=%v\n%s", ok, err, report)
	}
	if !strings.Contains(report, "coverage:") || !strings.Contains(report, "site.rego") {
		t.Errorf("report lacks coverage:\n%s", report)
	}
	writeFile(t, filepath.Join(dir, "site_test.rego"), "package sandboxd.custom_site_test\n\nimport rego.v1\n\ntest_fails if { 1 == 2 }\n")
	if _, ok, err := RunTests(context.Background(), dir); ok || err != nil {
		t.Errorf("failing custom test reported ok=%v err=%v", ok, err)
	}
	// No tests at all fails, and says so: an exit status alone leaves the admin guessing.
	if err := os.Remove(filepath.Join(dir, "site_test.rego")); err != nil {
		t.Fatal(err)
	}
	if report, ok, err := RunTests(context.Background(), dir); ok || err != nil || !strings.Contains(report, "no tests") {
		t.Errorf("custom policy without tests: ok=%v err=%v\n%s", ok, err, report)
	}
	// A host with no custom policy dir tests the embedded policy alone, and says why.
	if report, ok, err := RunTests(context.Background(), filepath.Join(dir, "absent")); !ok || err != nil || !strings.Contains(report, "no such directory") {
		t.Errorf("no custom policy dir: ok=%v err=%v\n%s", ok, err, report)
	}
}

func TestExplain(t *testing.T) {
	e := newEngine(t, Config{})
	c := call{cmd: "git push", bash: bash(sub(false, "git", "push")), ask: []string{"Bash(git push *)"}}
	d, trace, err := e.Explain(context.Background(), c.facts(), c.ruleSet(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Step != "ask_rule" || !strings.Contains(trace, "main.rego") || !strings.Contains(trace, "rules.rego") {
		t.Errorf("explain: %+v\n%s", d, trace)
	}
}

// TestCustomReadsHTTP: an admin module that may decide by a request's method or path
// (input.http, input whole, or a key of input known only when evaluated) is told apart from
// one that cannot, so the proxy can hold tunnels, whose requests it cannot see, accordingly.
func TestCustomReadsHTTP(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]bool{
		`deny contains "x" if input.http.method == "DELETE"`:            true,
		`deny contains "x" if startswith(input["http"].path, "/admin")`: true,
		`deny contains "x" if { i := input; i.http.path == "/x" }`:      true,
		`deny contains "x" if { k := "http"; input[k] }`:                true,
		`deny contains "x" if input.tool == "Bash"`:                     false,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "c.rego"), []byte("package sandboxd.custom\n\n"+src+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := New(context.Background(), Config{PolicyDir: dir}, nil)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := e.CustomReadsHTTP(); got != want {
			t.Errorf("%s: reads http %v, want %v", src, got, want)
		}
		e.Close()
	}
}
