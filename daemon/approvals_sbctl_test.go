package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// sbctlAsync starts the CLI as u and returns what waits for it: stdout, stderr, exit code.
func sbctlAsync(t *testing.T, bin, socket string, u testutil.User, args ...string) func() (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--socket", socket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: userGroups(t, &u)}}
	cmd.Dir = u.Home
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sbctl: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var code int
	go func() {
		defer close(done)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
	}()
	return func() (string, string, int) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("sbctl %q did not end", args)
		}
		return out.String(), errb.String(), code
	}
}

// sbApproval is the part of `sbctl approvals --json` the tests read; the field names are the
// scripting contract.
type sbApproval struct {
	ID             string          `json:"id"`
	Session        string          `json:"session"`
	ParentSession  string          `json:"parent_session"`
	Tool           string          `json:"tool"`
	Input          json.RawMessage `json:"input"`
	Reason         string          `json:"reason"`
	SuggestedRules []string        `json:"suggested_rules"`
	Preview        *struct {
		Path string `json:"path"`
		Diff string `json:"diff"`
	} `json:"preview"`
}

// pendingVia polls `sbctl approvals --json` as u until an approval whose input mentions
// want appears.
func pendingVia(t *testing.T, bin, socket string, u testutil.User, want string) sbApproval {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		out, errOut, code := sbctl(t, bin, socket, &u, "approvals", "--json")
		if code != 0 {
			t.Fatalf("sbctl approvals --json: exit %d: %s", code, errOut)
		}
		var list []sbApproval
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("sbctl approvals --json printed %q: %v", out, err)
		}
		for _, a := range list {
			if strings.Contains(string(a.Input), want) {
				return a
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no approval for %q appeared", want)
	return sbApproval{}
}

// TestApprovalsTwoTerminals is issue 18's "two terminals": one runs `sbctl bash --wait` in
// default mode, the other lists with `sbctl approvals --json` and answers with `sbctl
// approve|deny`; another user can neither see nor answer; --remember session makes the
// identical call run next time without asking.
func TestApprovalsTwoTerminals(t *testing.T) {
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	alice := testutil.CreateUser(t, "sbtta")
	bob := testutil.CreateUser(t, "sbttb")

	t.Run("approve", func(t *testing.T) {
		wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--wait", "20s", "--", "touch x")
		a := pendingVia(t, bin, td.socket, alice, "touch x")
		if a.ID == "" || a.Session == "" || a.Tool != "Bash" || a.Reason == "" || len(a.SuggestedRules) == 0 || a.ParentSession != "" {
			t.Fatalf("approval as listed: %+v", a)
		}
		if _, err := os.Stat(filepath.Join(alice.Home, "x")); err == nil {
			t.Fatal("x exists before the approval was answered")
		}
		// Bob sees nothing and cannot answer: not found, as for any id he does not own.
		out, _, _ := sbctl(t, bin, td.socket, &bob, "approvals", "--json")
		if strings.TrimSpace(out) != "[]" {
			t.Fatalf("bob's approvals: %q", out)
		}
		_, errOut, code := sbctl(t, bin, td.socket, &bob, "approve", a.ID)
		if code == 0 || !strings.Contains(errOut, "not_found") {
			t.Fatalf("bob approving: exit %d, %q; want a failure, not found", code, errOut)
		}
		out, errOut, code = sbctl(t, bin, td.socket, &alice, "approve", a.ID)
		if code != 0 || !strings.Contains(out, a.ID+": allow") {
			t.Fatalf("sbctl approve: exit %d, %q %q", code, out, errOut)
		}
		_, errOut, code = wait()
		if code != 0 {
			t.Fatalf("the waiting sbctl bash exited %d: %s", code, errOut)
		}
		if _, err := os.Stat(filepath.Join(alice.Home, "x")); err != nil {
			t.Fatalf("approved touch x did not create it: %v", err)
		}
		// Answered twice: refused.
		if _, _, code := sbctl(t, bin, td.socket, &alice, "approve", a.ID); code == 0 {
			t.Fatal("an approval was answered twice")
		}
	})

	t.Run("deny", func(t *testing.T) {
		wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--wait", "20s", "--", "touch y")
		a := pendingVia(t, bin, td.socket, alice, "touch y")
		if _, errOut, code := sbctl(t, bin, td.socket, &alice, "deny", a.ID, "--message", "not on a Friday"); code != 0 {
			t.Fatalf("sbctl deny: exit %d: %s", code, errOut)
		}
		_, errOut, code := wait()
		if code != 126 || !strings.Contains(errOut, "not on a Friday") {
			t.Fatalf("denied sbctl bash: exit %d, stderr %q; want 126 with the message", code, errOut)
		}
		if _, err := os.Stat(filepath.Join(alice.Home, "y")); err == nil {
			t.Fatal("a denied call ran")
		}
	})

	t.Run("remember session", func(t *testing.T) {
		out, errOut, code := sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", alice.Home)
		if code != 0 {
			t.Fatalf("session new: %d %s", code, errOut)
		}
		sid := strings.TrimSpace(out)
		wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--session", sid, "--wait", "20s", "--", "touch z")
		a := pendingVia(t, bin, td.socket, alice, "touch z")
		out, errOut, code = sbctl(t, bin, td.socket, &alice, "approve", a.ID, "--remember", "session")
		if code != 0 || !strings.Contains(out, "remembered Bash(touch z) in session") {
			t.Fatalf("approve --remember session: exit %d, %q %q", code, out, errOut)
		}
		if _, errOut, code := wait(); code != 0 {
			t.Fatalf("approved call exited %d: %s", code, errOut)
		}
		// The identical call runs at once, no --wait, nothing asked.
		out, errOut, code = sbctl(t, bin, td.socket, &alice, "--json", "bash", "--session", sid, "--", "touch z")
		var res struct {
			Decision struct {
				Behavior string `json:"behavior"`
			} `json:"decision"`
			ApprovalID string `json:"approval_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Decision.Behavior != "allow" || res.ApprovalID != "" {
			t.Fatalf("the remembered call: exit %d, %s %s", code, out, errOut)
		}
	})

	t.Run("no wait", func(t *testing.T) {
		// Without --wait nothing waits: the ask and its approval id come back at once.
		start := time.Now()
		out, _, code := sbctl(t, bin, td.socket, &alice, "--json", "bash", "--", "touch w")
		var res struct {
			Decision struct {
				Behavior string `json:"behavior"`
			} `json:"decision"`
			ApprovalID string `json:"approval_id"`
		}
		if code != 126 || json.Unmarshal([]byte(out), &res) != nil || res.Decision.Behavior != "ask" || res.ApprovalID == "" {
			t.Fatalf("no --wait: exit %d, %s", code, out)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("no --wait took %s", el)
		}
	})

	t.Run("bubble", func(t *testing.T) {
		out, _, code := sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", alice.Home)
		if code != 0 {
			t.Fatal("parent session")
		}
		parent := strings.TrimSpace(out)
		out, errOut, code := sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", alice.Home, "--parent", parent, "--mode", "bubble")
		if code != 0 {
			t.Fatalf("child session: %s", errOut)
		}
		child := strings.TrimSpace(out)
		wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--session", child, "--wait", "20s", "--", "touch b")
		a := pendingVia(t, bin, td.socket, alice, "touch b")
		if a.Session != child || a.ParentSession != parent {
			t.Fatalf("bubbled approval names %q → %q, want %q → %q", a.Session, a.ParentSession, child, parent)
		}
		if _, errOut, code := sbctl(t, bin, td.socket, &alice, "approve", a.ID); code != 0 {
			t.Fatalf("approve: %s", errOut)
		}
		if _, errOut, code := wait(); code != 0 {
			t.Fatalf("bubbled call exited %d: %s", code, errOut)
		}
	})

	t.Run("watch", func(t *testing.T) {
		// Not a terminal: one line per event, created then answered.
		wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--wait", "20s", "--", "touch v")
		a := pendingVia(t, bin, td.socket, alice, "touch v")
		watch := exec.Command(bin, "--socket", td.socket, "approvals", "--watch", "--json")
		var out bytes.Buffer
		watch.Stdout = &out
		watch.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: alice.UID, Gid: alice.GID}}
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
		time.Sleep(300 * time.Millisecond)
		if _, errOut, code := sbctl(t, bin, td.socket, &alice, "approve", a.ID); code != 0 {
			t.Fatalf("approve: %s", errOut)
		}
		if _, errOut, code := wait(); code != 0 {
			t.Fatalf("watched call exited %d: %s", code, errOut)
		}
		time.Sleep(300 * time.Millisecond)
		_ = watch.Process.Kill()
		_ = watch.Wait()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 || !strings.Contains(lines[0], `"type":"created"`) || !strings.Contains(lines[0], a.ID) ||
			!strings.Contains(lines[len(lines)-1], `"type":"answered"`) {
			t.Fatalf("approvals --watch --json printed:\n%s", out.String())
		}
	})
}

// TestApprovalHooks: a PermissionRequest hook answers a pending approval (allow, or deny
// with its message; silence leaves it for a person, and so does its allow of what only a
// person approves), and a PreToolUse hook that exits 2
// blocks the call with its stderr as the reason (COMPAT.md's hook contract).
func TestApprovalHooks(t *testing.T) {
	dir := rootDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	perm := filepath.Join(dir, "perm.sh")
	pre := filepath.Join(dir, "pre.sh")
	scripts := map[string]string{
		perm: `#!/bin/sh
in=$(cat)
case "$in" in
*'"hook_event_name":"PermissionRequest"'*) ;;
*) echo "not a PermissionRequest event: $in" >&2; exit 1 ;;
esac
case "$in" in
*hook-allows*) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}' ;;
*hook-denies*) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"the hook says no"}}}' ;;
esac
exit 0
`,
		pre: `#!/bin/sh
case "$(cat)" in
*forbidden-by-hook*) echo "policy hook: that command is blocked" >&2; exit 2 ;;
esac
exit 0
`,
	}
	for p, s := range scripts {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	td := startDaemon(t, fmt.Sprintf(`hooks:
  PermissionRequest:
    - matcher: Bash
      hooks: [{type: command, command: %q, timeout: 10}]
  PreToolUse:
    - matcher: Bash
      hooks: [{type: command, command: %q, timeout: 10}]
`, perm, pre))
	bin := buildSbctl(t)
	alice := testutil.CreateUser(t, "sbhka")

	// The hook allows: the waiting call runs without a person.
	_, errOut, code := sbctl(t, bin, td.socket, &alice, "bash", "--wait", "10s", "--", "touch hook-allows")
	if code != 0 {
		t.Fatalf("hook-allowed call: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(alice.Home, "hook-allows")); err != nil {
		t.Fatalf("hook-allowed call did not run: %v", err)
	}
	// The hook denies with a message: exit 126 with it.
	_, errOut, code = sbctl(t, bin, td.socket, &alice, "bash", "--wait", "10s", "--", "touch hook-denies")
	if code != 126 || !strings.Contains(errOut, "the hook says no") || !strings.Contains(errOut, "hook") {
		t.Fatalf("hook-denied call: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(alice.Home, "hook-denies")); err == nil {
		t.Fatal("a hook-denied call ran")
	}
	// The hook says nothing: the approval waits for a person.
	wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--wait", "20s", "--", "touch hook-silent")
	a := pendingVia(t, bin, td.socket, alice, "hook-silent")
	if _, errOut, code := sbctl(t, bin, td.socket, &alice, "deny", a.ID); code != 0 {
		t.Fatalf("deny: %s", errOut)
	}
	if _, _, code := wait(); code != 126 {
		t.Fatalf("person-denied call exited %d", code)
	}
	// A critical-path rm only a person approves (COMPAT): the hook's allow is not taken, and
	// the approval waits for a person.
	wait = sbctlAsync(t, bin, td.socket, alice, "bash", "--wait", "20s", "--", "rmdir /usr # hook-allows")
	a = pendingVia(t, bin, td.socket, alice, "hook-allows")
	if _, errOut, code := sbctl(t, bin, td.socket, &alice, "deny", a.ID); code != 0 {
		t.Fatalf("deny: %s", errOut)
	}
	if _, _, code := wait(); code != 126 {
		t.Fatalf("critical rm denied by a person exited %d", code)
	}
	// PreToolUse exit 2: blocked, with the hook's stderr as the reason, and no approval queued.
	out, errOut, code := sbctl(t, bin, td.socket, &alice, "--json", "bash", "--", "touch forbidden-by-hook")
	var res struct {
		Decision struct {
			Behavior string `json:"behavior"`
			Reason   string `json:"reason"`
		} `json:"decision"`
		ApprovalID string `json:"approval_id"`
	}
	if json.Unmarshal([]byte(out), &res) != nil || code != 126 || res.Decision.Behavior != "deny" ||
		!strings.Contains(res.Decision.Reason, "policy hook: that command is blocked") || res.ApprovalID != "" {
		t.Fatalf("PreToolUse exit 2: exit %d, %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(alice.Home, "forbidden-by-hook")); err == nil {
		t.Fatal("a hook-blocked call ran")
	}
}

// TestApprovalsShowWhatRuns: an agent's command written to look like another on a terminal
// (a carriage return and an erase-line sequence drawing `ls -la` over it, a right-to-left
// override) reaches the approver, the waiting client and the audit reader as visible escapes,
// never as characters their terminal would act on.
func TestApprovalsShowWhatRuns(t *testing.T) {
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	alice := testutil.CreateUser(t, "sbtvis")
	hostile := "touch pwned # \r\x1b[2K\u202els -la"
	shown := `touch pwned # \x0d\x1b[2K\u202els -la`
	acted := func(s string) bool { return strings.ContainsAny(s, "\r\x1b\u202e") }

	wait := sbctlAsync(t, bin, td.socket, alice, "bash", "--wait", "20s", "--", hostile)
	a := pendingVia(t, bin, td.socket, alice, "touch pwned")
	out, errOut, code := sbctl(t, bin, td.socket, &alice, "approvals")
	if code != 0 || acted(out) || !strings.Contains(out, shown) {
		t.Errorf("sbctl approvals: exit %d, %q (%s); want the command shown as %q", code, out, errOut, shown)
	}
	if out, errOut, code = sbctl(t, bin, td.socket, &alice, "deny", a.ID); code != 0 {
		t.Fatalf("sbctl deny: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, _ = wait()
	if acted(out + errOut) {
		t.Errorf("the waiting sbctl bash printed characters a terminal acts on: %q %q", out, errOut)
	}
	// The audit reader (root) sees the same.
	out, errOut, code = sbctl(t, bin, td.socket, nil, "audit", "tail", "-n", "50")
	if code != 0 || acted(out) || !strings.Contains(out, `touch pwned # \x0d\x1b[2K`) {
		t.Errorf("sbctl audit tail: exit %d, %q (%s)", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(alice.Home, "pwned")); err == nil {
		t.Error("the denied command ran")
	}
}
