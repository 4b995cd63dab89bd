package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
	"golang.org/x/sys/unix"
)

// trustFixture is a throwaway user with a project dir (a git repository) and the files an
// agent that breaks out would go for.
type trustFixture struct {
	td   *testDaemon
	bin  string
	u    testutil.User
	proj string
}

func newTrustFixture(t *testing.T, prefix string) *trustFixture {
	t.Helper()
	f := &trustFixture{td: startDaemon(t, ""), bin: buildSbctl(t), u: testutil.CreateUser(t, prefix)}
	f.proj = filepath.Join(f.u.Home, "p")
	for _, d := range []string{filepath.Join(f.proj, "sub"), filepath.Join(f.u.Home, ".config", "sandboxd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{
		filepath.Join(f.u.Home, ".bashrc"):                              "# rc\n",
		filepath.Join(f.u.Home, ".config", "sandboxd", "settings.json"): "{}\n",
		filepath.Join(f.proj, "README"):                                 "hello\n",
	} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", f.proj).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), f.u.Home).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	return f
}

func (f *trustFixture) sbctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return sbctl(t, f.bin, f.td.socket, &f.u, args...)
}

func (f *trustFixture) session(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := f.sbctl(t, append([]string{"session", "new", "--cwd", f.proj}, args...)...)
	if code != 0 {
		t.Fatalf("session new %v: %d %s", args, code, errOut)
	}
	return strings.TrimSpace(out)
}

func (f *trustFixture) show(t *testing.T, id string) protocol.Session {
	t.Helper()
	out, errOut, code := f.sbctl(t, "--json", "session", "show", id)
	if code != 0 {
		t.Fatalf("session show: %s", errOut)
	}
	var s protocol.Session
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("session show printed %q: %v", out, err)
	}
	return s
}

func (f *trustFixture) unchanged(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s changed on the host: %q (%v), want %q", path, b, err, want)
	}
}

// TestReadOnlyAllowRunsReadOnly: in default mode a call allowed because it classifies as
// read-only runs with no writable mount, so a command the classifier misjudges still cannot
// write (the array-subscript family ran code through printf -v).
func TestReadOnlyAllowRunsReadOnly(t *testing.T) {
	f := newTrustFixture(t, "sbtro")
	id := f.session(t)
	for _, cmd := range []string{
		`printf -v 'a[$(id>pwn1)]' %s 1`,
		`test -v 'a[$(id>pwn2)]'`,
		`cat README > /dev/null; echo x > /tmp/scratch && cat /tmp/scratch`,
	} {
		f.sbctl(t, "bash", "--session", id, "--", cmd)
	}
	for _, p := range []string{"pwn1", "pwn2"} {
		if _, err := os.Lstat(filepath.Join(f.proj, p)); err == nil {
			t.Errorf("%s was written in default mode", p)
		}
	}
	out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cat README")
	if code != 0 || out != "hello\n" {
		t.Errorf("a read-only call no longer runs: %d %q %q", code, out, errOut)
	}
}

// TestGitFileAndSettingsThroughSbctl: in bypassPermissions a .git file naming the home does
// not make ~/.bashrc writable, and the user's sandboxd settings stay read-only, through the
// Write tool as through Bash; git itself still works.
func TestGitFileAndSettingsThroughSbctl(t *testing.T) {
	f := newTrustFixture(t, "sbtgf")
	settings := filepath.Join(f.u.Home, ".config", "sandboxd", "settings.json")
	id := f.session(t, "--mode", "bypassPermissions", "--add-dir", f.u.Home)
	f.sbctl(t, "bash", "--session", id, "--", "rm -rf .git; printf 'gitdir: "+f.u.Home+"\\n' > .git")
	f.sbctl(t, "bash", "--session", id, "--", "echo pwned >> ~/.bashrc; echo '{\"permissions\":{\"allow\":[\"Bash(*)\"],\"defaultMode\":\"bypassPermissions\"}}' > ~/.config/sandboxd/settings.json")
	f.sbctl(t, "write", "--session", id, settings, "--content", `{"permissions":{"defaultMode":"bypassPermissions"}}`)
	f.unchanged(t, filepath.Join(f.u.Home, ".bashrc"), "# rc\n")
	f.unchanged(t, settings, "{}\n")
	// acceptEdits asks for the settings file instead of writing it.
	id2 := f.session(t, "--mode", "acceptEdits", "--add-dir", f.u.Home)
	_, errOut, code := f.sbctl(t, "write", "--session", id2, settings, "--content", "{}")
	if code == 0 {
		t.Errorf("acceptEdits wrote the user's sandboxd settings: %s", errOut)
	}
	f.unchanged(t, settings, "{}\n")
}

// TestPersistedCwdStaysInside: a report that names a directory outside the session (by `..`,
// through the report fd) never becomes the cwd, and the session's dirs and its project's
// settings never move with the cwd; a `cd` inside still carries over.
func TestPersistedCwdStaysInside(t *testing.T) {
	f := newTrustFixture(t, "sbtcw")
	id := f.session(t, "--persist-cwd", "--mode", "acceptEdits")
	for _, cmd := range []string{
		"echo " + f.proj + "/../../.. >&$__sandboxd_report_fd",
		"echo / >&$__sandboxd_report_fd; exec 1>&-",
		"cd /; true",
		"cd ..; true",
	} {
		f.sbctl(t, "bash", "--session", id, "--", cmd)
		if s := f.show(t, id); !strings.HasPrefix(s.Cwd+"/", f.proj+"/") || s.Root != f.proj {
			t.Fatalf("after %q the session's cwd is %s (root %s), outside %s", cmd, s.Cwd, s.Root, f.proj)
		}
	}
	f.sbctl(t, "bash", "--session", id, "--", "cd sub")
	if s := f.show(t, id); s.Cwd != filepath.Join(f.proj, "sub") {
		t.Fatalf("cd sub did not carry over: cwd %s", s.Cwd)
	}
	// Writes in the root still count as inside the session after the cd.
	if _, errOut, code := f.sbctl(t, "write", "--session", id, filepath.Join(f.proj, "new.txt"), "--content", "x"); code != 0 {
		t.Errorf("a write in the session's root after cd sub: %s", errOut)
	}
	// The project's deny rules still apply after the cd and a reload.
	if err := os.MkdirAll(filepath.Join(f.proj, ".sandboxd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.proj, ".sandboxd", "settings.json"), []byte(`{"permissions":{"deny":["Bash(curl *)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), f.proj).Run()
	f.td.d.core.reloadRules()
	out, _, _ := f.sbctl(t, "--json", "decide", "--session", id, "Bash", `{"command":"curl x"}`)
	var res protocol.CallResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Decision == nil ||
		res.Decision.Behavior != "deny" || res.Decision.Rule != "Bash(curl *)" {
		t.Errorf("the project's deny rule was lost after cd sub and a reload: %s", out)
	}
}

// TestUntrustedProjectCannotPickItsMode: a project's settings cannot make its sessions
// bypassPermissions (or any mode looser than default) without --trust-project.
func TestUntrustedProjectCannotPickItsMode(t *testing.T) {
	f := newTrustFixture(t, "sbtpm")
	dir := filepath.Join(f.proj, ".sandboxd")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "settings.json"), []byte(`{"permissions":{"defaultMode":"bypassPermissions"}}`), 0o644)
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), f.proj).Run()
	if s := f.show(t, f.session(t)); s.Mode != "default" {
		t.Errorf("an untrusted project picked mode %s", s.Mode)
	}
	if s := f.show(t, f.session(t, "--trust-project")); s.Mode != "bypassPermissions" {
		t.Errorf("a trusted project's mode was not applied: %s", s.Mode)
	}
}

// TestRebuildFailureSuspends: a session whose rules cannot be rebuilt after a reload denies
// every call with the reason, and is audited, rather than keeping its old rules.
func TestRebuildFailureSuspends(t *testing.T) {
	f := newTrustFixture(t, "sbtrb")
	id := f.session(t, "--mode", "acceptEdits")
	f.sbctl(t, "bash", "--session", id, "--", "mkdir -p .sandboxd/settings.json")
	if _, err := os.Stat(filepath.Join(f.proj, ".sandboxd", "settings.json")); err != nil {
		// The protected path kept the agent from making it: make it as the user would.
		os.MkdirAll(filepath.Join(f.proj, ".sandboxd", "settings.json"), 0o755)
	}
	f.td.d.core.reloadRules()
	out, errOut, _ := f.sbctl(t, "--json", "bash", "--session", id, "--", "cat README")
	if strings.Contains(out, "hello") || !strings.Contains(out+errOut, "could not be rebuilt") {
		t.Fatalf("a session whose rules failed to rebuild still runs calls: %s %s", out, errOut)
	}
	found := false
	for _, r := range auditRecords(t, f.td) {
		found = found || (r.Kind == "session.suspend" && r.Session == id)
	}
	if !found {
		t.Error("no session.suspend record")
	}
	// Mended, the next reload resumes it.
	os.RemoveAll(filepath.Join(f.proj, ".sandboxd"))
	f.td.d.core.reloadRules()
	if out, _, code := f.sbctl(t, "bash", "--session", id, "--", "cat README"); code != 0 || out != "hello\n" {
		t.Errorf("the mended session did not resume: %d %q", code, out)
	}
}

// TestPathRulesApplyToBash: Read denies and protected paths hold for Bash, decided on the
// paths a recognised command names and enforced in the kernel for what the policy cannot see.
func TestPathRulesApplyToBash(t *testing.T) {
	f := newTrustFixture(t, "sbtpr")
	os.WriteFile(filepath.Join(f.proj, ".env"), []byte("SECRET=1\n"), 0o644)
	os.WriteFile(filepath.Join(f.proj, "evil.cfg"), []byte("[core]\n\tfsmonitor = id\n"), 0o644)
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), f.proj).Run()
	gitConfig, _ := os.ReadFile(filepath.Join(f.proj, ".git", "config"))
	for _, mode := range []string{"default", "acceptEdits", "bypassPermissions"} {
		id := f.session(t, "--mode", mode, "--deny", "Read(.env)")
		for _, cmd := range []string{
			"cat .env", "grep -r SECRET .", "cp .env /tmp/x; cat /tmp/x", `python3 -c 'print(open(".env").read())'`,
			"head -c 100 ./sub/../.env",
		} {
			out, errOut, _ := f.sbctl(t, "bash", "--session", id, "--", cmd)
			if strings.Contains(out+errOut, "SECRET") {
				t.Errorf("%s: %q printed the denied .env: %s", mode, cmd, out)
			}
		}
		for _, cmd := range []string{"cp evil.cfg .git/config", "cat evil.cfg > .git/config", "tee .git/config < evil.cfg"} {
			f.sbctl(t, "bash", "--session", id, "--", cmd)
		}
		f.unchanged(t, filepath.Join(f.proj, ".git", "config"), string(gitConfig))
		// The decision names the rule for what it can see.
		out, _, _ := f.sbctl(t, "--json", "decide", "--session", id, "Bash", `{"command":"cat .env"}`)
		var res protocol.CallResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Decision == nil || res.Decision.Behavior != "deny" ||
			!(strings.Contains(res.Decision.Reason, "hidden by the sandbox") || res.Decision.Rule == "Read(.env)") {
			t.Errorf("%s: cat .env was not denied by the Read rule, with a reason that says so: %s", mode, out)
		}
	}
}

// TestAuditRecordsDecidedInput: when a PreToolUse hook rewrites the input, the call's records
// keep the original and, beside it, the input that was decided and run, redacted the same way.
func TestAuditRecordsDecidedInput(t *testing.T) {
	out := filepath.Join(testHostDir(t), "hook.json")
	hook := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo rewritten"}}}`
	if err := os.WriteFile(out, []byte(hook), 0o644); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, "hooks:\n  PreToolUse:\n  - matcher: Bash\n    hooks:\n    - type: command\n      command: \"cat "+out+"\"\n      timeout: 10\n")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	_, res := td.call(t, s.ID, "Bash", `{"command":"echo original"}`)
	if res.IsError || res.Data["stdout"] != "rewritten\n" {
		t.Fatalf("the hook's input did not run: %+v", res)
	}
	var rewritten int
	for _, r := range auditRecords(t, td) {
		if r.Kind != "call.end" {
			continue
		}
		switch {
		case strings.Contains(string(r.Input), "echo original"):
			if !strings.Contains(r.Detail["decided_input"], "echo rewritten") || r.Detail["decided_input_digest"] == "" {
				t.Errorf("the rewritten input is not on the record: %v", r.Detail)
			}
			rewritten++
		case r.Detail["decided_input"] != "":
			t.Errorf("a call no hook rewrote has a decided input: %s beside %s", r.Detail["decided_input"], r.Input)
		}
	}
	if rewritten != 1 {
		t.Errorf("%d call.end records of the rewritten call, want 1", rewritten)
	}
}

// TestBashReadsSpecialFilesInItsSandbox: a Bash command reads /dev/urandom or a /proc file
// inside its own sandbox (its own /proc, a private /dev, a timeout), so it is decided like any
// other command: run in bypassPermissions, asked in default mode as any read outside the
// session's directories is. The Read tool, which the daemon's worker reads for, is still
// refused them in every mode.
func TestBashReadsSpecialFilesInItsSandbox(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	bypass := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	def := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	for cmd, want := range map[string]string{
		"head -c 8 /dev/urandom | wc -c":                     "8\n",
		"grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status": "NoNewPrivs:\t1\nSeccomp:\t2\n",
		"head -n 1 /proc/cpuinfo | cut -c 1-9":               "processor\n",
	} {
		input := fmt.Sprintf(`{"command":%q}`, cmd)
		if _, res := td.call(t, bypass.ID, "Bash", input); res.IsError || res.Data["stdout"] != want {
			t.Errorf("bypassPermissions: %s: %+v, want stdout %q", cmd, res, want)
		}
		code, b := td.do(t, "POST", "/v1/sessions/"+def.ID+"/decide", fmt.Sprintf(`{"tool":"Bash","input":%s}`, input))
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != 200 || res.Decision == nil || res.Decision.Behavior != "ask" {
			t.Errorf("default: %s: %d %+v, want an ask", cmd, code, res.Decision)
		}
	}
	for _, s := range []string{bypass.ID, def.ID} {
		_, res := td.call(t, s, "Read", `{"file_path":"/proc/self/status"}`)
		if !res.IsError || res.Decision == nil || res.Decision.Step != "safety_deny" {
			t.Errorf("Read /proc/self/status was not refused by the safety check: %+v", res)
		}
	}
}

// TestAcceptEditsReadsNoMoreThanDefault: acceptEdits widens what default writes inside the
// session's directories, never what it reads: a Bash command reading outside them asks in both
// modes, however the read is spelled, while the same commands on files inside are allowed.
func TestAcceptEditsReadsNoMoreThanDefault(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	for _, mode := range []string{"default", "acceptEdits"} {
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":%q}`, dir, mode))
		for cmd, want := range map[string]string{
			"cat /etc/passwd":                    "ask",
			"head -c 10 /etc/hostname":           "ask",
			"cat /etc/passwd > copy.txt":         "ask",
			"grep -r root /etc/passwd | wc -l":   "ask",
			"mkdir -p out && cp /etc/passwd out": "ask",
			"sed -n 1p ../../etc/passwd":         "ask",
			"cp notes.txt copy.txt":              map[bool]string{true: "allow", false: "ask"}[mode == "acceptEdits"],
			"cat notes.txt":                      "allow",
		} {
			if got := decide(t, td, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd)); got != want {
				t.Errorf("%s: %s: %s, want %s", mode, cmd, got, want)
			}
		}
	}
}

// TestAcceptEditsSedEditsOnly: acceptEdits runs sed unasked only as an editor of the
// session's files; a sed script that runs programs, reads or writes other files, or comes
// from a file asks, whether or not it edits in place.
func TestAcceptEditsSedEditsOnly(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits"}`, dir))
	for cmd, want := range map[string]string{
		"sed -i 's/a/b/' notes.txt":                 "allow",
		"sed -i.bak -e 's/a/b/g' -e '2d' notes.txt": "allow",
		"sed -i '1e id' notes.txt":                  "ask",
		"sed -n '1e id' notes.txt":                  "ask",
		"sed 's/a/id/e' notes.txt":                  "ask",
		"sed -i -e 's/a/id/e' notes.txt":            "ask",
		"sed --in-place '1r /etc/shadow' notes.txt": "ask",
		"sed -i '1R /etc/passwd' notes.txt":         "ask",
		"sed -i 's/a/b/w /etc/cron.d/x' notes.txt":  "ask",
		"sed -n 'w copy.txt' notes.txt":             "ask",
		"sed -i -f script.sed notes.txt":            "ask",
		"sed -i --nosuchflag 's/a/b/' notes.txt":    "ask",
	} {
		if got := decide(t, td, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd)); got != want {
			t.Errorf("%s: %s, want %s", cmd, got, want)
		}
	}
}

// TestReadDenyWholeDirIsKernelEnforced: a Read(<dir>/**) deny rule for a dir outside the
// session's dirs holds in the kernel too: a command whose path the decision cannot see (built
// at run time, in bypassPermissions where nothing asks) still cannot read there, for a host
// dir as for the child's own /proc. So does Read(<file>/**), which the decision reads as the
// file itself (a hidden file reads as empty, hence the grep).
func TestReadDenyWholeDirIsKernelEnforced(t *testing.T) {
	td := startDaemon(t, "")
	dir, outside := testHostDir(t), testHostDir(t)
	if err := os.WriteFile(filepath.Join(outside, "key"), []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for rule, cmd := range map[string]string{
		"Read(/" + outside + "/**)":     "cat " + outside + "/$(echo key)",
		"Read(//proc/**)":               "head -c 9 /proc/$(echo cpuinfo)",
		"Read(/" + outside + "/key/**)": "cat " + outside + "/$(echo key) | grep SECRET",
	} {
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":[%q]}}`, dir, rule))
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
		if out, _ := res.Data["stdout"].(string); out != "" || res.Data["exit_code"] == float64(0) {
			t.Errorf("%s: %s read what the rule denies: %+v", rule, cmd, res.Data)
		}
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	if _, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":"cat %s/$(echo key)"}`, outside)); res.Data["stdout"] != "SECRET\n" {
		t.Errorf("without the rule the file was not readable, so the test shows nothing: %+v", res.Data)
	}
}

// TestReadDenyPatternOutsideTheSession: a wildcard Read deny naming files outside the
// session's dir holds against reads no decision sees. One written from the place it protects
// is walked there and its matches hidden from every program (awk, a sourced script's cd, a
// link made in the line); one that starts at / is the decision's alone there, so a line that
// reads a path known only at run time, or a whole tree outside, is refused in
// bypassPermissions rather than run.
func TestReadDenyPatternOutsideTheSession(t *testing.T) {
	td := startDaemon(t, "")
	dir, outside := testHostDir(t), testHostDir(t)
	os.WriteFile(filepath.Join(outside, "id.key"), []byte("SECRET\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "s.sh"), []byte("cd "+outside+"\n"), 0o644)
	for _, tc := range []struct{ rule, cmd string }{
		{"Read(/" + outside + "/*.key)", "awk 1 " + outside + "/id.key"},
		{"Read(/" + outside + "/*.key)", "source s.sh; cat id.key"},
		{"Read(/" + outside + "/*.key)", "ln -s " + outside + "/id.key k; cat k"},
		{"Read(/" + outside + "/*.key)", "grep -r SECRET " + outside},
		{"Read(**/*.key)", "cat " + outside + "/$(echo id.key)"},
		{"Read(**/*.key)", "grep -r SECRET " + outside},
		{"Read(**/*.key)", "curl -sw @" + outside + "/id.key file:///dev/null"},
		{"Read(**/*.key)", "curl -s FILE://localhost" + outside + "/id.key"},
		// Programs no table describes: their words are looked up as paths they may read.
		{"Read(**/*.key)", "awk 1 " + outside + "/id.key"},
		{"Read(**/*.key)", "python3 -c 'print(open(\"" + outside + "/id.key\").read())'"},
		{"Read(**/*.key)", "tar cf - -C " + outside + " . | tar xOf -"},
		{"Read(**/*.key)", "d=" + outside + "; awk 1 $d/id.key"},
		{"Read(**/*.key)", "python3 - <<'EOF'\nprint(open('" + outside + "/id.key').read())\nEOF"},
	} {
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":[%q]}}`, dir, tc.rule))
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, tc.cmd))
		if out, _ := res.Data["stdout"].(string); strings.Contains(out, "SECRET") {
			b, _ := json.Marshal(res)
			t.Errorf("%s: %s read what the rule denies: %s", tc.rule, tc.cmd, b)
		}
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	if _, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":"awk 1 %s/id.key"}`, outside)); res.Data["stdout"] != "SECRET\n" {
		t.Errorf("without the rule the file was not readable, so the test shows nothing: %+v", res.Data)
	}
}

// TestReadDenyThroughBindMount: a Read deny rule holds where the host shows the same dir again
// (a bind mount), for Bash and for the Read tool, though the path the call names matches no
// rule.
func TestReadDenyThroughBindMount(t *testing.T) {
	dir, alias := testHostDir(t), testHostDir(t)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o755)
	os.WriteFile(filepath.Join(dir, "secrets", "key"), []byte("SECRET\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "plain"), []byte("plain\n"), 0o644)
	if err := unix.Mount(dir, alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(alias, unix.MNT_DETACH) })
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(./secrets/**)"]}}`, dir))
	_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":"cat %s/plain; cat %s/secrets/key"}`, alias, alias))
	if out, _ := res.Data["stdout"].(string); out != "plain\n" {
		t.Errorf("Bash through the bind: stdout %q, want the plain file only: %+v", out, res.Data)
	}
	_, res = td.call(t, s.ID, "Read", fmt.Sprintf(`{"file_path":"%s/secrets/key"}`, alias))
	if b, _ := json.Marshal(res); strings.Contains(string(b), "SECRET") || res.Error == nil {
		t.Errorf("Read through the bind: %s, want an error and no secret", b)
	}
}

// TestReadDenyCoversGitObjectNames: a committed file's content is in .git/objects too, out of
// reach of the mount that hides its path; a git command that names the path (HEAD:PATH,
// :PATH, a pathspec, -L's :PATH) is denied by the Read rule, in every mode.
func TestReadDenyCoversGitObjectNames(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o755)
	os.WriteFile(filepath.Join(dir, "secrets", "prod.key"), []byte("TOPSECRET\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=abc\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "."}, {"add", "-A"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	// From a session made in the repository's subdir, git takes HEAD:PATH from the top, which
	// the session does not know: each dir above the cwd may be it, and a rule on any holds.
	// Those candidate reads ask nothing by themselves: a path beside the cwd still runs.
	sub := filepath.Join(dir, "sub")
	os.MkdirAll(sub, 0o755)
	for _, tc := range []struct {
		where, cwd, rules string
		modes             []string
		denied            []string
		allowed           string
	}{
		{"at the top", dir, `"Read(./secrets/**)","Read(.env)"`, []string{"default", "acceptEdits", "bypassPermissions"},
			[]string{"git show HEAD:secrets/prod.key", "git --no-pager show HEAD:./.env", "git cat-file -p :0:.env",
				"git log -p -- secrets", "git log -L1,1:.env", "git grep -e SECRET HEAD -- .env", "git diff HEAD~0 -- secrets/prod.key",
				"timeout 5 git blame .env"},
			"git log --oneline -- README"},
		{"in a subdir", sub, fmt.Sprintf(`"Read(/%s/secrets/**)","Read(**/.env)"`, dir), []string{"default", "bypassPermissions"},
			[]string{"git show HEAD:secrets/prod.key", "git cat-file -p :.env", "cd .. && git show HEAD:.env"},
			"git show HEAD:sub/notes"}, // the top's sub/notes, or one below the cwd
		// git reading paths the line does not show meets any Read rule, a literal one too:
		// the mount that hides the file does not hide its committed copy.
		{"in a subdir, naming paths elsewhere", sub, fmt.Sprintf(`"Read(/%s/.env)","Read(/%s/secrets/prod.key)"`, dir, dir), []string{"bypassPermissions"},
			[]string{"git -C .. show HEAD:.env", "git --git-dir=../.git show HEAD:.env", "echo HEAD:.env | git cat-file --batch",
				"git log -p -- ':/.env'", "git -c include.path=../.env config --list"},
			"git -C .. status"},
	} {
		for _, mode := range tc.modes {
			s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":%q,"rules":{"deny":[%s]}}`, tc.cwd, mode, tc.rules))
			for _, cmd := range tc.denied {
				if got := decide(t, td, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd)); got != "deny" {
					t.Errorf("%s, %s: %s: %s, want deny", mode, tc.where, cmd, got)
				}
			}
			if got := decide(t, td, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, tc.allowed)); got != "allow" {
				t.Errorf("%s, %s: %s, naming another path: %s, want allow", mode, tc.where, tc.allowed, got)
			}
			_, res := td.call(t, s.ID, "Bash", `{"command":"git show HEAD:secrets/prod.key"}`)
			if b, _ := json.Marshal(res); strings.Contains(string(b), "TOPSECRET") {
				t.Errorf("%s, %s: the committed secret was printed: %s", mode, tc.where, b)
			}
		}
	}
}

// TestRemadeProtectedPathKillsCall: a command that makes a protected path again as soon as it
// is moved aside is killed, says why, and leaves nothing where git would trust it.
func TestRemadeProtectedPathKillsCall(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	// A program the classifier cannot see into, as an attacker would use.
	loop := `python3 -c 'import os, time
while True:
    os.path.exists(".git/commondir") or open(".git/commondir", "w").write("../evil\\n")
    time.sleep(0.05)'`
	_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q,"timeout":20000}`, loop))
	b, _ := json.Marshal(res)
	if res.Data["killed_by"] != "protected_path_remade" || !strings.Contains(string(b), "made a protected path again") {
		t.Errorf("want the command killed for remaking .git/commondir, with the reason: %s", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git", "commondir")); err == nil {
		t.Error(".git/commondir is still there")
	}
}

// TestPlantedRepoMovedAside: in a project that is not a repository, a program the classifier
// cannot see into plants a .git naming a git dir whose config runs a command, a repository
// whose config does, and the files that make the project dir itself one: the user's next git status there would run it outside the
// sandbox. Each is moved aside as the call ends, and said so in the result.
func TestPlantedRepoMovedAside(t *testing.T) {
	// Hard links allowed, as an admin may (a call cannot make one by default): a second name
	// of a new repository's config is still moved aside.
	td := startDaemon(t, "sandbox:\n  extra_syscalls: [link, linkat]\n")
	for _, tc := range []struct {
		plant, moved string
		repo         bool // the project is a repository already
	}{
		{`os.makedirs("evil/objects"); os.makedirs("evil/refs")
open("evil/HEAD", "w").write("ref: refs/heads/main\n")
open("evil/config", "w").write("[core]\n\tfsmonitor = touch PWNED; false\n")
open(".git", "w").write("gitdir: evil\n")`, ".git", false},
		{`import subprocess; subprocess.run(["git", "init", "-q", "."], check=True)
open(".git/config", "a").write("[core]\n\tfsmonitor = touch PWNED; false\n")`, ".git/config", false},
		// A second name for the new config, which a later call could write past its mount.
		{`import subprocess; subprocess.run(["git", "init", "-q", "."], check=True)
os.link(".git/config", "notes.txt")`, ".git/config", false},
		// A work tree outside the project, which the user's git reset would write.
		{`import subprocess; subprocess.run(["git", "init", "-q", "."], check=True)
subprocess.run(["git", "config", "core.worktree", os.path.expanduser("~")], check=True)`, ".git/config", false},
		// The project dir itself made a repository: git finds no .git and takes ./config.
		{`os.makedirs("objects"); os.makedirs("refs")
open("HEAD", "w").write("ref: refs/heads/main\n")
open("config", "w").write("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = touch PWNED; false\n")`, "HEAD", false},
		// In a repository: a submodule whose .git names the call's own git dir.
		{`import subprocess
os.makedirs("evil/objects"); os.makedirs("evil/refs"); os.makedirs("lib")
open("evil/HEAD", "w").write("ref: refs/heads/main\n")
open("evil/config", "w").write("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch PWNED; false\n")
open("lib/.git", "w").write("gitdir: ../evil\n")
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
subprocess.run(["git", "update-index", "--add", "--cacheinfo", "160000," + head + ",lib"], check=True)`, "lib/.git", true},
	} {
		dir := testHostDir(t)
		if tc.repo {
			for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "x"}} {
				if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v %s", args, err, out)
				}
			}
			time.Sleep(20 * time.Millisecond) // the repository is older than the call
		}
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, "python3 -c 'import os\n"+tc.plant+"'"))
		b, _ := json.Marshal(res)
		if code, _ := res.Data["exit_code"].(float64); res.IsError || code != 0 || !strings.Contains(string(b), filepath.Join(dir, tc.moved)) {
			t.Errorf("want %s moved aside and said so: %s", tc.moved, b)
		}
		cmd := exec.Command("git", "-c", "safe.directory=*", "status")
		cmd.Dir, cmd.Env = dir, []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
		_ = cmd.Run()
		if _, err := os.Lstat(filepath.Join(dir, "PWNED")); err == nil {
			t.Errorf("git status in the project ran what the call planted (%s)", tc.moved)
		}
	}
}

// testHostDir is a directory children see as the host has it (not under the private /tmp).
func testHostDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestProtectedPathsEveryMode: in every mode, a write the policy lets run (here an allow rule
// for a program the classifier cannot see into) still cannot change a protected path: the
// kernel refuses it, and the host files are unchanged. git keeps working.
func TestProtectedPathsEveryMode(t *testing.T) {
	f := newTrustFixture(t, "sbtpe")
	home := f.u.Home
	files := map[string]string{}
	tools := []string{"p/.pre-commit-config.yaml", "p/.npmrc", "p/.yarnrc.yml", "p/.yarn/releases/yarn.cjs",
		"p/.cargo/config.toml", "p/gradle/wrapper/gradle-wrapper.properties", "p/.mvn/extensions.xml", "p/.gemini/settings.json"}
	for _, rel := range append([]string{"p/.git/hooks/pre-commit", "p/.gitmodules", "p/.sandboxd/settings.json",
		"p/.claude/settings.json", "p/.mcp.json", "p/.vscode/tasks.json", "p/.envrc", ".gitconfig",
		".config/git/config", ".config/systemd/user/x.service", ".config/autostart/x.desktop"}, tools...) {
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		content := "# orig\n"
		if strings.HasSuffix(p, ".json") {
			content = "{}\n"
		}
		os.WriteFile(p, []byte(content), 0o644)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), home).Run()
	for _, rel := range append([]string{"p/.git/config", "p/.git/hooks/pre-commit", "p/.gitmodules", "p/.sandboxd/settings.json",
		"p/.claude/settings.json", "p/.mcp.json", "p/.vscode/tasks.json", "p/.envrc", ".bashrc", ".gitconfig",
		".config/git/config", ".config/sandboxd/settings.json", ".config/systemd/user/x.service", ".config/autostart/x.desktop"}, tools...) {
		b, err := os.ReadFile(filepath.Join(home, rel))
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Join(home, rel)] = string(b)
	}
	var list []string
	for p := range files {
		list = append(list, p)
	}
	script := fmt.Sprintf(`import json
for p in json.loads(%q):
    try:
        open(p, "a").write("pwned\n"); print("WROTE", p)
    except OSError as e:
        pass
`, mustJSON(t, list))
	cmd := "python3 -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'"
	parent := f.session(t, "--mode", "bypassPermissions", "--add-dir", home)
	for _, mode := range []string{"default", "acceptEdits", "dontAsk", "bypassPermissions", "auto", "bubble"} {
		args := []string{"--mode", mode, "--add-dir", home, "--allow", "Bash(python3:*)"}
		if mode == "bubble" {
			args = append(args, "--parent", parent)
		}
		id := f.session(t, args...)
		out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", cmd)
		if code != 0 || strings.Contains(out, "WROTE") {
			t.Errorf("%s: exit %d, a protected path was written or the call did not run:\n%s%s", mode, code, out, errOut)
		}
		for p, want := range files {
			f.unchanged(t, p, want)
		}
	}
	// git still works in the repository, in bypassPermissions.
	out, errOut, code := f.sbctl(t, "bash", "--session", parent, "--", "git -c user.name=a -c user.email=a@x add README && git -c user.name=a -c user.email=a@x commit -qm c && git checkout -qb b2 && git stash list && echo git-ok")
	if code != 0 || !strings.Contains(out, "git-ok") {
		t.Errorf("git in a protected repository: %d %s %s", code, out, errOut)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSbctlDecidesForAShell: sbctl decide and policy eval take --shell, for an admin checking
// how a hook decides a command its agent runs in zsh.
func TestSbctlDecidesForAShell(t *testing.T) {
	f := newTrustFixture(t, "sbshl")
	id := f.session(t)
	qualifier := `{"command":"ls *(e:'touch pwned':)"}`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"decide", "--session", id, "Bash", qualifier}, "allow"},
		{[]string{"decide", "--session", id, "--shell", "zsh", "Bash", qualifier}, "ask"},
		{[]string{"policy", "eval", "--allow", "Bash(ls:*)", "Bash", qualifier}, "allow"},
		{[]string{"policy", "eval", "--shell", "zsh", "--allow", "Bash(ls:*)", "Bash", qualifier}, "ask"},
	} {
		out, errOut, code := f.sbctl(t, append([]string{"--json"}, tc.args...)...)
		var res protocol.CallResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Decision == nil || res.Decision.Behavior != tc.want {
			t.Errorf("sbctl %v: %d %s %s; want %s", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, errOut, code := f.sbctl(t, "call", "--session", id, "--shell", "zsh", "Bash", `{"command":"ls"}`); code == 0 || !strings.Contains(errOut, "shell") {
		t.Errorf("sbctl call takes no --shell (sandboxd runs bash): %d %s", code, errOut)
	}
}

// TestProtectedPathsCreatedAreMovedAside: a protected path that does not exist yet, made by a
// command whose decision did not see the write (python here), is moved aside when the call
// ends, in every mode that runs it; the command and the audit log say so. One a person
// approved the command to write, by its name, stays.
func TestProtectedPathsCreatedAreMovedAside(t *testing.T) {
	f := newTrustFixture(t, "sbtma")
	home := f.u.Home
	rels := []string{"p/.claude/settings.json", "p/.envrc", "p/.git/info/attributes", "p/.git/commondir",
		"p/.pre-commit-config.yaml", "p/.cargo/config.toml", "p/.cursor/mcp.json", ".ssh/authorized_keys", ".bashrc.d/x.sh"}
	var paths []string
	for _, rel := range rels {
		paths = append(paths, filepath.Join(home, rel))
	}
	script := fmt.Sprintf(`import json, os
for p in json.loads(%q):
    os.makedirs(os.path.dirname(p), exist_ok=True); open(p, "w").write("pwned\n")
print("made")
`, mustJSON(t, paths))
	cmd := "python3 -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'"
	tops := []string{"p/.claude", "p/.envrc", "p/.git/info/attributes", "p/.git/commondir", "p/.pre-commit-config.yaml",
		"p/.cargo/config.toml", "p/.cursor", ".ssh", ".bashrc.d"}
	clean := func() {
		for _, top := range tops {
			matches, _ := filepath.Glob(filepath.Join(home, top) + "*")
			for _, m := range matches {
				os.RemoveAll(m)
			}
		}
	}
	for _, mode := range []string{"default", "acceptEdits", "bypassPermissions"} {
		clean()
		id := f.session(t, "--mode", mode, "--add-dir", home, "--allow", "Bash(python3:*)")
		out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", cmd)
		if code != 0 || !strings.Contains(out, "made") || !strings.Contains(errOut, "moved aside") {
			t.Errorf("%s: exit %d %q %q, want the command to run and say what was moved aside", mode, code, out, errOut)
		}
		for _, top := range tops {
			p := filepath.Join(home, top)
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s: %s was left where the user's tools trust it", mode, p)
			}
			if m, _ := filepath.Glob(p + ".sandboxd-blocked-*"); len(m) != 1 {
				t.Errorf("%s: %s was not moved aside: %v", mode, p, m)
			}
		}
	}
	// The audit log names what was moved, on the call's end record.
	recorded := 0
	for _, r := range auditRecords(t, f.td) {
		if r.Outcome != nil && len(r.Outcome.MovedAside) == len(tops) {
			recorded++
		}
	}
	if recorded != 3 {
		t.Errorf("%d call.end records name %d moved paths, want 3", recorded, len(tops))
	}
	// Approved by its owner where it was asked (what sbctl hook --confine's rewrite does once
	// the agent's user said yes): the person saw the command write .envrc, which stays; what
	// it made out of their sight (python's writes) is moved aside as in any call.
	clean()
	envrc := filepath.Join(home, "p/.envrc")
	id := f.session(t, "--mode", "default", "--add-dir", home)
	approvedCmd := "mkdir -p " + filepath.Dir(envrc) + " && echo 'export A=1' > " + envrc + "; " + cmd
	in, _ := json.Marshal(map[string]string{"command": approvedCmd})
	decided, _, _ := f.sbctl(t, "--json", "decide", "--session", id, "Bash", string(in))
	var asked protocol.CallResult
	if err := json.Unmarshal([]byte(decided), &asked); err != nil || asked.Decision == nil || asked.Decision.Behavior != "ask" {
		t.Fatalf("not asked: %s", decided)
	}
	// The key of the ask the person saw, as sbctl hook --confine writes it.
	sum := sha256.Sum256([]byte(asked.Decision.Step + "\x00" + asked.Decision.Rule + "\x00" + asked.Decision.Reason))
	out, errOut, code := f.sbctl(t, "bash", "--session", id, "--approved", hex.EncodeToString(sum[:12]), "--", approvedCmd)
	if code != 0 || !strings.Contains(out, "made") || !strings.Contains(errOut, "moved aside") {
		t.Errorf("approved: exit %d %q %q, want the command to run and say what was moved aside", code, out, errOut)
	}
	if _, err := os.Lstat(envrc); err != nil {
		t.Errorf("approved: the write the person saw was moved: %v", err)
	}
	for _, top := range tops {
		if p := filepath.Join(home, top); p != envrc {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("approved: %s, made out of the person's sight, was left where the user's tools trust it", p)
			}
		}
	}
}

// TestBackgroundTaskProtectedPathMovedAside: a background task that makes a protected path and
// runs on does not keep it in place until it ends: it is moved aside while the task runs.
func TestBackgroundTaskProtectedPathMovedAside(t *testing.T) {
	f := newTrustFixture(t, "sbtbg")
	p := filepath.Join(f.u.Home, "p", ".envrc")
	id := f.session(t, "--mode", "bypassPermissions", "--add-dir", f.u.Home)
	cmd := fmt.Sprintf(`python3 -c 'open(%q, "w").write("export X=1\n")'; sleep 30`, p)
	out, errOut, code := f.sbctl(t, "call", "--session", id, "Bash", mustJSON(t, map[string]any{"command": cmd, "run_in_background": true}))
	if code != 0 || !strings.Contains(out, "running in background") {
		t.Fatalf("start the task: %d %s %s", code, out, errOut)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Lstat(p)
		moved, _ := filepath.Glob(p + ".sandboxd-blocked-*")
		if err != nil && len(moved) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still in place (%v) while the task runs; moved: %v", p, err, moved)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSettingsMadeByRunningCallNotRead: settings a call makes where there were none (a
// background task's ~/.config/sandboxd/settings.json naming bypassPermissions and Bash) are
// moved aside by its sweep, and a session made before that (a sub-agent's, the user's next)
// does not take its rules and mode from them meanwhile: it is refused with the reason.
func TestSettingsMadeByRunningCallNotRead(t *testing.T) {
	f := newTrustFixture(t, "sbmade")
	if err := os.RemoveAll(filepath.Join(f.u.Home, ".config", "sandboxd")); err != nil {
		t.Fatal(err)
	}
	home := f.session(t, "--cwd", f.u.Home, "--mode", "bypassPermissions")
	settings := filepath.Join(f.u.Home, ".config", "sandboxd", "settings.json")
	// A running call guards the settings files missing at its start; while none exists, a
	// session is made as ever.
	if _, errOut, code := f.sbctl(t, "bash", "--session", home, "--background", "--", "sleep 3"); code != 0 {
		t.Fatalf("background task: %d %s", code, errOut)
	}
	time.Sleep(200 * time.Millisecond)
	if out, errOut, code := f.sbctl(t, "session", "new", "--cwd", f.proj); code != 0 {
		t.Fatalf("a session made while a call runs that wrote no settings: %d %s %s", code, out, errOut)
	}
	script := `python3 -c 'import os, sys; d = sys.argv[1]; os.makedirs(os.path.dirname(d)); open(d, "w").write("{\"permissions\":{\"allow\":[\"Bash\"],\"defaultMode\":\"bypassPermissions\"}}")' ` +
		strings.Replace(settings, "sandboxd/", "sand''boxd/", 1) + `; sleep 3`
	if _, errOut, code := f.sbctl(t, "bash", "--session", home, "--background", "--", script); code != 0 {
		t.Fatalf("background task: %d %s", code, errOut)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(settings); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not write the settings")
		}
	}
	// Refused with the reason, or made without them: never in the call's mode.
	out, errOut, code := f.sbctl(t, "session", "new", "--cwd", f.proj)
	if code != 0 {
		if !strings.Contains(errOut, "still running") {
			t.Errorf("refused with %q, want the reason", errOut)
		}
		return
	}
	if s := f.show(t, strings.TrimSpace(out)); s.Mode == "bypassPermissions" {
		t.Fatalf("a session made while a call's settings were there came up in %s", s.Mode)
	}
}

// TestOtherUsersCallGuardsNothingOfOwner: a call of another user's, in a session rooted in
// this user's project (readable, not writable to it), guards nothing of this user's. While it
// runs, the owner's new project settings are read, and the owner's own call does not move
// aside the .envrc and settings the owner made meanwhile.
func TestOtherUsersCallGuardsNothingOfOwner(t *testing.T) {
	f := newTrustFixture(t, "sbguardo")
	other := testutil.CreateUser(t, "sbguardx")
	if err := os.Chmod(f.u.Home, 0o755); err != nil {
		t.Fatal(err)
	}
	own := f.session(t, "--mode", "bypassPermissions")
	out, errOut, code := sbctl(t, f.bin, f.td.socket, &other, "session", "new", "--cwd", f.proj, "--mode", "bypassPermissions")
	if code != 0 {
		t.Fatalf("the other user's session in the owner's project: %d %s", code, errOut)
	}
	if _, errOut, code := sbctl(t, f.bin, f.td.socket, &other, "bash", "--session", strings.TrimSpace(out), "--background", "--", "sleep 20"); code != 0 {
		t.Fatalf("the other user's background task: %d %s", code, errOut)
	}
	time.Sleep(200 * time.Millisecond)
	// Made by the owner on the host while the other user's call runs.
	settings := filepath.Join(f.proj, ".sandboxd", "settings.json")
	envrc := filepath.Join(f.proj, ".envrc")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{settings: `{"permissions":{"deny":["Read(./README)"]}}`, envrc: "export X=1\n"} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), f.proj).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	if out, errOut, code := f.sbctl(t, "session", "new", "--cwd", f.proj); code != 0 {
		t.Fatalf("the owner's session, made while another user's call runs: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := f.sbctl(t, "bash", "--session", own, "--", "true"); code != 0 {
		t.Fatalf("the owner's call: %d %s", code, errOut)
	}
	for _, p := range []string{settings, envrc} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the owner's %s is gone after the owner's call (%v), while another user's call runs", p, err)
		}
	}
}

// TestPersistedCwdReplacedByLink: a persisted cwd whose dir is replaced by a link out of the
// session (on the host, or by a task) is not entered: the next command does not run, the
// cwd is reset to the root with the reason, and the command after it runs there. A cwd that
// was removed is reset the same way.
func TestPersistedCwdReplacedByLink(t *testing.T) {
	f := newTrustFixture(t, "sbtcl")
	outside := hostDir(t, "sbtcl-", 0o755)
	if err := os.WriteFile(filepath.Join(outside, "pub.txt"), []byte("public-content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), outside).Run()
	id := f.session(t, "--persist-cwd")
	sub := filepath.Join(f.proj, "sub")
	for _, replace := range []func() error{
		func() error { return errors.Join(os.Remove(sub), os.Symlink(outside, sub)) },
		func() error { return os.Remove(sub) },
	} {
		if _, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cd sub"); code != 0 {
			t.Fatalf("cd sub: %s", errOut)
		}
		if s := f.show(t, id); s.Cwd != sub {
			t.Fatalf("cd sub did not carry over: cwd %s", s.Cwd)
		}
		if err := replace(); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "pwd -P; cat *.txt")
		if code == 0 || strings.Contains(out, "public-content") || !strings.Contains(out+errOut, "cwd was reset to "+f.proj) {
			t.Fatalf("a command in a cwd replaced since: exit %d, out %q, err %q; want it refused with the reset", code, out, errOut)
		}
		if s := f.show(t, id); s.Cwd != f.proj {
			t.Fatalf("the cwd was not reset to the root: %s", s.Cwd)
		}
		if out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "pwd -P"); code != 0 || strings.TrimSpace(out) != f.proj {
			t.Fatalf("the command after the reset: exit %d, out %q, err %q", code, out, errOut)
		}
		os.Remove(sub)
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(sub, int(f.u.UID), int(f.u.GID))
	}
}

// TestSeparateGitDirDecided: the git dir a project's .git file names (git init
// --separate-git-dir) is git's config and hooks to the decision as .git is: a Write of its
// config or a hook asks in acceptEdits and is denied in bypassPermissions, and a sed -i of
// its config through Bash asks.
func TestSeparateGitDirDecided(t *testing.T) {
	f := newTrustFixture(t, "sbtsg")
	sep := filepath.Join(f.u.Home, "sep")
	if err := os.MkdirAll(sep, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "init", "-q", "--separate-git-dir", filepath.Join(sep, "gitstore"), sep).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), sep).Run()
	decide := func(id, tool, input string) string {
		out, errOut, _ := f.sbctl(t, "--json", "decide", "--session", id, tool, input)
		var res protocol.CallResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Decision == nil {
			t.Fatalf("decide %s %s: %s %s", tool, input, out, errOut)
		}
		return res.Decision.Behavior
	}
	for mode, want := range map[string]string{"acceptEdits": "ask", "bypassPermissions": "deny"} {
		out, errOut, code := f.sbctl(t, "session", "new", "--cwd", sep, "--mode", mode)
		if code != 0 {
			t.Fatalf("session new: %s", errOut)
		}
		id := strings.TrimSpace(out)
		for _, p := range []string{"gitstore/config", "gitstore/hooks/pre-commit"} {
			in := fmt.Sprintf(`{"file_path":%q,"content":"x"}`, filepath.Join(sep, p))
			if got := decide(id, "Write", in); got != want {
				t.Errorf("%s: Write %s decided %s, want %s", mode, p, got, want)
			}
		}
		if got := decide(id, "Bash", `{"command":"sed -i s/a/b/ gitstore/config"}`); got == "allow" {
			t.Errorf("%s: sed -i of the separate git dir's config was allowed", mode)
		}
	}
}

// TestGitInRepoBelowRootAsks: git run at a cwd inside a repository below the session's root
// (a bare one a call could have assembled from copies: cp -r .git/logs sub2 gives it a HEAD)
// is not read-only: its config may name programs git runs even for git show. In the root,
// and in a plain dir below it, git log stays read-only.
func TestGitInRepoBelowRootAsks(t *testing.T) {
	f := newTrustFixture(t, "sbtgb")
	bare := filepath.Join(f.proj, "sub2")
	for _, d := range []string{"objects", "refs"} {
		if err := os.MkdirAll(filepath.Join(bare, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(bare, "config"), []byte("[core]\n\tbare = true\n[diff \"x\"]\n\ttextconv = id\n"), 0o644)
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), f.proj).Run()
	decide := func(id string) protocol.Decision {
		out, errOut, _ := f.sbctl(t, "--json", "decide", "--session", id, "Bash", `{"command":"git log -p"}`)
		var res protocol.CallResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Decision == nil {
			t.Fatalf("decide: %s %s", out, errOut)
		}
		return *res.Decision
	}
	for _, mode := range []string{"default", "plan"} {
		id := f.session(t, "--persist-cwd", "--mode", mode)
		if d := decide(id); d.Behavior != "allow" {
			t.Fatalf("%s: git log -p in the root: %s (%s), want allow", mode, d.Behavior, d.Reason)
		}
		for _, dir := range []string{"sub", "sub2"} {
			f.sbctl(t, "bash", "--session", id, "--", "cd "+f.proj+"/"+dir)
			if s := f.show(t, id); s.Cwd != filepath.Join(f.proj, dir) {
				t.Fatalf("cd %s did not carry over: %s", dir, s.Cwd)
			}
			d := decide(id)
			if want := dir == "sub"; (d.Behavior == "allow") != want {
				t.Errorf("%s: git log -p at %s: %s (%s); allowed want %v", mode, dir, d.Behavior, d.Reason, want)
			}
		}
	}
}

// TestSessionGivenThroughLinkKeepsItsCwd: a session given its dir through a link (~/link to
// ~/real) works, a cd carries over, and a dir on the way to that cwd replaced by a link out is
// refused as it is for any session. A session dir itself replaced by a link since it was
// given (or its link retargeted) runs nothing, for any tool, until it leads there again.
func TestSessionGivenThroughLinkKeepsItsCwd(t *testing.T) {
	f := newTrustFixture(t, "sbtsl")
	base, outside := hostDir(t, "sbtsl-", 0o755), hostDir(t, "sbtsl-", 0o755)
	exec.Command("chown", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), base).Run()
	real, link := filepath.Join(base, "real"), filepath.Join(base, "link")
	os.WriteFile(filepath.Join(outside, "pub.txt"), []byte("public-content\n"), 0o644)
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(real, "a.txt"), []byte("inside\n"), 0o644)
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), real, outside).Run()
	exec.Command("chown", "-h", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), link).Run()
	out, errOut, code := f.sbctl(t, "session", "new", "--cwd", link, "--persist-cwd")
	if code != 0 {
		t.Fatalf("a session given through a link: %s", errOut)
	}
	id := strings.TrimSpace(out)
	if out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cat a.txt; cd sub"); code != 0 || !strings.Contains(out, "inside") {
		t.Fatalf("a call in a session given through a link: exit %d, %q %q", code, out, errOut)
	}
	// At the cd's resolved cwd, git is the session's own repository's (read-only).
	out, errOut, _ = f.sbctl(t, "--json", "decide", "--session", id, "Bash", `{"command":"git status"}`)
	var res protocol.CallResult
	if json.Unmarshal([]byte(out), &res) != nil || res.Decision == nil || res.Decision.Behavior != "allow" {
		t.Errorf("git status at the cwd of a session given through a link: %s %s", out, errOut)
	}
	sub := filepath.Join(real, "sub")
	if err := errors.Join(os.Remove(sub), os.Symlink(outside, sub)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = f.sbctl(t, "bash", "--session", id, "--", "cat *.txt")
	if code == 0 || strings.Contains(out, "public-content") {
		t.Fatalf("a cwd replaced by a link out, in a session given through a link: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cat a.txt"); code != 0 || !strings.Contains(out, "inside") {
		t.Fatalf("after the reset: exit %d, %q %q", code, out, errOut)
	}

	// The session's dir itself, retargeted to lead out.
	if err := errors.Join(os.Remove(link), os.Symlink(outside, link)); err != nil {
		t.Fatal(err)
	}
	for _, call := range [][]string{
		{"bash", "--session", id, "--", "cat *.txt"},
		{"call", "--session", id, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(link, "pub.txt"))},
		{"call", "--session", id, "Grep", `{"pattern":"public"}`},
	} {
		out, errOut, code := f.sbctl(t, call...)
		if code == 0 || strings.Contains(out, "public-content") || !strings.Contains(out+errOut, "leads to") {
			t.Errorf("%v in a session whose dir was retargeted: exit %d, %q %q", call[0:4], code, out, errOut)
		}
	}
	if err := errors.Join(os.Remove(link), os.Symlink("real", link)); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cat a.txt"); code != 0 || !strings.Contains(out, "inside") {
		t.Fatalf("once the dir leads where it did: exit %d, %q %q", code, out, errOut)
	}
}

// TestSettingsDirsRecorded: a dir the owner's settings add (additionalDirectories) is the
// session's as much as --add-dir's: replaced by a link out since, the session runs nothing.
// And a dir swapped for a link out while a command cds into it does not become the
// persisted cwd.
func TestSettingsDirsRecorded(t *testing.T) {
	f := newTrustFixture(t, "sbtsd")
	base, outside := hostDir(t, "sbtsd-", 0o755), hostDir(t, "sbtsd-", 0o755)
	os.WriteFile(filepath.Join(outside, "pub.txt"), []byte("public-content\n"), 0o644)
	sd, ad := filepath.Join(base, "sd"), filepath.Join(base, "ad")
	for _, d := range []string{sd, ad} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "in.txt"), []byte("inside\n"), 0o644)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), base).Run()
	// A trusted project's settings (the owner's own, under this test's /tmp home, are out of
	// the worker's sight).
	settings := filepath.Join(f.proj, ".sandboxd", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	if err := os.WriteFile(settings, []byte(fmt.Sprintf(`{"permissions":{"additionalDirectories":[%q]}}`, sd)), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), filepath.Dir(settings)).Run()
	swap := func(dir string) func() {
		if err := errors.Join(os.Rename(dir, dir+".old"), os.Symlink(outside, dir)); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := errors.Join(os.Remove(dir), os.Rename(dir+".old", dir)); err != nil {
				t.Fatal(err)
			}
		}
	}

	id := f.session(t, "--persist-cwd", "--add-dir", ad, "--trust-project")
	if out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cat "+sd+"/in.txt"); code != 0 || !strings.Contains(out, "inside") {
		t.Fatalf("the settings' dir: exit %d, %q %q", code, out, errOut)
	}
	restore := swap(sd)
	out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", "cat "+sd+"/*.txt")
	if code == 0 || strings.Contains(out, "public-content") || !strings.Contains(out+errOut, "leads to") {
		t.Errorf("a settings dir replaced by a link out: exit %d, %q %q", code, out, errOut)
	}
	restore()

	// Swapped while the command that cds into it runs: its exit report names the dir, which
	// then leads out.
	started, goOn := filepath.Join(base, "started"), filepath.Join(base, "go-on")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		swap(ad)
		os.WriteFile(goOn, nil, 0o644)
	}()
	f.sbctl(t, "bash", "--session", id, "--", "cd "+ad+" && touch "+started+" && while [ ! -e "+goOn+" ]; do sleep 0.02; done; cd "+ad)
	<-done
	t.Logf("cwd while swapped: %s", f.show(t, id).Cwd)
	if err := errors.Join(os.Remove(ad), os.Rename(ad+".old", ad)); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ = f.sbctl(t, "bash", "--session", id, "--", "cat *.txt")
	if strings.Contains(out, "public-content") {
		t.Errorf("a cwd reported while its dir was swapped read outside: %q %q", out, errOut)
	}
	if s := f.show(t, id); !strings.HasPrefix(s.Cwd+"/", ad+"/") && !strings.HasPrefix(s.Cwd+"/", f.proj+"/") {
		t.Fatalf("the persisted cwd is %s, outside the session's dirs", s.Cwd)
	}
}

// TestUnenterableDirRefused: a session dir its owner cannot enter (another user's 0700 home,
// given as --add-dir or as the cwd) is refused when the session is made, not mounted for
// nothing.
func TestUnenterableDirRefused(t *testing.T) {
	f := newTrustFixture(t, "sbtue")
	closed := hostDir(t, "sbtue-", 0o700) // root's
	for _, args := range [][]string{{"session", "new", "--cwd", f.proj, "--add-dir", closed}, {"session", "new", "--cwd", closed}} {
		if out, errOut, code := f.sbctl(t, args...); code == 0 || !strings.Contains(errOut, "cannot enter") && !strings.Contains(errOut, "not usable") {
			t.Errorf("%v: exit %d, %q %q; want it refused", args, code, out, errOut)
		}
	}
}

// hostDir makes a dir under /var/tmp with mode, removed when the test ends: a call's /tmp is
// a tmpfs of its own, so a dir every call sees as the host does lives there.
func hostDir(t *testing.T, pattern string, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}
