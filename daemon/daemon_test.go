package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/worker"
)

func TestMain(m *testing.M) {
	// The daemon re-executes its own binary as the per-session worker; in tests that binary
	// is this test binary.
	if worker.IsWorker() {
		worker.Main()
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-test-bin-")
	if err == nil {
		defer os.RemoveAll(dir)
		// Every user may run what is built here: the CLI as the test users, workers as their
		// sessions' owners.
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test binaries' directory:", err)
		return 1
	}
	testBinDir = dir
	if raceEnabled {
		// Under the race detector this binary takes over a second to start (its package init
		// instrumented), once per session's worker: the workers run from the daemon built
		// without it instead, the same worker code (the worker package has race tests of its
		// own). The daemon under test stays instrumented.
		if testWorkerPath, err = buildTestBinary("sandboxd", "../cmd/sandboxd"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// testBinDir holds the binaries the tests build once: the worker's (under race) and the CLI.
var testBinDir string

// testWorkerPath is the binary the test daemons start workers from; "" is this one.
var testWorkerPath string

// buildTestBinary builds pkg, without the race detector, into testBinDir as name.
func buildTestBinary(name, pkg string) (string, error) {
	bin := filepath.Join(testBinDir, name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// testDaemon is a real daemon on a temp socket and state dir.
type testDaemon struct {
	socket, state string
	d             *Daemon
	http          *http.Client
	done          chan error
	cancel        context.CancelFunc
}

func startDaemon(t testing.TB, configYAML string) *testDaemon {
	t.Helper()
	return startDaemonWith(t, configYAML, nil)
}

// startDaemonWith is startDaemon with prepare run on the state dir's path before the daemon
// is made (a test mounts a small filesystem there).
func startDaemonWith(t testing.TB, configYAML string, prepare func(state string)) *testDaemon {
	t.Helper()
	testutil.RequireRoot(t)
	// Not under /tmp: every child has a private /tmp, and the socket and state dir must be
	// where a production daemon's are, in the children's view of the host.
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	// Each test daemon gets its own cgroup subtree: a daemon reaps its subtree at start, and
	// test packages run in parallel.
	if !strings.Contains(configYAML, "cgroup_name") {
		name := "sandboxd-test-" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		if strings.Contains(configYAML, "sandbox:\n") {
			configYAML = strings.Replace(configYAML, "sandbox:\n", "sandbox:\n  cgroup_name: "+name+"\n", 1)
		} else {
			configYAML += "\nsandbox:\n  cgroup_name: " + name + "\n"
		}
	}
	if err := os.WriteFile(cfgPath, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{socket: filepath.Join(dir, "sandboxd.sock"), state: filepath.Join(dir, "state"), done: make(chan error, 1)}
	if prepare != nil {
		prepare(td.state)
	}
	d, err := New(Options{Socket: td.socket, StateDir: td.state, ConfigPath: cfgPath, ConfigRequired: true}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("new daemon: %v", err)
	}
	td.d = d
	if testWorkerPath != "" {
		d.core.host.Tools().WorkerPath = testWorkerPath
	}
	l, err := Listen(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	td.cancel = cancel
	go func() { td.done <- d.Serve(ctx, l) }()
	td.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", td.socket)
	}}}
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) stop() {
	if td.cancel == nil {
		return
	}
	td.cancel()
	td.cancel = nil
	<-td.done
}

// do sends a request as root and returns status and body.
func (td *testDaemon) do(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://sandboxd"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := td.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func decodeInto(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

func (td *testDaemon) newSession(t testing.TB, body string) protocol.Session {
	t.Helper()
	code, b := td.do(t, "POST", "/v1/sessions", body)
	if code != http.StatusCreated {
		t.Fatalf("create session: %d %s", code, b)
	}
	var s protocol.Session
	decodeInto(t, b, &s)
	return s
}

func (td *testDaemon) call(t *testing.T, id, tool, input string) (int, protocol.CallResult) {
	t.Helper()
	body := fmt.Sprintf(`{"tool":%q,"input":%s}`, tool, input)
	code, b := td.do(t, "POST", "/v1/sessions/"+id+"/calls", body)
	var res protocol.CallResult
	decodeInto(t, b, &res)
	return code, res
}

func TestHealthAndTools(t *testing.T) {
	td := startDaemon(t, "")
	code, b := td.do(t, "GET", "/v1/healthz", "")
	var h protocol.Health
	decodeInto(t, b, &h)
	if code != 200 || h.Status != "ok" || !h.Admin || h.Caller.UID != 0 {
		t.Fatalf("healthz = %d %+v", code, h)
	}
	code, b = td.do(t, "GET", "/v1/tools", "")
	var tl protocol.ToolList
	decodeInto(t, b, &tl)
	if code != 200 || len(tl.Tools) < 6 {
		t.Fatalf("tools = %d %s", code, b)
	}
	names := map[string]bool{}
	var prev string
	for _, tool := range tl.Tools {
		names[tool.Name] = true
		if !tool.External && prev > tool.Name {
			t.Errorf("built-ins not sorted: %s after %s", tool.Name, prev)
		}
		prev = tool.Name
		if !tool.Deferred && len(tool.InputSchema) == 0 {
			t.Errorf("%s has no schema", tool.Name)
		}
	}
	for _, n := range []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep"} {
		if !names[n] {
			t.Errorf("tool %s missing from the pool", n)
		}
	}
}

func TestBadInput(t *testing.T) {
	td := startDaemon(t, "max_request_bytes: 4096\n")
	cwd := t.TempDir()
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, cwd))
	cases := []struct {
		name, method, path, body string
		status                   int
		class                    string
		mention                  string
	}{
		{"too large", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Bash","input":{"command":"` + strings.Repeat("x", 5000) + `"}}`, 413, "too_large", "limit"},
		{"malformed", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":`, 400, "bad_request", "malformed"},
		{"trailing", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Read","input":{}} {}`, 400, "bad_request", "trailing"},
		{"unknown field", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Read","inputs":{}}`, 400, "bad_request", "inputs"},
		{"unknown tool", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Reed","input":{}}`, 404, "unknown_tool", "Read"},
		{"schema", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Read","input":{"file_path":7}}`, 422, "schema_invalid", "file_path"},
		{"missing field", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Bash","input":{}}`, 422, "schema_invalid", "command"},
		{"NUL in a command", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Bash","input":{"command":"echo hi\u0000; echo there"}}`, 422, "validation", "NUL"},
		{"NUL in a path", "POST", "/v1/sessions/" + s.ID + "/calls", `{"tool":"Read","input":{"file_path":"/etc/hostname\u0000/x"}}`, 422, "validation", "NUL"},
		{"unknown session", "POST", "/v1/sessions/s_nope/calls", `{"tool":"Read","input":{}}`, 404, "not_found", "session"},
		{"bad mode", "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"mode":"yolo"}`, cwd), 422, "validation", "mode"},
		{"relative cwd", "POST", "/v1/sessions", `{"cwd":"rel"}`, 422, "validation", "absolute"},
		{"no route", "GET", "/v2/x", "", 404, "not_found", "/v1/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, b := td.do(t, tc.method, tc.path, tc.body)
			var eb protocol.ErrorBody
			decodeInto(t, b, &eb)
			if code != tc.status || eb.Error.Class != tc.class || !strings.Contains(eb.Error.Message, tc.mention) {
				t.Errorf("got %d %s, want %d class %s mentioning %q", code, b, tc.status, tc.class, tc.mention)
			}
		})
	}
	// The daemon still serves.
	if code, _ := td.do(t, "GET", "/v1/healthz", ""); code != 200 {
		t.Errorf("healthz after bad input: %d", code)
	}
}

// The longest command bash -c can be given runs; one byte more is a validation error that says
// what to do, not an execve's E2BIG after the decision.
func TestLongestBashCommand(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	command := func(n int) string {
		const head = "echo ran; : " // not a simple command: bash runs it, behind the report prologue
		b, _ := json.Marshal(map[string]string{"command": head + strings.Repeat("x", n-len(head))})
		return string(b)
	}
	code, res := td.call(t, s.ID, "Bash", command(executor.MaxBashCommandBytes))
	if code != 200 || res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "ran") {
		t.Fatalf("a command of exactly %d bytes: %d %+v", executor.MaxBashCommandBytes, code, res)
	}
	code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/calls", `{"tool":"Bash","input":`+command(executor.MaxBashCommandBytes+1)+`}`)
	var eb protocol.ErrorBody
	decodeInto(t, b, &eb)
	if code != 422 || eb.Error.Class != "validation" || !strings.Contains(eb.Error.Message, "Write tool") {
		t.Fatalf("one byte more: %d %s", code, b)
	}
}

// A client that stalls mid-request is cut off by the read timeout; others are served.
func TestStalledClientIsCutOff(t *testing.T) {
	td := startDaemon(t, "read_header_timeout_sec: 1\nread_body_timeout_sec: 1\n")
	c, err := net.Dial("unix", td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"cwd\":")
	if code, _ := td.do(t, "GET", "/v1/healthz", ""); code != 200 {
		t.Fatalf("healthz while a client stalls: %d", code)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, _ = io.ReadAll(c) // the server answers with an error or closes; either way it ends
	if time.Since(start) > 4*time.Second {
		t.Fatal("stalled connection was not cut off by the read timeout")
	}
}

func TestRefusesSocketHeldByLiveDaemon(t *testing.T) {
	td := startDaemon(t, "")
	if _, err := Listen(td.socket); err == nil || !strings.Contains(err.Error(), "running daemon") {
		t.Fatalf("Listen on a live socket: %v", err)
	}
	// A stale socket file (nobody listening) is removed and reused.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	l2, err := Listen(stale)
	if err != nil {
		t.Fatalf("stale socket not reclaimed: %v", err)
	}
	l2.Close()
}

// auditRecords reads every record the daemon wrote.
func auditRecords(t *testing.T, td *testDaemon) []audit.Record {
	t.Helper()
	var recs []audit.Record
	for r, err := range audit.Query(filepath.Join(td.state, "audit"), audit.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, *r)
	}
	return recs
}

// A second daemon on the same cgroup subtree would reap the first one's calls: refused.
func TestSecondDaemonOnSameCgroupNameRefused(t *testing.T) {
	td := startDaemon(t, "")
	_ = td
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	name := "sandboxd-test-" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if err := os.WriteFile(cfg, []byte("sandbox:\n  cgroup_name: "+name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Socket: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), ConfigPath: cfg, ConfigRequired: true}, zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "cgroup_name") {
		t.Fatalf("second daemon on the same cgroup name: %v", err)
	}
}

// A second daemon on the same state directory would write the first one's audit chain from a
// second end and remove its sessions' results: refused, whatever its socket and cgroup name.
func TestSecondDaemonOnSameStateDirRefused(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("sandbox:\n  cgroup_name: sandboxd-test-second-state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Socket: filepath.Join(dir, "s.sock"), StateDir: td.state, ConfigPath: cfg, ConfigRequired: true}, zaptest.NewLogger(t))
	if err == nil {
		d.shutdown()
		t.Fatal("a second daemon started on the first one's state dir")
	}
	if !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("second daemon on the same state dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(td.state, "audit")); err != nil {
		t.Fatalf("the first daemon's audit dir: %v", err)
	}
}

// Sessions end with their daemon: a start removes the persisted results a crashed
// predecessor left (a clean stop removes its own), and only what is inside tool-results.
func TestStartRemovesLeftoverResults(t *testing.T) {
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	dead := filepath.Join(state, "tool-results", "s_0123456789abcdef01234567")
	if err := os.MkdirAll(dead, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "out.txt"), []byte("a crashed daemon's session output\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "keep.txt") // a symlink's target must survive
	if err := os.WriteFile(outside, []byte("not the daemon's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(state, "tool-results", "s_link")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("sandbox:\n  cgroup_name: sandboxd-test-leftover-results\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Socket: filepath.Join(dir, "s.sock"), StateDir: state, ConfigPath: cfg, ConfigRequired: true}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	ents, err := os.ReadDir(filepath.Join(state, "tool-results"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("tool-results after the start: %v %v", ents, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a file behind a symlink in tool-results was removed: %v", err)
	}
}

// TestClientKey: a session made with a client_key answers a call, decide, batch or report
// that names another key as not found (the client then makes its own session), and one that
// names its key or none as usual; a key past 128 bytes is refused at creation.
func TestClientKey(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default","client_key":"hook:k1"}`, testHostDir(t)))
	call := `{"tool":"Bash","input":{"command":"true"}%s}`
	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"decide", fmt.Sprintf(call, `,"client_key":"hook:k2"`), 404},
		{"calls", fmt.Sprintf(call, `,"client_key":"hook:k2"`), 404},
		{"batch", `{"calls":[` + fmt.Sprintf(call, "") + "," + fmt.Sprintf(call, `,"client_key":"hook:k2"`) + `]}`, 404},
		{"reports", `{"event":"PostToolUse","tool":"Bash","client_key":"hook:k2"}`, 404},
		{"decide", fmt.Sprintf(call, `,"client_key":"hook:k1"`), 200},
		{"calls", fmt.Sprintf(call, ""), 200},
		{"reports", `{"event":"PostToolUse","tool":"Bash","client_key":"hook:k1"}`, 202},
	} {
		code, body := td.do(t, "POST", "/v1/sessions/"+s.ID+"/"+tc.path, tc.body)
		if code != tc.want || code == 404 && !strings.Contains(string(body), "client_key differs") {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, code, body, tc.want)
		}
	}
	code, body := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"client_key":%q}`, testHostDir(t), strings.Repeat("k", 129)))
	if code != 422 || !strings.Contains(string(body), "client_key") {
		t.Errorf("a 129-byte key: %d %s", code, body)
	}
}
