package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

func TestParseInterspersed(t *testing.T) {
	cases := []struct {
		args  []string
		pos   []string
		limit int
	}{
		{[]string{"FILE", "--limit", "3"}, []string{"FILE"}, 3},
		{[]string{"--limit", "3", "FILE"}, []string{"FILE"}, 3},
		{[]string{"A", "B", "--limit=2"}, []string{"A", "B"}, 2},
		{[]string{"--", "--limit", "3"}, []string{"--limit", "3"}, 0},
		{[]string{"A", "--", "-x"}, []string{"A", "-x"}, 0},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		limit := fs.Int("limit", 0, "")
		pos, err := ParseInterspersed(fs, tc.args)
		if err != nil || !reflect.DeepEqual(pos, tc.pos) || *limit != tc.limit {
			t.Errorf("%q: pos %q limit %d err %v; want %q %d", tc.args, pos, *limit, err, tc.pos, tc.limit)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{}, 2, "usage"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"--help"}, 0, "usage"},
		{[]string{"classify", "--json", "--", "ls"}, 3, "heavy classify"},
		{[]string{"policy", "test"}, 3, "heavy policy"},
		{[]string{"audit", "verify", "--dir", "/x"}, 3, "heavy audit"},
		{[]string{"hook", "--on-unavailable", "allow"}, 2, "deny or ask"},
		{[]string{"--socket", "/nonexistent/sock", "status"}, 1, "cannot reach sandboxd"},
		{[]string{"session"}, 2, "usage: sbctl session new"},
		{[]string{"help"}, 0, "usage"},
		{[]string{"session", "--help"}, 0, "usage: sbctl session new"},
		{[]string{"session", "show", "--help"}, 0, "usage of sbctl session show"},
		{[]string{"session", "rm", "-h"}, 0, "usage of sbctl session rm"},
		{[]string{"audit", "pubkey", "--help"}, 0, "usage of sbctl audit pubkey"},
		{[]string{"audit", "export", "--help"}, 0, "usage of sbctl audit export"},
		{[]string{"task", "--help"}, 0, "usage: sbctl task ls"},
		{[]string{"read", "--bogus", "x"}, 2, "flag provided but not defined"},
		{[]string{"session", "new", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"session", "show", "--bogus", "x"}, 2, "flag provided but not defined"},
		{[]string{"audit", "replay", "--json"}, 3, "heavy audit"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		heavy := func(e *Env, name string, args []string) error {
			fmt.Fprintf(e.Stderr, "heavy %s %q", name, args)
			return &ExitError{Code: 3}
		}
		code := Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb, heavy)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("sbctl %q: exit %d, output %q %q; want %d mentioning %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
}

func TestContainmentIsReported(t *testing.T) {
	var errb bytes.Buffer
	e := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}
	res := &protocol.CallResult{Decision: &protocol.Decision{Behavior: protocol.Allow},
		Data: map[string]any{"pids_limited": true, "oom_killed": true, "killed_by": "timeout", "timed_out": true,
			"background_jobs_killed": float64(2)}}
	err := finishBash(e, res, false, "s_1")
	for _, want := range []string{"process limit", "memory limit", "timeout", "killed: timeout", "left 2 background job(s)"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q lacks %q", errb.String(), want)
		}
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 124 {
		t.Errorf("exit = %v, want 124", err)
	}
}

// An asked call tells the user how to run it.
func TestAskSaysHowToRun(t *testing.T) {
	var errb bytes.Buffer
	e := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}
	res := &protocol.CallResult{Decision: &protocol.Decision{Behavior: protocol.Ask, Reason: "default mode: this call is not read-only; ask the user"},
		IsError: true, Content: []protocol.Block{{Type: "text", Text: "permission required: default mode"}}}
	err := finishBash(e, res, true, "s_1")
	if !strings.Contains(errb.String(), "--mode bypassPermissions") || !strings.Contains(errb.String(), "decision: ask") {
		t.Errorf("stderr %q: no decision line or no way to run it", errb.String())
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 126 {
		t.Errorf("exit = %v, want 126", err)
	}
	// After --wait ran out, the hint is not to pass --wait.
	errb.Reset()
	res.ApprovalID = "ap_1"
	_ = finishBash(e, res, true, "s_1")
	if !strings.Contains(errb.String(), "pass --wait D") {
		t.Errorf("an unanswered call without --wait does not suggest it: %q", errb.String())
	}
	errb.Reset()
	e.askWait = 5 * time.Second
	_ = finishBash(e, res, true, "s_1")
	if strings.Contains(errb.String(), "pass --wait") || !strings.Contains(errb.String(), "no answer within --wait 5s") {
		t.Errorf("a call that waited 5s: %q", errb.String())
	}
	// In a session given with --session, a call cannot widen the mode: the hint is a new
	// session.
	errb.Reset()
	e.inSession = true
	_ = finishBash(e, res, true, "s_1")
	if strings.Contains(errb.String(), "pass --mode") || !strings.Contains(errb.String(), "sbctl session new --mode") {
		t.Errorf("a call in a given session: %q", errb.String())
	}
	e.inSession = false
	errb.Reset()
	_ = finishBash(e, &protocol.CallResult{Decision: &protocol.Decision{Behavior: protocol.Deny}}, true, "s_1")
	if strings.Contains(errb.String(), "--mode") {
		t.Errorf("a denied call suggests a mode: %q", errb.String())
	}
}

func TestReadCommandFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	cmd := "echo 'a\nb' \"$(x)\""
	p := write("ok", cmd, 0o600)
	got, err := readCommandFile(p, sum(cmd))
	if err != nil || got != cmd {
		t.Errorf("read %q %v", got, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command file is still there: %v", err)
	}
	cases := []struct{ name, content, sum string }{
		{"nul", "echo a\x00b", ""},
		{"wrong digest", "echo swapped", sum("echo decided")},
	}
	for _, tc := range cases {
		if _, err := readCommandFile(write(tc.name, tc.content, 0o600), tc.sum); err == nil {
			t.Errorf("%s: read", tc.name)
		}
	}
	if _, err := readCommandFile(write("shared", "echo x", 0o622), ""); err == nil {
		t.Error("a file others may write was read")
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", "echo x", 0o600), link); err != nil {
		t.Fatal(err)
	}
	if _, err := readCommandFile(link, ""); err == nil {
		t.Error("a symlink was followed")
	}
}

// Piped, a call's progress adds nothing: the output is exactly the command's.
func TestProgressQuietWhenPiped(t *testing.T) {
	var out, errb bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &errb}
	p := startProgress(e)
	p.write(e.Stdout, "a")
	p.status(protocol.Event{Kind: "status", Data: "stdout continues past 4 MiB"})
	p.write(e.Stderr, "b")
	p.stop()
	if out.String() != "a" || errb.String() != "b" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
}

// TestShellQuote: what the hook's rewrite quotes reads back unchanged in every shell an agent
// may run it in, fish's single quotes (which take \\ and \' as escapes) included.
func TestShellQuote(t *testing.T) {
	values := []string{"plain", "", "it's", "a b", "$(x)", "`x`", "a\nb", "--x=y", "'",
		`a\b`, `a\\b`, `dir\`, `\'`, `it's\`, `\\'\`, "sp ace\\"}
	for _, sh := range []string{"bash", "dash", "zsh", "fish"} {
		if _, err := exec.LookPath(sh); err != nil {
			t.Errorf("%s is not installed (scripts/deps.sh installs it): %v", sh, err)
			continue
		}
		for _, s := range values {
			out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(s)).Output()
			if err != nil || string(out) != s {
				t.Errorf("%q quoted %s: %s gave %q (%v)", s, shellQuote(s), sh, out, err)
			}
		}
	}
}

// TestHookStateDirOnlyOwnRuntimeDir: the hook keeps its state in $XDG_RUNTIME_DIR only when
// that is this user's own dir that no one else may write; else under the home.
func TestHookStateDirOnlyOwnRuntimeDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	own := t.TempDir()
	if err := os.Chmod(own, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", own)
	if d, err := hookStateDir(""); err != nil || d != filepath.Join(own, "sandboxd", "hook") {
		t.Errorf("own runtime dir: %q %v", d, err)
	}
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", shared)
	if d, err := hookStateDir(""); err != nil || d != filepath.Join(home, ".cache", "sandboxd", "hook") {
		t.Errorf("a runtime dir others may write: %q %v, want the home's", d, err)
	}
	if os.Geteuid() == 0 {
		other := t.TempDir()
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		t.Setenv("XDG_RUNTIME_DIR", other)
		if d, err := hookStateDir(""); err != nil || d != filepath.Join(home, ".cache", "sandboxd", "hook") {
			t.Errorf("another user's runtime dir: %q %v, want the home's", d, err)
		}
	}
}

// TestClientLinksLittle: sbctl starts on every tool call an agent makes (the hook, the
// confined rewrite), so what it links is kept small. net brings runtime/cgo, a dynamically
// linked binary and about a millisecond more per start; the heavy packages (OPA, the MCP SDK,
// Prometheus, zap, the JSON Schema compiler) belong to sbctl-full.
func TestClientLinksLittle(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to list sbctl's packages")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/sandboxd/sandboxd/cmd/sbctl").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "net", p == "runtime/cgo", p == "net/http", p == "crypto/tls",
			strings.HasPrefix(p, "github.com/open-policy-agent/"), strings.HasPrefix(p, "github.com/modelcontextprotocol/"),
			strings.HasPrefix(p, "github.com/prometheus/"), strings.HasPrefix(p, "go.uber.org/"),
			strings.HasPrefix(p, "github.com/santhosh-tekuri/"):
			t.Errorf("sbctl links %s", p)
		}
	}
}

// A call that did not run prints nothing on stdout: `sbctl bash -- CMD > out` gets the
// command's output or nothing, never the daemon's message about it.
func TestNotRunPrintsNothingOnStdout(t *testing.T) {
	for _, b := range []string{protocol.Ask, protocol.Deny} {
		var out, errb bytes.Buffer
		e := &Env{Stdout: &out, Stderr: &errb}
		res := &protocol.CallResult{Decision: &protocol.Decision{Behavior: b, Reason: "why"}, IsError: true,
			Content: []protocol.Block{{Type: "text", Text: "permission required: why"}}}
		_ = finishBash(e, res, true, "s_1")
		_ = printResult(e, res)
		if out.Len() != 0 || !strings.Contains(errb.String(), "permission required: why") {
			t.Errorf("%s: stdout %q, stderr %q", b, out.String(), errb.String())
		}
	}
}

// --background prints the task's id alone on stdout, so T=$(sbctl bash --background ...) has
// it; a command moved to the background at its timeout keeps its output and exit 124.
func TestBackgroundPrintsTheTaskID(t *testing.T) {
	var out, errb bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &errb}
	res := &protocol.CallResult{Decision: &protocol.Decision{Behavior: protocol.Allow},
		Content: []protocol.Block{{Type: "text", Text: "Command running in background with ID: bash_1."}},
		Data:    map[string]any{"backgroundTaskId": "bash_1", "stdout": "", "stderr": "", "interrupted": false}}
	if err := finishBash(e, res, true, "s_1"); err != nil || out.String() != "bash_1\n" || !strings.Contains(errb.String(), "sbctl task output bash_1") {
		t.Errorf("exit %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	res.Data = map[string]any{"backgroundTaskId": "bash_2", "timed_out": true, "stdout": "partial\n", "stderr": ""}
	var ee *ExitError
	if err := finishBash(e, res, true, "s_1"); !errors.As(err, &ee) || ee.Code != 124 || out.String() != "partial\n" ||
		!strings.Contains(errb.String(), "goes on in the background as task bash_2: sbctl task output bash_2 --session s_1") {
		t.Errorf("moved at its timeout: exit %v, stdout %q, stderr %q (want the task it went on as)", err, out.String(), errb.String())
	}
	code := Run(context.Background(), []string{"--socket", "/nonexistent", "bash", "--background", "--", "sleep 1"}, strings.NewReader(""), &out, &errb, nil)
	if code != 2 || !strings.Contains(errb.String(), "needs --session") {
		t.Errorf("--background without --session: exit %d, %q", code, errb.String())
	}
	// --cwd with --session would be ignored, the call run where the user did not say.
	for _, cmd := range [][]string{{"bash", "--session", "s_1", "--cwd", "/tmp", "--", "ls"}, {"read", "--session", "s_1", "--cwd", "/tmp", "/etc/hostname"}} {
		errb.Reset()
		code = Run(context.Background(), append([]string{"--socket", "/nonexistent"}, cmd...), strings.NewReader(""), &out, &errb, nil)
		if code != 2 || !strings.Contains(errb.String(), "--cwd sets the short-lived session's cwd") {
			t.Errorf("%v: exit %d, %q", cmd, code, errb.String())
		}
	}
}

// TestFlagHelpNamesTypes: in --help, the word after a flag is its value's type. Go's flag
// package takes a back-quoted word in a usage string for the value's name, so "a Bash `cd`"
// printed a boolean flag as "-persist-cwd cd", as though it took an argument.
func TestFlagHelpNamesTypes(t *testing.T) {
	types := map[string]bool{"string": true, "value": true, "duration": true, "int": true, "uint": true, "float": true, "int64": true, "uint64": true}
	for _, args := range [][]string{
		{"session", "new"}, {"bash"}, {"read"}, {"write"}, {"edit"}, {"glob"}, {"grep"}, {"fetch"},
		{"call"}, {"decide"}, {"hook"}, {"approvals"}, {"approve"}, {"deny"}, {"audit", "query"},
		{"audit", "tail"}, {"audit", "export"}, {"audit", "stats"}, {"policy", "eval"}, {"task", "ls"},
	} {
		var out, errb bytes.Buffer
		Run(context.Background(), append(args, "--help"), strings.NewReader(""), &out, &errb, nil)
		lines := strings.Split(out.String()+errb.String(), "\n")
		if !strings.Contains(out.String()+errb.String(), "  -") {
			t.Errorf("sbctl %q --help lists no flags: %q", args, out.String()+errb.String())
		}
		for _, l := range lines {
			// A one-letter flag's usage follows on the same line, after a tab.
			head, _, _ := strings.Cut(l, "\t")
			f := strings.Fields(head)
			if !strings.HasPrefix(l, "  -") || len(f) < 2 {
				continue
			}
			if !types[f[1]] {
				t.Errorf("sbctl %q --help: %q shows %q where the type goes", args, l, f[1])
			}
		}
	}
}

// TestFetchAskSaysRuleNotMode: an asked WebFetch is not told to use bypassPermissions, which
// lets the call through to the egress proxy that then refuses it; it is told to allow the host.
func TestFetchAskSaysRuleNotMode(t *testing.T) {
	var errb bytes.Buffer
	e := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}
	res := &protocol.CallResult{Tool: "WebFetch", Decision: &protocol.Decision{Behavior: protocol.Ask, Reason: "WebFetch reaches the network"},
		IsError: true, ApprovalID: "ap_1"}
	_ = printResult(e, res)
	if strings.Contains(errb.String(), "bypassPermissions") || !strings.Contains(errb.String(), "WebFetch(domain:") {
		t.Errorf("stderr %q: suggests a mode, or not the rule", errb.String())
	}
}

// An intact verify says how many records no signature covers: they could have been appended
// by anyone with the files, so "intact" alone must not vouch for them.
func TestPrintVerifySaysWhatNoSignatureCovers(t *testing.T) {
	var out bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &bytes.Buffer{}}
	rep := &protocol.VerifyReport{Records: 12, FirstSeq: 1, LastSeq: 12, Signed: true, HeadSeq: 10, Unsigned: 2}
	if err := PrintVerify(e, rep, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "seq 11..12") || !strings.Contains(out.String(), "unsigned") {
		t.Fatalf("verify output does not name the unsigned records:\n%s", out.String())
	}
	// A log whose oldest files are gone says where its history begins.
	out.Reset()
	rep = &protocol.VerifyReport{Records: 5, FirstSeq: 40, LastSeq: 44, Signed: true, HeadSeq: 44, Pruned: true}
	if err := PrintVerify(e, rep, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "starts at seq 40") {
		t.Fatalf("verify output does not say the oldest records are missing:\n%s", out.String())
	}
}

// An agent runs a call whose hook printed nothing, so a hook command the agent's settings
// got wrong must still deny, on stdout and with exit 2.
func TestHookMisconfiguredDenies(t *testing.T) {
	in := `{"session_id":"s1","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf ~"}}`
	for _, flags := range [][]string{
		{"--timeout", "30"}, // seconds, as the agent's settings write its own timeout
		{"--confined"},
		{"--timeout", "-1s"},
		{"--event", "PretoolUse"},
		{"--on-unavailable", "maybe"},
		{"--unknown-tool", "x"},
		{"extra"},
		// Values the daemon refuses were calls it could not decide, which --on-unavailable ask
		// asked about: checked before anything is sent.
		{"--on-unavailable", "ask", "--mode", "Default"},
		{"--on-unavailable", "ask", "--mode", "bubble"},
		{"--on-unavailable", "ask", "--add-dir", "lib"},
		{"--on-unavailable", "ask", "--add-dir", "/srv/../etc"},
		{"--on-unavailable", "ask", "--shell", "/bin/zsh"},
		{"--on-unavailable", "ask", "--state-dir", "state"},
		{"--on-unavailable", "ask", "--deny", " "},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"--socket", "/nonexistent", "hook"}, flags...), strings.NewReader(in), &out, &errb, nil)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", flags, code, errb.String())
		}
		var a hookOutput
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			t.Errorf("%q: stdout %q is not the hook's JSON: %v", flags, out.String(), err)
			continue
		}
		if d := a.HookSpecificOutput; d.PermissionDecision != protocol.Deny || !strings.Contains(d.PermissionDecisionReason, "misconfigured") {
			t.Errorf("%q: answered %+v, want a deny naming the misconfiguration", flags, d)
		}
	}
}

// A hook registered under one event that gets another (--event PostToolUse on a PreToolUse
// input) denies rather than answering nothing, which would let the call run.
func TestHookEventMismatchDenies(t *testing.T) {
	in := `{"session_id":"s1","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`
	var out, errb bytes.Buffer
	Run(context.Background(), []string{"--socket", "/nonexistent", "hook", "--event", "PostToolUse"}, strings.NewReader(in), &out, &errb, nil)
	var a hookOutput
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	if d := a.HookSpecificOutput; d.PermissionDecision != protocol.Deny || !strings.Contains(d.PermissionDecisionReason, "misconfigured") {
		t.Errorf("answered %+v, want a deny naming the misconfiguration", d)
	}
}

// Keys the hook reads, spelled in another case, are refused: Go's decoder would take them for
// the real ones, the agent's reader would not.
func TestHookRefusesKeysInAnotherCase(t *testing.T) {
	in := `{"session_id":"s1","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/tmp/.env"},"TOOL_INPUT":{"file_path":"/tmp/README.md"}}`
	var out, errb bytes.Buffer
	Run(context.Background(), []string{"--socket", "/nonexistent", "hook"}, strings.NewReader(in), &out, &errb, nil)
	var a hookOutput
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	if d := a.HookSpecificOutput; d.PermissionDecision != protocol.Deny || !strings.Contains(d.PermissionDecisionReason, "TOOL_INPUT") {
		t.Errorf("answered %+v, want a deny naming TOOL_INPUT", d)
	}
}

// TestHookDaemonAnswers: only a daemon that is not there to decide (no answer, a 5xx) is
// --on-unavailable's; every refusal of its (4xx) is a deny, and a refusal of the hook's own
// rules a deny with exit 2. The agent can bring about a refusal (fill a limit, send a command
// too large or not valid), and --on-unavailable ask made each an ask, unconfined.
func TestHookDaemonAnswers(t *testing.T) {
	saved := selfCheck
	selfCheck = func() error { return nil } // the test binary is in a build cache
	t.Cleanup(func() { selfCheck = saved })
	refusal := func(status int, class, msg string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.ErrorDetail{Class: class, Message: msg}})
		}
	}
	// A refusal the daemon answers as a call's result, with no decision.
	result := func(status int, class string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(protocol.CallResult{Tool: "Bash", IsError: true, Content: []protocol.Block{},
				Error: &protocol.ErrorDetail{Class: class, Message: class + " refused"}})
		}
	}
	for _, tc := range []struct {
		name           string
		create, decide func(w http.ResponseWriter)
		flags          []string
		want           string
		code           int
		reason         string
	}{
		{"too_many_calls", nil, refusal(429, "too_many_calls", "uid 1000 already runs 16 calls"), nil, protocol.Deny, 0, "too_many_calls"},
		{"too_many_calls, --confine", nil, refusal(429, "too_many_calls", "uid 1000 already runs 16 calls"), []string{"--confine"}, protocol.Deny, 0, "too_many_calls"},
		{"rate_limited as a result", nil, result(429, "rate_limited"), nil, protocol.Deny, 0, "rate_limited"},
		{"too_large", nil, refusal(413, "too_large", "request body is larger than the limit"), nil, protocol.Deny, 0, "too_large"},
		{"not valid", nil, result(422, "validation"), nil, protocol.Deny, 0, "validation"},
		{"a session limit", refusal(409, "conflict", "uid 1000 already has 64 sessions"), nil, nil, protocol.Deny, 0, "conflict"},
		{"a rule the daemon refuses", refusal(422, "validation", `rules: session: deny[0]: malformed permission rule: "Bash(rm -rf *": content must end with ')'`), nil,
			[]string{"--deny", "Bash(rm -rf *"}, protocol.Deny, 2, "misconfigured"},
		{"a settings file the daemon refuses", refusal(422, "validation", "rules: /p/.sandboxd/settings.json:3: deny[0]: malformed permission rule"), nil,
			nil, protocol.Deny, 0, "settings.json"},
		{"a failure of its own", nil, refusal(503, "audit_unavailable", "the audit log is not writable"), nil, protocol.Ask, 0, "audit_unavailable"},
		{"a failure of its own, --confine", nil, refusal(500, "internal", "boom"), []string{"--confine"}, protocol.Ask, 0, "unconfined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
				if tc.create != nil {
					tc.create(w)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				json.NewEncoder(w).Encode(protocol.Session{ID: "s_1"})
			})
			mux.HandleFunc("POST /v1/sessions/{id}/decide", func(w http.ResponseWriter, r *http.Request) {
				tc.decide(w)
			})
			sock := filepath.Join(t.TempDir(), "s.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: mux}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
			cwd := t.TempDir()
			in := `{"session_id":"a1","cwd":"` + cwd + `","hook_event_name":"PreToolUse","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"ls"}}`
			args := append([]string{"--socket", sock, "hook", "--on-unavailable", "ask", "--state-dir", t.TempDir()}, tc.flags...)
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, strings.NewReader(in), &out, &errb, nil)
			var a hookOutput
			if err := json.Unmarshal(out.Bytes(), &a); err != nil {
				t.Fatalf("stdout %q: %v", out.String(), err)
			}
			d := a.HookSpecificOutput
			if d.PermissionDecision != tc.want || code != tc.code || !strings.Contains(d.PermissionDecisionReason, tc.reason) || d.UpdatedInput != nil {
				t.Errorf("%q %q (exit %d, stderr %q), want %q mentioning %q, exit %d", d.PermissionDecision, d.PermissionDecisionReason, code, errb.String(), tc.want, tc.reason, tc.code)
			}
		})
	}
}

// A listing shows an audit.cut_back for what it is: records lost while the daemon was down.
func TestAuditListingShowsCutBack(t *testing.T) {
	var out bytes.Buffer
	printRecord(&out, &protocol.Record{Seq: 10, Kind: "audit.cut_back",
		Detail: map[string]string{"reason": "short", "head_seq": "12", "last_seq": "9"}})
	if !strings.Contains(out.String(), "records lost while the daemon was down (short): signed head seq 12, log ended at seq 9") {
		t.Fatalf("listing: %s", out.String())
	}
}

// A log signed in part by a replaced key that was not given is not called tampered: the header
// says what was not checked, and no record is named bad. One whose every checkpoint was
// checked says the key was replaced.
func TestPrintVerifyKeyReplaced(t *testing.T) {
	var out, errb bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &errb}
	rep := &protocol.VerifyReport{Records: 19, FirstSeq: 1, LastSeq: 19, Signed: true, HeadSeq: 19, KeyReplacements: 1, UncheckedCheckpoints: 3}
	err := PrintVerify(e, rep, errors.New("the signing key was replaced at seq 14"))
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("exit = %v, want 1", err)
	}
	if !strings.HasPrefix(errb.String(), "NOT fully verified: the signing key was replaced at seq 14") || strings.Contains(errb.String(), "first bad record") ||
		!strings.Contains(errb.String(), "in the records read: 0 audit.cut_back, 1 audit.key_replaced (3 checkpoints of a replaced key not checked)") {
		t.Fatalf("stderr:\n%s", errb.String())
	}
	rep.UncheckedCheckpoints = 0
	if err := PrintVerify(e, rep, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "signing key replaced: 1 audit.key_replaced records; every checkpoint before them was checked") {
		t.Fatalf("stdout:\n%s", out.String())
	}
}

// A truncated input names its file at the top, where the listing and --grep read it.
func TestAuditListingShowsTruncatedInputsPath(t *testing.T) {
	var out bytes.Buffer
	in := `{"truncated":true,"bytes":310249,"file_path":"/home/u/proj/target.txt","preview":"{\"edits\":[{\"new_string\":\"nnn…[500 bytes cut]\"}"}`
	printRecord(&out, &protocol.Record{Seq: 3, Kind: "call.end", Tool: "MultiEdit", Input: json.RawMessage(in)})
	if !strings.Contains(out.String(), "/home/u/proj/target.txt") {
		t.Fatalf("listing: %s", out.String())
	}
}
