package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

func TestStreamingCall(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	body := `{"tool":"Bash","input":{"command":"echo one; echo two >&2; echo three"}}`
	req, _ := http.NewRequest("POST", "http://sandboxd/v1/sessions/"+s.ID+"/calls", strings.NewReader(body))
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := td.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	var events []protocol.StreamLine
	var result *protocol.CallResult
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l protocol.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad line %q: %v", sc.Bytes(), err)
		}
		if l.Result != nil {
			result = l.Result
			break
		}
		events = append(events, l)
	}
	if result == nil || result.Data["stdout"] != "one\nthree\n" || result.Data["stderr"] != "two\n" {
		t.Fatalf("result = %+v", result)
	}
	var sawOut, sawErr bool
	for _, e := range events {
		sawOut = sawOut || e.Event.Kind == "stdout" && strings.Contains(e.Event.Data, "one")
		sawErr = sawErr || e.Event.Kind == "stderr" && strings.Contains(e.Event.Data, "two")
	}
	if !sawOut || !sawErr {
		t.Errorf("progress events missing: %+v", events)
	}
}

func TestBatchThroughTheSocket(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	body := fmt.Sprintf(`{"calls":[
		{"tool":"Read","input":{"file_path":%q},"tool_use_id":"r1"},
		{"tool":"Glob","input":{"pattern":"*.txt"},"tool_use_id":"g1"},
		{"tool":"Bash","input":{"command":"touch b.txt"},"tool_use_id":"b1"},
		{"tool":"Nope","input":{},"tool_use_id":"n1"},
		{"tool":"Read","input":{"file_path":%q},"tool_use_id":"r2"}]}`, filepath.Join(dir, "a.txt"), filepath.Join(dir, "a.txt"))
	code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/batch", body)
	if code != 200 {
		t.Fatalf("batch: %d %s", code, b)
	}
	var br protocol.BatchResponse
	decodeInto(t, b, &br)
	ids := []string{"r1", "g1", "b1", "n1", "r2"}
	if len(br.Results) != len(ids) {
		t.Fatalf("%d results", len(br.Results))
	}
	for i, id := range ids {
		if br.Results[i].ToolUseID != id {
			t.Errorf("result %d is %s, want %s", i, br.Results[i].ToolUseID, id)
		}
	}
	if br.Results[0].IsError || !strings.Contains(br.Results[0].Content[0].Text, "alpha") {
		t.Errorf("read in batch: %+v", br.Results[0])
	}
	if br.Results[2].Decision == nil || br.Results[2].Decision.Behavior != "ask" {
		t.Errorf("touch in default mode: %+v", br.Results[2].Decision)
	}
	if br.Results[3].Error == nil || br.Results[3].Error.Class != "unknown_tool" {
		t.Errorf("unknown tool in batch: %+v", br.Results[3])
	}
}

func TestDecideRunsNothingThroughTheSocket(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/decide", `{"tool":"Bash","input":{"command":"touch made-by-decide"}}`)
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != 200 || res.Decision == nil || res.Decision.Behavior != "allow" {
		t.Fatalf("decide: %d %s", code, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-by-decide")); err == nil {
		t.Fatal("decide ran the command")
	}
}

// buildDaemon builds the sandboxd binary for process-level tests.
func buildDaemon(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandboxd")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sandboxd").CombinedOutput(); err != nil {
		t.Fatalf("build sandboxd: %v\n%s", err, out)
	}
	return bin
}

func healthy(socket string) bool {
	c := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", socket) }}}
	for i := 0; i < 100; i++ {
		if resp, err := c.Get("http://sandboxd/v1/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// A socket passed by systemd (LISTEN_FDS, LISTEN_PID) is served; SIGTERM drains and exits.
func TestSocketActivationAndSigterm(t *testing.T) {
	td := startDaemon(t, "") // for RequireRoot and a free cgroup name pattern
	td.stop()
	bin := buildDaemon(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "activated.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	lf, err := l.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("drain_timeout_sec: 3\nsandbox:\n  cgroup_name: sandboxd-test-activation\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// systemd sets LISTEN_PID to the service's own pid: `exec` keeps the shell's pid.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, bin,
		"--socket", filepath.Join(dir, "unused.sock"), "--state-dir", filepath.Join(dir, "state"), "--config", cfg)
	cmd.ExtraFiles = []*os.File{lf}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	if !healthy(socket) {
		t.Fatalf("activated daemon did not become healthy: %s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "unused.sock")); err == nil {
		t.Error("daemon listened on --socket despite socket activation")
	}
	// In-flight calls: one that ends within the drain deadline finishes; one that does not
	// is killed when the deadline passes.
	c := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", socket) }}}
	resp, err := c.Post("http://sandboxd/v1/sessions", "application/json", strings.NewReader(fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir)))
	if err != nil {
		t.Fatal(err)
	}
	var sess protocol.Session
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	results := make(chan protocol.CallResult, 2)
	for _, cmdline := range []string{"sleep 1; echo drained", "sleep 60; echo never"} {
		go func() {
			resp, err := c.Post("http://sandboxd/v1/sessions/"+sess.ID+"/calls", "application/json",
				strings.NewReader(fmt.Sprintf(`{"tool":"Bash","input":{"command":%q}}`, cmdline)))
			var r protocol.CallResult
			if err == nil {
				json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
			}
			results <- r
		}()
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		r := <-results
		out, _ := r.Data["stdout"].(string)
		got[strings.TrimSpace(out)] = true
	}
	if !got["drained"] || got["never"] {
		t.Errorf("drain: outputs %v, want the short call finished and the long one killed", got)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("drain took %v with a 3 s deadline", el)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon exited with %v: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("daemon did not exit on SIGTERM")
	}
}

// A Bash `cd` carries over to later calls only in a session that asks for it, and only
// inside the session's directories.
func TestPersistCwd(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	pwdAfterCd := func(sessionBody string) string {
		s := td.newSession(t, sessionBody)
		td.call(t, s.ID, "Bash", `{"command":"cd sub"}`)
		_, res := td.call(t, s.ID, "Bash", `{"command":"pwd"}`)
		out, _ := res.Data["stdout"].(string)
		return strings.TrimSpace(out)
	}
	if got := pwdAfterCd(fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir)); got != dir {
		t.Errorf("without persist_cwd the cwd moved to %q", got)
	}
	if got := pwdAfterCd(fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","persist_cwd":true}`, dir)); got != filepath.Join(dir, "sub") {
		t.Errorf("with persist_cwd the cwd is %q, want %q", got, filepath.Join(dir, "sub"))
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","persist_cwd":true}`, dir))
	td.call(t, s.ID, "Bash", `{"command":"cd /"}`)
	_, res := td.call(t, s.ID, "Bash", `{"command":"pwd"}`)
	if out, _ := res.Data["stdout"].(string); strings.TrimSpace(out) != dir {
		t.Errorf("a cd outside the session's directories persisted: %q", out)
	}
}

// TestPersistCwdNoCallMayEnter: a cwd inside the session that no call may enter (a dir a Read
// deny rule hides), named by a forged exit report, is reset by the next call, which runs
// nothing; the one after runs from the root. Before, every Bash call of the session failed.
func TestPersistCwdNoCallMayEnter(t *testing.T) {
	u := testutil.CreateUser(t, "sbpcw")
	td := startDaemon(t, "")
	secret := filepath.Join(u.Home, "secret")
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	sid := sessionAs(t, td, u, `,"mode":"bypassPermissions","persist_cwd":true,"rules":{"deny":["Read(./secret/**)"]}`)
	bash := func(command string) protocol.CallResult {
		t.Helper()
		input, _ := json.Marshal(map[string]any{"command": command})
		code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", string(input), ""), "")
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", command, code, b)
		}
		return res
	}
	bash(fmt.Sprintf(`trap 'echo %s >&$__sandboxd_report_fd' EXIT; true`, secret))
	if res := bash("pwd"); len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "Shell cwd was reset to "+u.Home) {
		t.Errorf("a call from a cwd no call may enter: %+v %+v", res.Content, res.Error)
	}
	if res := bash("pwd"); strings.TrimSpace(fmt.Sprint(res.Data["stdout"])) != u.Home {
		t.Errorf("after the reset: %+v %+v", res.Data["stdout"], res.Error)
	}
}

// A daemon that stops cleanly leaves no cgroup behind, after running calls.
func TestCleanStopRemovesCgroups(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	td.call(t, s.ID, "Bash", `{"command":"true"}`)
	td.call(t, s.ID, "Glob", `{"pattern":"*"}`)
	td.stop()
	for _, d := range cgroupsLeft(t, "sandboxd-test-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())) {
		t.Errorf("cgroup %s left behind", d)
	}
}

// cgroupsLeft lists the directories of the cgroup subtree name that exist, in every hierarchy
// this process is in.
func cgroupsLeft(t *testing.T, name string) []string {
	t.Helper()
	own, err := cgroupfs.Own()
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := cgroupfs.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range []string{"pids", "memory", "cpu", "cpuacct", "freezer", ""} {
		if mounts[c] == "" {
			continue
		}
		d := filepath.Join(mounts[c], own[c], name)
		if _, err := os.Stat(d); err == nil {
			left = append(left, d)
		}
	}
	return left
}

// A Glob whose braces name more patterns than memory holds ({a,b} forty times: 2^40) is
// decided, and refused by the worker, with the daemon's work bounded: before, the daemon
// expanded every pattern while gathering the call's facts.
func TestGlobBracesBounded(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	input := fmt.Sprintf(`{"pattern":%q}`, strings.Repeat("{a,b}", 40))
	for _, unconfined := range []bool{false, true} {
		code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/decide", callBody("Glob", input, fmt.Sprintf(`,"unconfined":%v`, unconfined)))
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != 200 || res.Decision == nil {
			t.Fatalf("decide (unconfined %v): %d %s", unconfined, code, b)
		}
	}
	code, res := td.call(t, s.ID, "Glob", input)
	if code != 200 || res.Error == nil || !strings.Contains(res.Error.Message, "braces expand to more than") {
		t.Errorf("the call: %d %+v", code, res)
	}
}

// A Bash command the audit log could not keep whole (audit.max_input_bytes, redacted) is
// refused before anything is decided: past the cut, it could run what no record shows.
func TestBashCommandTheAuditCannotKeepIsRefused(t *testing.T) {
	td := startDaemon(t, "audit:\n  max_input_bytes: 4096\n")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	for _, tc := range []struct {
		command string
		refused bool
	}{
		{": " + strings.Repeat("a", 3000) + "; echo kept", false},
		{": " + strings.Repeat("a", 5000) + "; touch past_the_cut", true},
		// Under the limit as sent, over it redacted: each xN_pat=yyyyyyyy grows by 13 bytes
		// (each name once, and token-shaped: a name the line uses again, or a short value set
		// for a command, keeps its value).
		{manyPats(200) + "touch past_the_cut", true},
	} {
		code, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, tc.command))
		refused := res.Error != nil && strings.Contains(res.Error.Message, "audit.max_input_bytes")
		if refused != tc.refused {
			t.Errorf("%d-byte command: %d refused %v, want %v: %+v", len(tc.command), code, refused, tc.refused, res.Error)
		}
	}
}

// manyPats is n assignments of secret-named variables, each named once.
func manyPats(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "x%d_pat=yyyyyyyy ", i)
	}
	return b.String()
}

// TestSigtermDuringStuckReload: a reload that waits on a session a request holds (its owner's
// worker stopped mid-request, as the owner may) leaves SIGTERM heard: the daemon drains and
// exits, well before the request's own bound.
func TestSigtermDuringStuckReload(t *testing.T) {
	td := startDaemon(t, "") // for RequireRoot and a free cgroup name pattern
	td.stop()
	bin := buildDaemon(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "d.sock")
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("drain_timeout_sec: 2\nsandbox:\n  cgroup_name: sandboxd-test-stuckreload\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--socket", socket, "--state-dir", filepath.Join(dir, "state"), "--config", cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	if !healthy(socket) {
		t.Fatalf("daemon did not become healthy: %s", stderr.String())
	}
	c := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", socket) }}}
	resp, err := c.Post("http://sandboxd/v1/sessions", "application/json", strings.NewReader(fmt.Sprintf(`{"cwd":%q}`, dir)))
	if err != nil {
		t.Fatal(err)
	}
	var sess protocol.Session
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	// The session's file worker (a Read starts it), stopped: a request that asks it waits.
	os.WriteFile(filepath.Join(dir, "f"), []byte("x\n"), 0o644)
	if resp, err := c.Post("http://sandboxd/v1/sessions/"+sess.ID+"/calls", "application/json",
		strings.NewReader(fmt.Sprintf(`{"tool":"Read","input":{"file_path":%q}}`, filepath.Join(dir, "f")))); err == nil {
		resp.Body.Close()
	}
	var worker int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), "sandboxd-worker") &&
			strings.Contains(string(cg), "sandboxd-test-stuckreload") {
			worker = pid // this daemon's only session's
		}
	}
	if worker == 0 {
		t.Fatal("no file worker found after a Read")
	}
	syscall.Kill(worker, syscall.SIGSTOP)
	defer syscall.Kill(worker, syscall.SIGCONT)
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	go func() {
		req, _ := http.NewRequest("PATCH", "http://sandboxd/v1/sessions/"+sess.ID, strings.NewReader(fmt.Sprintf(`{"additional_dirs":[%q]}`, sub)))
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("the daemon took %v to stop", el)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("SIGTERM unheard while a reload waited on a held session: %s", stderr.String())
	}
}
