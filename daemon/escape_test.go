package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// Hostile commands through the socket: each is contained with the specific outcome, and the
// daemon still serves after every one. (The full escape suite runs in ./sandbox/.)
func TestHostileCallsThroughTheSocket(t *testing.T) {
	td := startDaemon(t, "sandbox:\n  pids_max: 64\n  memory_max_bytes: 67108864\n")
	dir := t.TempDir()
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	auditDir := filepath.Join(td.state, "audit")
	cases := []struct {
		name, command string
		check         func(res protocol.CallResult) string
	}{
		{"fork bomb", ":(){ :|:& };:; sleep 1", func(r protocol.CallResult) string {
			if r.Data["pids_limited"] != true {
				return "pids_limited not reported"
			}
			return ""
		}},
		{"memory bomb", `python3 -c "b=bytearray(1<<30)"`, func(r protocol.CallResult) string {
			if r.Data["oom_killed"] != true {
				return "oom_killed not reported"
			}
			return ""
		}},
		{"kill the daemon", fmt.Sprintf("kill -9 %d; echo rc=$?", os.Getpid()), func(r protocol.CallResult) string {
			if !strings.Contains(fmt.Sprint(r.Data["stdout"])+fmt.Sprint(r.Data["stderr"]), "No such process") {
				return "the daemon's pid was visible"
			}
			return ""
		}},
		{"read the daemon's environment", fmt.Sprintf("cat /proc/%d/environ; echo rc=$?", os.Getpid()), func(r protocol.CallResult) string {
			if strings.Contains(fmt.Sprint(r.Data["stdout"]), "PATH=") {
				return "daemon environment leaked"
			}
			return ""
		}},
		{"read the audit log", "cat " + auditDir + "/*.jsonl; echo rc=$?", func(r protocol.CallResult) string {
			if strings.Contains(fmt.Sprint(r.Data["stdout"]), `"kind"`) {
				return "audit log readable"
			}
			return ""
		}},
		{"write outside", "touch /etc/sandboxd-escape; echo rc=$?", func(r protocol.CallResult) string {
			if _, err := os.Stat("/etc/sandboxd-escape"); err == nil {
				os.Remove("/etc/sandboxd-escape")
				return "wrote to /etc"
			}
			return ""
		}},
		{"reach the daemon's socket", fmt.Sprintf(`python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('%s'); print('connected')"`, td.socket), func(r protocol.CallResult) string {
			if strings.Contains(fmt.Sprint(r.Data["stdout"]), "connected") {
				return "a confined command reached the daemon's socket (it could change its own session)"
			}
			return ""
		}},
		{"timeout", `sleep 30`, func(r protocol.CallResult) string {
			if r.Data["timed_out"] != true {
				return "timed_out not reported"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			input := fmt.Sprintf(`{"command":%q}`, tc.command)
			if tc.name == "timeout" {
				input = fmt.Sprintf(`{"command":%q,"timeout":1000}`, tc.command)
			}
			_, res := td.call(t, s.ID, "Bash", input)
			if msg := tc.check(res); msg != "" {
				t.Errorf("%s: %+v", msg, res.Data)
			}
			if code, _ := td.do(t, "GET", "/v1/healthz", ""); code != 200 {
				t.Fatalf("daemon stopped serving after %s: %d", tc.name, code)
			}
		})
	}
}

// The daemon's own deny paths (its socket, its audit log) exist once it serves: a missing deny
// path would cost a root caller's every call landlock rules for each entry of its ancestors
// (the state dir, /var/tmp, /var, /), ~30 rules for one path that was never created.
func TestDaemonDenyPathsExist(t *testing.T) {
	td := startDaemon(t, "sandbox:\n  deny_paths: []\n")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, t.TempDir()))
	sess := td.d.core.store.All()[0]
	if sess.ID != s.ID {
		t.Fatalf("session %s, want %s", sess.ID, s.ID)
	}
	spec := td.d.core.host.Spec(sess, sess.Mode() == permission.ModePlan, "c", []string{"/bin/true"})
	if len(spec.DenyPaths) < 2 {
		t.Fatalf("deny paths %v: want the socket and the audit log", spec.DenyPaths)
	}
	for _, p := range spec.DenyPaths {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the daemon denies %s, which does not exist: %v", p, err)
		}
	}
}

// A socket of the caller's own outside the sandbox acts with the caller's rights and secrets,
// and connect(2) is no filesystem right: git's credential cache, reached from a confined
// call, handed out the cached password. Calls cannot make unix sockets unless the config
// allows them (read at reload).
func TestUnixSocketOfTheCallerUnreachable(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git (its credential cache is the socket under test)")
	}
	td := startDaemon(t, "sandbox:\n  pids_max: 64\n")
	host, err := os.MkdirTemp("/var/tmp", "sandboxd-cc-") // outside every child's private /tmp
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(host) })
	sock := filepath.Join(host, "cc", "socket")
	cache := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, append([]string{"credential-cache", "--socket", sock}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git credential-cache %v: %v: %s", args, err, out)
		}
	}
	cache("protocol=https\nhost=example.com\nusername=alice\npassword=s3cret-token\n\n", "--timeout", "120", "store")
	t.Cleanup(func() { cache("", "exit") })
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, t.TempDir()))
	get := fmt.Sprintf(`printf 'protocol=https\nhost=example.com\n\n' | git credential-cache --socket %s get; python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>&1 | tail -1`, sock)
	_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, get))
	if out := fmt.Sprint(res.Data["stdout"]); strings.Contains(out, "s3cret-token") || !strings.Contains(out, "PermissionError") {
		t.Fatalf("a confined call reached the caller's credential cache, or made a unix socket: %+v", res.Data)
	}

	cfgPath := td.d.opts.ConfigPath
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	allowed := strings.Replace(string(cfg), "sandbox:\n", "sandbox:\n  allow_unix_sockets: true\n", 1)
	if err := os.WriteFile(cfgPath, []byte(allowed), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	if _, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, get)); !strings.Contains(fmt.Sprint(res.Data["stdout"]), "s3cret-token") {
		t.Fatalf("sandbox.allow_unix_sockets: true did not let the call reach the socket: %+v", res.Data)
	}
}

// TestCallsCannotUseTheDaemon: a call that reaches the daemon's socket by another name (a
// hard link where the call can see it, with unix sockets allowed) is refused by where the
// kernel says it runs, so it cannot make itself sessions, read the log or answer its own asks;
// a process outside uses the same name normally.
func TestCallsCannotUseTheDaemon(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl (scripts/deps.sh installs it)")
	}
	td := startDaemon(t, "sandbox:\n  allow_unix_sockets: true\n")
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-link-") // outside every child's private /tmp
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	link := filepath.Join(dir, "d.sock")
	if err := os.Link(td.socket, link); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	cmd := fmt.Sprintf(`curl -s --unix-socket %s -X POST -d '{"cwd":"/","mode":"bypassPermissions"}' http://sandboxd/v1/sessions; echo; curl -s --unix-socket %s http://sandboxd/v1/healthz`, link, link)
	_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
	out := fmt.Sprint(res.Data["stdout"])
	if strings.Contains(out, `"id":"s_`) || strings.Contains(out, `"status":"ok"`) || strings.Count(out, "nothing sandboxd runs may use sandboxd") != 2 {
		t.Fatalf("a call used the daemon through a link to its socket: %+v", res.Data)
	}
	c := client.New(link)
	defer c.Close()
	if _, err := c.Health(context.Background()); err != nil {
		t.Errorf("a process outside, through the same link: %v", err)
	}
}
