package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/protocol"
)

func decide(t *testing.T, td *testDaemon, id, tool, input string) string {
	t.Helper()
	code, b := td.do(t, "POST", "/v1/sessions/"+id+"/decide", fmt.Sprintf(`{"tool":%q,"input":%s}`, tool, input))
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != 200 || res.Decision == nil {
		t.Fatalf("decide: %d %s", code, b)
	}
	return string(res.Decision.Behavior)
}

// A project's settings may deny and ask in any session, but allow only where the session
// trusts its project.
func TestProjectSettingsNeedTrustToAllow(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".sandboxd"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"permissions":{"allow":["Bash(touch made)"],"deny":["Read(secret.txt)"]}}`
	if err := os.WriteFile(filepath.Join(dir, ".sandboxd", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := fmt.Sprintf(`{"file_path":%q}`, filepath.Join(dir, "secret.txt"))
	untrusted := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	trusted := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"trust_project":true}`, dir))
	cases := []struct {
		name, id, tool, input, want string
	}{
		{"untrusted allow waits", untrusted.ID, "Bash", `{"command":"touch made"}`, "ask"},
		{"untrusted deny applies", untrusted.ID, "Read", secret, "deny"},
		{"trusted allow applies", trusted.ID, "Bash", `{"command":"touch made"}`, "allow"},
		{"trusted deny applies", trusted.ID, "Read", secret, "deny"},
	}
	for _, tc := range cases {
		if got := decide(t, td, tc.id, tc.tool, tc.input); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// A broken project settings file refuses the session with the file named.
	if err := os.WriteFile(filepath.Join(dir, ".sandboxd", "settings.json"), []byte(`{"permissions":{"allow":["Bash(("]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"trust_project":true}`, dir))
	if code != 422 || !strings.Contains(string(b), "settings.json") {
		t.Errorf("broken settings: %d %s", code, b)
	}
}

// An admin deny added while sessions are open applies to them after a reload; a broken admin
// file is refused and the rules in force stay.
func TestAdminSettingsReloadReachesOpenSessions(t *testing.T) {
	policyDir := filepath.Join(t.TempDir(), "policy.d")
	if err := os.Mkdir(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, "policy_dir: "+policyDir+"\n")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	if got := decide(t, td, s.ID, "Bash", `{"command":"curl example.com"}`); got != "allow" {
		t.Fatalf("before the admin rule: %s", got)
	}
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(policyDir, "org.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"permissions":{"deny":["Bash(curl *)"]}}`)
	td.d.Reload()
	waitFor(t, func() bool { return decide(t, td, s.ID, "Bash", `{"command":"curl example.com"}`) == "deny" })

	write(`{"permissions":{"deny":["Bash(curl *"]}}`) // malformed rule
	td.d.Reload()
	time.Sleep(300 * time.Millisecond)
	if got := decide(t, td, s.ID, "Bash", `{"command":"curl example.com"}`); got != "deny" {
		t.Errorf("a broken admin file weakened the rules: %s", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("condition not met within 5 s")
}

// SIGHUP reloads the configuration: hooks added afterwards apply to the next call; a broken
// file keeps the running configuration.
func TestConfigReloadAppliesHooks(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	if _, res := td.call(t, s.ID, "Bash", `{"command":"echo before"}`); res.IsError {
		t.Fatalf("before reload: %+v", res)
	}
	cfgPath := td.d.opts.ConfigPath
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	hook := "hooks:\n  PreToolUse:\n  - matcher: Bash\n    hooks:\n    - type: command\n      command: \"echo no echo today >&2; exit 2\"\n      timeout: 10\n"
	if err := os.WriteFile(cfgPath, append(append([]byte{}, orig...), hook...), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	_, res := td.call(t, s.ID, "Bash", `{"command":"echo after"}`)
	if !res.IsError || res.Decision == nil || res.Decision.Behavior != "deny" || !strings.Contains(res.Decision.Reason, "no echo today") {
		t.Fatalf("after reload with a blocking hook: %+v", res)
	}
	if err := os.WriteFile(cfgPath, []byte("max_parallel_calls: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	if _, res := td.call(t, s.ID, "Bash", `{"command":"echo again"}`); !res.IsError {
		t.Errorf("a broken config file replaced the running one: %+v", res.Decision)
	}
}

// TestUnclassifiedBashNeverSlipsPastRules: a command the classifier does not classify (nested
// so deep that its commands' texts add up past its bound) is treated as one that did not
// parse: asked for, or denied in the modes that never ask. It once read as a line of no
// commands, which no deny rule matched (`rm -f victim; #` and 64 KiB of padding, then past the
// classifier's read bound, ran in bypassPermissions under a Bash(rm:*) deny), and the
// classification of such nesting cost the daemon tens of seconds.
func TestUnclassifiedBashNeverSlipsPastRules(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := "echo ok; " + strings.Repeat("$(", 20000) + "rm -f " + victim + strings.Repeat(")", 20000)
	for mode, want := range map[string]string{"bypassPermissions": "deny", "default": "ask", "acceptEdits": "ask", "dontAsk": "deny"} {
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":%q,"rules":{"deny":["Bash(rm:*)"]}}`, dir, mode))
		if got := decide(t, td, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, deep)); got != want {
			t.Errorf("%s, an rm 20 000 substitutions deep under a Bash(rm:*) deny: %s, want %s", mode, got, want)
		}
	}
	// The longest command bash -c takes is parsed, so its rm meets the deny rule.
	padded := "echo ok; rm -f " + victim + "; #"
	padded += strings.Repeat("x", executor.MaxBashCommandBytes-len(padded))
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Bash(rm:*)"]}}`, dir))
	code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/calls", fmt.Sprintf(`{"tool":"Bash","input":{"command":%q}}`, padded))
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != 200 || res.Decision == nil || res.Decision.Behavior != "deny" || res.Decision.Rule != "Bash(rm:*)" {
		t.Errorf("the padded rm as a call: %d %.300s", code, b)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the padded rm ran: %v", err)
	}
}

// A command the caller runs itself (an agent's hook) is decided as its own shell reads it:
// for zsh a glob qualifier that runs code is asked even in a read-only-looking ls, and even
// under an allow rule that matches ls; the decision record names the shell. sandboxd itself
// runs Bash with bash, so a call that names another shell is refused.
func TestDecideForTheCallersShell(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"rules":{"allow":["Bash(cat:*)"]}}`, dir))
	qualifier := `{"command":"ls *(e:'touch pwned':)"}`
	cases := []struct {
		shell, input, want, why string
	}{
		// Run by sandboxd (no shell named), the glob meets the sandbox; run by the caller in
		// bash, it names paths known only when it runs, which nothing there holds.
		{"", qualifier, "allow", "read-only"},
		{"bash", qualifier, "ask", "known only when it runs"},
		{"zsh", qualifier, "ask", "zsh"},
		{"bash", `{"command":"cat *(e.'id > pwned'.)"}`, "ask", "known only when it runs"},
		{"zsh", `{"command":"cat *(e.'id > pwned'.)"}`, "ask", "zsh"},
		{"zsh", `{"command":"ls -la"}`, "allow", "read-only"},
		{"sh", `{"command":"echo $'a\\' ; touch pwned ; # '"}`, "ask", "sh"},
		{"dash", `{"command":"echo $'a\\' ; touch pwned ; # '"}`, "ask", "sh"},
		{"bash", `{"command":"echo $'a\\' ; touch pwned ; # '"}`, "allow", "read-only"},
		{"fish", `{"command":"ls"}`, "ask", "fish"},
	}
	for i, tc := range cases {
		body := fmt.Sprintf(`{"tool":"Bash","input":%s,"shell":%q,"tool_use_id":"toolu_sh_%d"}`, tc.input, tc.shell, i)
		code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/decide", body)
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != 200 || res.Decision == nil {
			t.Fatalf("decide %s: %d %s", body, code, b)
		}
		if res.Decision.Behavior != tc.want || !strings.Contains(res.Decision.Reason, tc.why) {
			t.Errorf("%s %s: %s (%s), want %s mentioning %q", tc.shell, tc.input, res.Decision.Behavior, res.Decision.Reason, tc.want, tc.why)
		}
	}
	shells := map[string]string{}
	for r, err := range audit.Query(filepath.Join(td.state, "audit"), audit.Filter{Kinds: []audit.Kind{audit.KindCallDecide}}) {
		if err != nil {
			t.Fatal(err)
		}
		shells[r.ToolUseID] = r.Detail["shell"]
	}
	if shells["toolu_sh_2"] != "zsh" || shells["toolu_sh_7"] != "dash" || shells["toolu_sh_1"] != "" {
		t.Errorf("the decision records name the shell: %v", shells)
	}
	for _, bad := range []struct{ path, body, why string }{
		{"/calls", `{"tool":"Bash","input":{"command":"ls"},"shell":"zsh"}`, "decide only"},
		{"/batch", `{"calls":[{"tool":"Bash","input":{"command":"ls"},"shell":"zsh"}]}`, "decide only"},
		{"/decide", `{"tool":"Bash","input":{"command":"ls"},"shell":"/bin/zsh"}`, "shell's name"},
		{"/decide", `{"tool":"Bash","input":{"command":"ls"},"shell":"` + strings.Repeat("z", 40) + `"}`, "shell's name"},
	} {
		if code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+bad.path, bad.body); code != 400 || !strings.Contains(string(b), bad.why) {
			t.Errorf("%s %s: %d %s, want 400 saying %q", bad.path, bad.body, code, b, bad.why)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("something ran a decided command")
	}
}
