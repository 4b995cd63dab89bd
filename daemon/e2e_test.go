package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// buildSbctl builds the CLI, with sbctl-full beside it (the offline commands: classify,
// policy, audit verify --dir), once for the package's tests, where every user can reach it.
func buildSbctl(t *testing.T) string {
	t.Helper()
	sbctlOnce.Do(func() {
		if sbctlBin, sbctlErr = buildTestBinary("sbctl", "../cmd/sbctl"); sbctlErr == nil {
			_, sbctlErr = buildTestBinary("sbctl-full", "../cmd/sbctl/full")
		}
	})
	if sbctlErr != nil {
		t.Fatal(sbctlErr)
	}
	return sbctlBin
}

var (
	sbctlOnce sync.Once
	sbctlBin  string
	sbctlErr  error
)

// sbctl runs the CLI as user u (nil: root) and returns stdout, stderr and the exit code.
func sbctl(t *testing.T, bin, socket string, u *testutil.User, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--socket", socket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if u != nil {
		// The user's groups as a login gives them: the daemon takes them from the connection.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: userGroups(t, u)}}
		cmd.Dir = u.Home
		cmd.Env = append(cmd.Env, "HOME="+u.Home)
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sbctl: %v", err)
	}
	return out.String(), errb.String(), code
}

// testGroup makes a system group for the test and removes it when the test ends.
func testGroup(t *testing.T, prefix string) string {
	t.Helper()
	group := fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)
	_ = exec.Command("groupdel", group).Run() // a leftover of a killed run
	if out, err := exec.Command("groupadd", "--system", group).CombinedOutput(); err != nil {
		t.Fatalf("groupadd: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("groupdel", group).Run() })
	return group
}

// userGroups lists u's groups from the group database, as login(1) would set them.
func userGroups(t *testing.T, u *testutil.User) []uint32 {
	t.Helper()
	out, err := exec.Command("id", "-G", u.Name).Output()
	if err != nil {
		t.Fatalf("id -G %s: %v", u.Name, err)
	}
	var gs []uint32
	for _, f := range strings.Fields(string(out)) {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			t.Fatalf("id -G %s: %q", u.Name, f)
		}
		gs = append(gs, uint32(n))
	}
	return gs
}

func TestEndToEndAsTwoUsers(t *testing.T) {
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	alice := testutil.CreateUser(t, "sbda")
	bob := testutil.CreateUser(t, "sbdb")
	work := filepath.Join(alice.Home, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "hello.txt")
	if err := os.WriteFile(file, []byte("hello\nworld\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{work, file} {
		if err := os.Chown(p, int(alice.UID), int(alice.GID)); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, code := sbctl(t, bin, td.socket, &alice, "--json", "session", "new", "--cwd", work)
	if code != 0 {
		t.Fatalf("session new: %d %s", code, errOut)
	}
	var s protocol.Session
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.ID == "" || s.Owner.UID != alice.UID {
		t.Fatalf("session new printed %q (%v)", out, err)
	}

	t.Run("bash runs as the caller", func(t *testing.T) {
		out, errOut, code := sbctl(t, bin, td.socket, &alice, "bash", "--session", s.ID, "--", "id -u; pwd")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		want := fmt.Sprintf("%d\n%s\n", alice.UID, work)
		if out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
	})
	t.Run("bash exit code passes through", func(t *testing.T) {
		_, _, code := sbctl(t, bin, td.socket, &alice, "bash", "--session", s.ID, "--", "exit 3")
		// `exit 3` is not read-only: default mode asks, so it does not run.
		if code != 126 {
			t.Errorf("exit = %d, want 126 (permission required)", code)
		}
		// A call's mode may only narrow its session's: the agent cannot widen what its owner set.
		out, errOut, code := sbctl(t, bin, td.socket, &alice, "bash", "--session", s.ID, "--mode", "bypassPermissions", "--", "exit 3")
		if code == 3 || code == 0 || !strings.Contains(out+errOut, "narrow") {
			t.Errorf("a per-call bypassPermissions in a default session: exit %d %q %q", code, out, errOut)
		}
		out, _, _ = sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", work, "--mode", "bypassPermissions")
		bypass := strings.TrimSpace(out)
		defer sbctl(t, bin, td.socket, &alice, "session", "rm", bypass)
		_, _, code = sbctl(t, bin, td.socket, &alice, "bash", "--session", bypass, "--", "exit 3")
		if code != 3 {
			t.Errorf("exit = %d, want 3", code)
		}
		// default ranks with dontAsk but asks: asked for in a dontAsk session, the call is
		// still decided in dontAsk, denied at once with no approval queued.
		out, _, _ = sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", work, "--mode", "dontAsk")
		dontAsk := strings.TrimSpace(out)
		defer sbctl(t, bin, td.socket, &alice, "session", "rm", dontAsk)
		out, _, _ = sbctl(t, bin, td.socket, &alice, "--json", "bash", "--session", dontAsk, "--mode", "default", "--", "exit 3")
		var res protocol.CallResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Decision == nil || res.Decision.Behavior != "deny" || res.Decision.ApprovalID != "" {
			t.Errorf("a per-call default in a dontAsk session: %v %.300s; want a deny and no approval", err, out)
		}
	})
	t.Run("bash json result", func(t *testing.T) {
		out, _, code := sbctl(t, bin, td.socket, &alice, "--json", "bash", "--session", s.ID, "--", "echo hi")
		var res protocol.CallResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
			t.Fatalf("bash --json: %d %q", code, out)
		}
		if res.Decision == nil || res.Decision.Behavior != "allow" || res.Data["stdout"] != "hi\n" || res.Data["exit_code"] != float64(0) {
			t.Errorf("result = %+v", res)
		}
		for _, k := range []string{"exit_code", "stdout", "stderr", "timed_out", "interrupted"} {
			if _, ok := res.Data[k]; !ok {
				t.Errorf("data lacks %s", k)
			}
		}
	})
	t.Run("read", func(t *testing.T) {
		out, errOut, code := sbctl(t, bin, td.socket, &alice, "read", "--session", s.ID, file)
		if code != 0 || !strings.Contains(out, "1\thello") || !strings.Contains(out, "2\tworld") {
			t.Errorf("read: %d %q %q", code, out, errOut)
		}
		if !strings.Contains(errOut, "decision: allow") {
			t.Errorf("read did not show the decision: %q", errOut)
		}
	})
	t.Run("another user sees nothing", func(t *testing.T) {
		_, errOut, code := sbctl(t, bin, td.socket, &bob, "session", "show", s.ID)
		if code == 0 || !strings.Contains(errOut, "not found") {
			t.Errorf("bob show: %d %q", code, errOut)
		}
		out, _, _ := sbctl(t, bin, td.socket, &bob, "session", "ls")
		if strings.Contains(out, s.ID) {
			t.Errorf("bob lists alice's session: %q", out)
		}
		_, _, code = sbctl(t, bin, td.socket, &bob, "bash", "--session", s.ID, "--", "id")
		if code == 0 {
			t.Error("bob ran a call in alice's session")
		}
		_, _, code = sbctl(t, bin, td.socket, &bob, "session", "rm", s.ID)
		if code == 0 {
			t.Error("bob deleted alice's session")
		}
	})
	t.Run("root admin sees it", func(t *testing.T) {
		out, _, code := sbctl(t, bin, td.socket, nil, "session", "ls")
		if code != 0 || !strings.Contains(out, s.ID) {
			t.Errorf("root ls: %d %q", code, out)
		}
	})
	t.Run("audit records the calls with the caller", func(t *testing.T) {
		var starts, ends int
		var sawExit3, sawOutput bool
		for _, r := range auditRecords(t, td) {
			if r.Kind == audit.KindCallEnd && r.Outcome != nil {
				sawExit3 = sawExit3 || r.Outcome.ExitCode == 3
				sawOutput = sawOutput || r.Outcome.OutputBytes > 0
			}
			if r.Session != s.ID || r.Caller == nil {
				continue
			}
			if r.Caller.UID != alice.UID {
				t.Errorf("record %d caller uid %d, want %d", r.Seq, r.Caller.UID, alice.UID)
			}
			switch r.Kind {
			case audit.KindCallStart:
				starts++
			case audit.KindCallEnd:
				ends++
			}
		}
		if starts == 0 || ends < starts {
			t.Errorf("call.start %d, call.end %d", starts, ends)
		}
		if !sawExit3 || !sawOutput {
			t.Errorf("call.end outcomes lack the exit code 3 (%v) or output bytes (%v)", sawExit3, sawOutput)
		}
	})
	t.Run("short-lived session", func(t *testing.T) {
		out, _, code := sbctl(t, bin, td.socket, &alice, "bash", "--cwd", work, "--", "echo", "hi")
		if code != 0 || out != "hi\n" {
			t.Errorf("bash without --session: %d %q", code, out)
		}
		out, _, _ = sbctl(t, bin, td.socket, &alice, "session", "ls")
		if n := strings.Count(out, "s_"); n != 1 {
			t.Errorf("short-lived session left behind: %q", out)
		}
	})
	t.Run("rm", func(t *testing.T) {
		if _, errOut, code := sbctl(t, bin, td.socket, &alice, "session", "rm", s.ID); code != 0 {
			t.Fatalf("rm: %s", errOut)
		}
		if _, _, code := sbctl(t, bin, td.socket, &alice, "session", "show", s.ID); code == 0 {
			t.Error("session still there after rm")
		}
	})
}

// An agent-style loop through sbctl on a small repository: grep, read, edit, run the tests.
func TestAgentLoopThroughSbctl(t *testing.T) {
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	alice := testutil.CreateUser(t, "sbdl")
	repo := filepath.Join(alice.Home, "repo")
	files := map[string]string{
		"greet.sh": "greet() { echo \"hello, $1\"; }\n",
		"test.sh":  ". ./greet.sh\n[ \"$(greet world)\" = \"hello, world!\" ] && echo PASS || { echo FAIL; exit 1; }\n",
	}
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", alice.UID, alice.GID), repo).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	out, errOut, code := sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", repo, "--mode", "acceptEdits", "--allow", "Bash(sh test.sh)")
	if code != 0 {
		t.Fatalf("session new: %s", errOut)
	}
	id := strings.TrimSpace(out)
	run := func(args ...string) (string, string, int) {
		return sbctl(t, bin, td.socket, &alice, append([]string{args[0], "--session", id}, args[1:]...)...)
	}

	out, errOut, code = run("bash", "--", "sh test.sh")
	if code != 1 || !strings.Contains(out, "FAIL") {
		t.Fatalf("tests before the fix: exit %d, %q %q", code, out, errOut)
	}
	out, _, code = run("grep", "hello", "--path", repo)
	if code != 0 || !strings.Contains(out, "greet.sh") {
		t.Fatalf("grep: %d %q", code, out)
	}
	// Editing before reading is refused with a message that says what to do.
	_, errOut, code = run("edit", filepath.Join(repo, "greet.sh"), "--old", `hello, $1"`, "--new", `hello, $1!"`)
	combined := errOut
	if code == 0 {
		t.Fatal("edit without a prior read succeeded")
	}
	out, _, code = run("read", filepath.Join(repo, "greet.sh"))
	if code != 0 || !strings.Contains(out, "greet()") {
		t.Fatalf("read: %d %q", code, out)
	}
	out, errOut, code = run("edit", filepath.Join(repo, "greet.sh"), "--old", `hello, $1"`, "--new", `hello, $1!"`)
	if code != 0 {
		t.Fatalf("edit after read: %d %q %q (first refusal said %q)", code, out, errOut, combined)
	}
	out, errOut, code = run("bash", "--", "sh test.sh")
	if code != 0 || !strings.Contains(out, "PASS") {
		t.Fatalf("tests after the fix: exit %d, %q %q", code, out, errOut)
	}
	// The edit was made as alice, not as root.
	fi, err := os.Stat(filepath.Join(repo, "greet.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != alice.UID {
		t.Errorf("edited file owned by uid %d, want %d", st.Uid, alice.UID)
	}
	// Writing outside the session's directories is not allowed by acceptEdits.
	_, _, code = run("write", filepath.Join(alice.Home, "outside.txt"), "--content", "x")
	if code == 0 {
		t.Error("acceptEdits wrote outside the session's directories")
	}
	// A read through Bash runs unasked inside the session's directories, a glob in them too;
	// one whose path is known only when it runs may be anywhere, so it asks as a read outside
	// them does, however it is spelled.
	secret := filepath.Join(alice.Home, "notes.txt")
	if err := os.WriteFile(secret, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run("bash", "--", "cat *.sh"); code != 0 || !strings.Contains(out, "greet()") {
		t.Errorf("cat *.sh: exit %d, %q %q", code, out, errOut)
	}
	for _, cmd := range []string{"cat " + secret, "cat $HOME/notes.txt", "cat ~+/../notes.txt", "cat ${x:-" + secret + "}", "echo " + secret + " | xargs cat"} {
		out, errOut, code := run("bash", "--", cmd)
		if code == 0 || strings.Contains(out, "outside") || !strings.Contains(errOut, "ask") {
			t.Errorf("%s in acceptEdits: exit %d, %q %q; want an ask", cmd, code, out, errOut)
		}
	}
}

func TestClassifyOffline(t *testing.T) {
	bin := buildSbctl(t)
	out, _, code := sbctl(t, bin, "/nonexistent.sock", nil, "classify", "--json", "--", "git status && ls -la | head")
	var c struct {
		ReadOnly    bool `json:"read_only"`
		Subcommands []struct {
			Text string `json:"text"`
		} `json:"subcommands"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || !c.ReadOnly || len(c.Subcommands) != 3 {
		t.Fatalf("classify: %d %q", code, out)
	}
	out, _, code = sbctl(t, bin, "/nonexistent.sock", nil, "classify", "--json", "--", "find . -exec rm {} ;")
	if code != 0 || !strings.Contains(out, `"read_only": false`) {
		t.Fatalf("classify find -exec: %d %q", code, out)
	}
	cmd := exec.Command(bin, "classify", "--jsonl")
	cmd.Stdin = strings.NewReader("\"ls -la\"\n\"sed -i s/a/b/ f\"\nnot json\n")
	b, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if err != nil || len(lines) != 3 || !strings.Contains(lines[0], `"read_only":true`) ||
		!strings.Contains(lines[1], `"read_only":false`) || !strings.Contains(lines[2], "error") {
		t.Fatalf("classify --jsonl: %v %q", err, b)
	}
}

func TestTasksAndAuditThroughSbctl(t *testing.T) {
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	alice := testutil.CreateUser(t, "sbdt")
	bob := testutil.CreateUser(t, "sbdu")
	out, errOut, code := sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", alice.Home, "--mode", "bypassPermissions")
	if code != 0 {
		t.Fatalf("session new: %s", errOut)
	}
	id := strings.TrimSpace(out)

	out, errOut, code = sbctl(t, bin, td.socket, &alice, "--json", "bash", "--session", id, "--background", "--", "echo started; sleep 30")
	var res protocol.CallResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("background bash: %d %q %q", code, out, errOut)
	}
	task, _ := res.Data["backgroundTaskId"].(string)
	if task == "" {
		t.Fatalf("no backgroundTaskId in %v", res.Data)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, _ = sbctl(t, bin, td.socket, &alice, "task", "output", "--session", id, task, "--offset", "0")
		if strings.Contains(out, "started") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(out, "started") {
		t.Fatalf("task output: %q", out)
	}
	out, _, _ = sbctl(t, bin, td.socket, &alice, "task", "ls", "--session", id)
	if !strings.Contains(out, task) || !strings.Contains(out, "running") {
		t.Errorf("task ls: %q", out)
	}
	// KillShell changes something, so default mode asks; --mode is this call's mode.
	if _, errOut, code := sbctl(t, bin, td.socket, &alice, "task", "kill", "--session", id, "--mode", "default", task); code == 0 || !strings.Contains(errOut, "--wait") {
		t.Errorf("task kill in default mode: %d %q, want asked", code, errOut)
	}
	if _, errOut, code := sbctl(t, bin, td.socket, &alice, "task", "kill", "--session", id, task); code != 0 {
		t.Errorf("task kill: %d %q", code, errOut)
	}
	out, _, _ = sbctl(t, bin, td.socket, &alice, "task", "ls", "--session", id)
	if strings.Contains(out, "running") {
		t.Errorf("task still running after kill: %q", out)
	}
	if _, _, code := sbctl(t, bin, td.socket, &bob, "task", "ls", "--session", id); code == 0 {
		t.Error("bob listed alice's tasks")
	}

	// Callers see their own records; admins see all.
	out, _, code = sbctl(t, bin, td.socket, &alice, "audit", "export")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("alice's export lacks her session: %d", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Caller == nil || r.Caller.UID != alice.UID {
			t.Fatalf("alice sees a record that is not hers: %s", line)
		}
	}
	out, _, _ = sbctl(t, bin, td.socket, &bob, "audit", "export")
	if strings.Contains(out, id) {
		t.Error("bob sees alice's records")
	}
	out, _, code = sbctl(t, bin, td.socket, nil, "audit", "query", "--session", id, "--kind", "call.end", "--tool", "Bash")
	if code != 0 || !strings.Contains(out, "call.end") || !strings.Contains(out, "bypassPermissions") && !strings.Contains(out, "allow") {
		t.Errorf("admin query: %d %q", code, out)
	}
	if _, _, code := sbctl(t, bin, td.socket, &alice, "audit", "verify"); code == 0 {
		t.Error("a non-admin verified the whole log")
	}
	if out, errOut, code := sbctl(t, bin, td.socket, nil, "audit", "verify"); code != 0 || !strings.Contains(out, "intact") {
		t.Errorf("verify: %d %q %q", code, out, errOut)
	}

	// Offline verify of a copy with the public key; a flipped byte is caught.
	pub, _, code := sbctl(t, bin, td.socket, nil, "audit", "pubkey")
	if code != 0 {
		t.Fatal("pubkey")
	}
	td.stop() // a clean stop writes the final checkpoint
	cp := filepath.Join(t.TempDir(), "audit")
	if out, err := exec.Command("cp", "-a", filepath.Join(td.state, "audit"), cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	// The copy carries no signing key: whoever holds it cannot re-sign a rewritten log.
	if keys, _ := filepath.Glob(filepath.Join(cp, "*.key")); len(keys) != 0 {
		t.Fatalf("a copy of the audit directory holds %v", keys)
	}
	pubFile := filepath.Join(t.TempDir(), "audit.pub")
	if err := os.WriteFile(pubFile, []byte(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := sbctl(t, bin, "/nonexistent", nil, "audit", "verify", "--dir", cp, "--pubkey", pubFile); code != 0 {
		t.Fatalf("offline verify of an intact copy: %d %q %q", code, out, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(cp, "audit-*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no log files in the copy")
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `"kind":"session.create"`)
	b[i+9] = 'X'
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = sbctl(t, bin, "/nonexistent", nil, "audit", "verify", "--dir", cp, "--pubkey", pubFile)
	if code != 1 || !strings.Contains(errOut, "first bad record") {
		t.Errorf("tampered copy: %d %q", code, errOut)
	}
}

// adminAndAlice starts a daemon whose admin group (named from group) has the user admin, and
// gives alice a session (id).
func adminAndAlice(t *testing.T, group, aliceName, adminName string) (td *testDaemon, bin string, alice, admin testutil.User, id string) {
	t.Helper()
	testutil.RequireRoot(t)
	group = testGroup(t, group)
	td = startDaemon(t, "admin_group: "+group+"\n")
	bin = buildSbctl(t)
	alice = testutil.CreateUser(t, aliceName)
	admin = testutil.CreateUser(t, adminName)
	if out, err := exec.Command("usermod", "-aG", group, admin.Name).CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v %s", err, out)
	}
	out, errOut, code := sbctl(t, bin, td.socket, &alice, "session", "new", "--cwd", alice.Home)
	if code != 0 {
		t.Fatalf("session new: %s", errOut)
	}
	return td, bin, alice, admin, strings.TrimSpace(out)
}

// Members of the configured admin group see every session; other users see only their own.
func TestAdminGroupSeesAllSessions(t *testing.T) {
	td, bin, _, admin, id := adminAndAlice(t, "sbadm", "sbdx", "sbdy")
	other := testutil.CreateUser(t, "sbdz")
	if out, _, _ := sbctl(t, bin, td.socket, &admin, "session", "ls"); !strings.Contains(out, id) {
		t.Errorf("admin-group member does not see alice's session: %q", out)
	}
	if out, _, _ := sbctl(t, bin, td.socket, &other, "session", "ls"); strings.Contains(out, id) {
		t.Errorf("a non-member sees alice's session: %q", out)
	}
	if out, _, _ := sbctl(t, bin, td.socket, &admin, "status"); !strings.Contains(out, "admin") {
		t.Errorf("status for an admin-group member: %q", out)
	}
}

// TestAdminsSeeNeverAct: a member of the admin group may list, show and end another user's
// session and read the audit log, but running a call in it, deciding in it, or changing its
// mode or rules is refused as for anyone else (404); root still may.
func TestAdminsSeeNeverAct(t *testing.T) {
	td, bin, alice, admin, id := adminAndAlice(t, "sbadn", "sbna", "sbnb")
	if out, errOut, code := sbctl(t, bin, td.socket, &admin, "session", "show", id); code != 0 || !strings.Contains(out, id) {
		t.Errorf("admin cannot show alice's session: %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{
		{"bash", "--session", id, "--", "id -u > " + alice.Home + "/by-admin"},
		{"decide", "--session", id, "Bash", `{"command":"ls"}`},
		{"session", "mode", id, "bypassPermissions"},
		{"call", "--session", id, "Read", fmt.Sprintf(`{"file_path":%q}`, alice.Home)},
	} {
		_, errOut, code := sbctl(t, bin, td.socket, &admin, args...)
		if code == 0 || !strings.Contains(strings.ToLower(errOut), "not found") {
			t.Errorf("admin %v in alice's session: exit %d %q, want a not-found refusal", args, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(alice.Home, "by-admin")); err == nil {
		t.Error("the admin ran a command in alice's session")
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+id, `{"mode":"plan"}`); code != 200 {
		t.Errorf("root could not change alice's session: %d %s", code, b)
	}
	if _, errOut, code := sbctl(t, bin, td.socket, &admin, "session", "rm", id); code != 0 {
		t.Errorf("admin could not end alice's session: %s", errOut)
	}
}

// TestDroppedGroupsStayDropped: the tools run with the groups the caller's process had when it
// connected (SO_PEERGROUPS), not the group database's: a group dropped is not given back.
func TestDroppedGroupsStayDropped(t *testing.T) {
	testutil.RequireRoot(t)
	group := testGroup(t, "sbgrp")
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	u := testutil.CreateUser(t, "sbgd")
	if out, err := exec.Command("usermod", "-aG", group, u.Name).CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v %s", err, out)
	}
	gout, err := exec.Command("getent", "group", group).Output()
	if err != nil {
		t.Fatal(err)
	}
	gid := strings.Split(strings.TrimSpace(string(gout)), ":")[2]
	run := func(groups []uint32) string {
		cmd := exec.Command(bin, "--socket", td.socket, "bash", "--", "id -G")
		cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "HOME=" + u.Home}, u.Home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: groups}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sbctl bash: %v", err)
		}
		return " " + strings.TrimSpace(string(out)) + " "
	}
	if got := run(userGroups(t, &u)); !strings.Contains(got, " "+gid+" ") {
		t.Errorf("with the group kept, id -G inside is %q, want %s in it", got, gid)
	}
	if got := run(nil); strings.Contains(got, " "+gid+" ") {
		t.Errorf("with the group dropped, id -G inside is %q: the daemon gave %s back", got, gid)
	}
}
