package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/permission"
)

func TestDefaultsValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		body    string
		wantErr string
		check   func(Config) bool
	}{
		{"empty file keeps defaults", "", "", func(c Config) bool { return c.AdminGroup == "sandboxd-admin" }},
		{"override", "admin_group: root\nsandbox:\n  pids_max: 64\n", "", func(c Config) bool {
			return c.AdminGroup == "root" && c.Sandbox.PidsMax == 64 && c.Sandbox.MemoryMaxBytes == Default().Sandbox.MemoryMaxBytes
		}},
		{"unknown field", "admin_grup: wheel\n", "admin_grup is not a setting (the settings at top level: ", nil},
		{"unknown field in a section", "sandbox:\n  deny_path: [/x]\n", "sandbox.deny_path is not a setting (the settings at sandbox: ", nil},
		{"unknown field in a list", "hooks:\n  PreToolUse:\n  - matcher: Bash\n    hook: []\n", "hooks.PreToolUse[0].hook is not a setting", nil},
		// A key given twice was read once, the last winning: an edit of the first changed nothing.
		{"duplicate top-level key named", "sandbox:\n  pids_max: 64\nmax_parallel_calls: 4\nsandbox:\n  pids_max: 128\n", `key "sandbox" is given twice`, nil},
		{"duplicate nested key named", "sandbox:\n  pids_max: 64\n  pids_max: 128\n", `key "pids_max" is given twice`, nil},
		{"duplicate key in JSON named", `{"max_parallel_calls": 4, "max_parallel_calls": 5}`, `key "max_parallel_calls" is given twice`, nil},
		// encoding/json matches keys case-insensitively; the file is read as it is written.
		{"key in another case refused", "sandbox:\n  Pids_Max: 64\n", "sandbox.Pids_Max is not a setting; write sandbox.pids_max", nil},
		{"top-level key in another case refused", "Max_Parallel_Calls: 4\n", "Max_Parallel_Calls is not a setting; write max_parallel_calls", nil},
		{"both spellings refused", "sandbox:\n  pids_max: 64\n  PIDS_MAX: 128\n", "sandbox.PIDS_MAX is not a setting; write sandbox.pids_max", nil},
		{"hook event in another case refused", "hooks:\n  pretooluse: []\n", "hooks.pretooluse is not a setting; write hooks.PreToolUse", nil},
		// The default network is what a session naming none gets, and host is refused at run
		// time to everyone not in host_users: with none listed, every user's calls failed.
		{"host default with no host users refused", "network:\n  mode: host\n", "network.mode: host needs network.host_users", nil},
		{"host default with empty host users refused", "network:\n  mode: host\n  host_users: []\n", "host_users: [root] if only root's sessions run", nil},
		{"host default for root alone", "network:\n  mode: host\n  host_users: [root]\n", "", func(c Config) bool { return c.EffectiveNetworkMode() == NetworkHost }},
		{"host default for listed users", "network:\n  mode: host\n  host_users: [root, '1001']\n", "", func(c Config) bool { return len(c.Network.HostUsers) == 2 }},
		{"host user unknown", "network:\n  host_users: [nosuchuser-sbx]\n", `no user is named "nosuchuser-sbx"`, nil},
		{"host user empty", "network:\n  mode: host\n  host_users: ['']\n", `no user is named ""`, nil},
		{"host default for everyone", "sandbox:\n  allow_network: true\nnetwork:\n  mode: host\n", "", func(c Config) bool { return c.EffectiveNetworkMode() == NetworkHost }},
		{"host for everyone by the older switch", "sandbox:\n  allow_network: true\n", "", func(c Config) bool { return c.EffectiveNetworkMode() == NetworkHost }},
		// Membership is looked up by name: a typo made no one but root an admin, silently.
		{"missing admin group refused", "admin_group: sandboxd-no-such-group\n", `admin_group: no group is named "sandboxd-no-such-group"`, nil},
		// The package creates the default group; a source build may run without it.
		{"default admin group may be missing", "admin_group: sandboxd-admin\n", "", func(c Config) bool { return c.AdminGroup == "sandboxd-admin" }},
		{"bad value", "max_parallel_calls: 0\n", "max_parallel_calls", nil},
		{"bad hook", "hooks:\n  PreToolUse:\n  - matcher: Bash\n    hooks:\n    - type: http\n      command: x\n", "hooks", nil},
		{"not yaml", "{{{", "config", nil},
		{"unsigned bundle refused", "bundle:\n  url: http://127.0.0.1:8181\n  resource: b.tar.gz\n", "signing_key_file", nil},
		{"unsigned bundle by choice", "bundle:\n  url: http://127.0.0.1:8181\n  resource: b.tar.gz\n  require_signature: false\n", "", func(c Config) bool {
			return c.Bundle.RequireSignature != nil && !*c.Bundle.RequireSignature
		}},
		{"bad cgroup name", "sandbox:\n  cgroup_name: ../x\n", "cgroup_name", nil},
		// A relative path was accepted and then failed every call's sandbox spec.
		{"relative deny path named", "sandbox:\n  deny_paths: [~/.ssh, secrets]\n", `sandbox.deny_paths: "secrets" must be absolute`, nil},
		{"relative cache dir named", "sandbox:\n  cache_dirs: [.npm]\n", `sandbox.cache_dirs: ".npm" must be absolute`, nil},
		{"home and absolute paths", "sandbox:\n  deny_paths: [~/.ssh, /srv/secret]\n  cache_dirs: [~/.npm]\n", "", func(c Config) bool {
			return len(c.Sandbox.DenyPaths) == 2 && len(c.Sandbox.CacheDirs) == 1
		}},
		{"path_append", "sandbox:\n  path_append: [/usr/bin]\n", "", func(c Config) bool { return slices.Equal(c.Sandbox.PathAppend, []string{"/usr/bin"}) }},
		// A program a call runs by name must be what the policy took it for: no user may plant one.
		{"path_append anyone can write refused", "sandbox:\n  path_append: [/usr/bin, /tmp]\n", `sandbox.path_append: "/tmp" is not a directory only root can change: /tmp is`, nil},
		{"path_append relative refused", "sandbox:\n  path_append: [bin]\n", `sandbox.path_append: "bin" must be an absolute`, nil},
		{"path_append list in one entry refused", "sandbox:\n  path_append: [\"/usr/bin:/tmp\"]\n", `without a ':'`, nil},
		{"path_append under proc refused", "sandbox:\n  path_append: [/proc/self/cwd]\n", `lies under /proc`, nil},
		{"path_append under dev refused", "sandbox:\n  path_append: [/dev/fd]\n", `lies under /dev`, nil},
		{"path_append missing refused", "sandbox:\n  path_append: [/nonexistent-sandboxd-dir]\n", `cannot be resolved`, nil},
		{"extra syscalls", "sandbox:\n  extra_syscalls: [vhangup, open]\n", "", func(c Config) bool {
			return strings.Join(c.Sandbox.ExtraSyscalls, ",") == "vhangup,open"
		}},
		{"extra syscall typo names it", "sandbox:\n  extra_syscalls: [vhangup, vhangupp]\n", `sandbox.extra_syscalls: unknown syscall "vhangupp"`, nil},
		{"limits default", "", "", func(c Config) bool {
			return c.Limits.ResponseBytes == 64<<20 && c.Limits.BatchCalls == 64 && c.Limits.PersistedBytesPerUser == 1<<30 &&
				c.Limits.TaskMaxSeconds == 3600 && c.Audit.MaxInputBytes == 256<<10 && c.Audit.RetainDays == 90 && c.Sessions.IdleTimeoutSec == 86400
		}},
		{"sessions_per_user falls back to max_sessions_per_user", "max_sessions_per_user: 3\n", "", func(c Config) bool { return c.EffectiveSessionsPerUser() == 3 }},
		{"sessions_per_user wins", "max_sessions_per_user: 3\nlimits:\n  sessions_per_user: 5\n", "", func(c Config) bool { return c.EffectiveSessionsPerUser() == 5 }},
		{"zero batch refused", "limits:\n  batch_calls: 0\n", "limits.batch_calls", nil},
		{"tiny response refused", "limits:\n  response_bytes: 10\n", "limits.response_bytes", nil},
		{"zero rate refused", "limits:\n  requests_per_second_per_user: 0\n", "requests_per_second_per_user", nil},
		{"huge audit input refused", "audit:\n  max_input_bytes: 100000000\n", "audit.max_input_bytes", nil},
		{"short idle timeout refused", "sessions:\n  idle_timeout_sec: 1\n", "sessions.idle_timeout_sec", nil},
		{"http decision logs refused", "bundle:\n  url: http://127.0.0.1:8181\n  resource: b.tar.gz\n  require_signature: false\n  decision_logs: true\n", "https", nil},
		{"http decision logs by choice", "bundle:\n  url: http://127.0.0.1:8181\n  resource: b.tar.gz\n  require_signature: false\n  decision_logs: true\n  allow_insecure_decision_logs: true\n", "", func(c Config) bool { return c.Bundle.AllowInsecureDecisionLogs }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(write(strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.body), true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), false); err != nil {
		t.Errorf("missing default file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), true); err == nil {
		t.Error("missing required file accepted")
	}
}

// TestCheckSyscallNames: every name libseccomp does not know is in the error, the known ones
// are not, and a name the kernel has only on another architecture is accepted (a config may
// serve several).
func TestCheckSyscallNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		names      []string
		want, notW []string // in the error, not in it; want nil: no error
	}{
		{"none", nil, nil, nil},
		{"known", []string{"vhangup", "open", "io_uring_setup"}, nil, nil},
		{"another architecture's", []string{"cacheflush"}, nil, nil},
		{"typos", []string{"vhangup", "opne", "io_uring_setpu"}, []string{`"opne"`, `"io_uring_setpu"`}, []string{"vhangup"}},
		{"empty name", []string{""}, []string{`unknown syscall ""`}, nil},
		{"case matters", []string{"VHANGUP"}, []string{`"VHANGUP"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkSyscallNames(tc.names)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("checkSyscallNames(%q) = %v, want nil", tc.names, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkSyscallNames(%q) = nil, want an error naming %v", tc.names, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			for _, w := range tc.notW {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q names %s, which is known", err, w)
				}
			}
		})
	}
}

// TestNetworkDomains: network.allowed_domains and denied_domains take a rule's domain syntax,
// normalized as a rule's is, so `Example.COM.` matches example.com; an entry no host could
// match refuses the configuration, naming it, rather than matching nothing.
func TestNetworkDomains(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	load := func(name, body string) (Config, error) {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(p, true)
	}
	cfg, err := load("ok", "network:\n  allowed_domains: [Example.COM., '*.NpmJS.org']\n  denied_domains: [Secret.Example.com, 'x.TEST.', '[2001:DB8::1]', '::ffff:10.0.0.1']\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Network.AllowedDomains, " "); got != "example.com *.npmjs.org" {
		t.Errorf("allowed_domains %q", got)
	}
	if got := strings.Join(cfg.Network.DeniedDomains, " "); got != "secret.example.com x.test 2001:db8::1 10.0.0.1" {
		t.Errorf("denied_domains %q", got)
	}
	for host, list := range map[string][]string{
		"example.com": cfg.Network.AllowedDomains, "registry.npmjs.org": cfg.Network.AllowedDomains,
		"secret.example.com": cfg.Network.DeniedDomains, "X.test.": cfg.Network.DeniedDomains,
		"[2001:db8:0::1]": cfg.Network.DeniedDomains, "::ffff:a00:1": cfg.Network.DeniedDomains,
	} {
		if !slices.ContainsFunc(list, func(p string) bool { return permission.MatchDomain(p, host) }) {
			t.Errorf("%s matches no entry of %q", host, list)
		}
	}
	for i, bad := range []string{"exa mple.com", "*.", "http://x", "", "example.com:443", "a..b", "ex/ample.com", "fe80::1%eth0", "[::1"} {
		for _, key := range []string{"allowed_domains", "denied_domains"} {
			body := fmt.Sprintf("network:\n  %s: [ok.example, %q]\n", key, bad)
			_, err := load(fmt.Sprintf("bad%d-%s", i, key), body)
			if err == nil || !strings.Contains(err.Error(), "network."+key+": "+strconv.Quote(bad)) {
				t.Errorf("%s: %q: err = %v, want one naming the entry", key, bad, err)
			}
		}
	}
	// A Config made without Load is held to the normalized form too.
	c := Default()
	c.Network.DeniedDomains = []string{"Secret.example.com"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `write "secret.example.com"`) {
		t.Errorf("an unnormalized entry validated: %v", err)
	}
}

// TestAuditSyslog: audit.syslog names a local socket, as the forwarder dials it; a remote
// address (which it would dial as a relative path, dropping every copy) refuses the file.
func TestAuditSyslog(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{
		"": true, "/dev/log": true, "unixgram:/run/x.sock": true, "unix:/run/x.sock": true,
		"udp:10.0.0.1:514": false, "tcp:logs.example:514": false, "logs.example:514": false,
		"dev/log": false, "unix:relative.sock": false, "unixgram:": false,
	} {
		c := Default()
		c.Audit.Syslog = v
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("audit.syslog %q: Validate() = %v, want ok %v", v, err, ok)
		}
	}
}

// TestLoadRefusesNonRegular: a config path that is a FIFO or a device is refused at once,
// never read: a reload reads it where the daemon takes its signals.
func TestLoadRefusesNonRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "sandboxd.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Load(p, true); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Load blocked", p)
		}
	}
}

// TestNegativeNamesKey: a negative number in any setting refuses the file with an error that
// names its key, once (the audit log's own check said only "sizes, ages and counts must not be
// negative"). Every number of the defaults is tried, a hook's timeout too.
func TestNegativeNamesKey(t *testing.T) {
	t.Parallel()
	base := Default()
	base.Hooks.PreToolUse = []HookMatcher{{Matcher: "Bash", Hooks: []Hook{{Command: "true", TimeoutSec: 5}}}}
	js, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var leaves func(v any, at string)
	leaves = func(v any, at string) {
		switch v := v.(type) {
		case float64:
			keys = append(keys, at)
		case map[string]any:
			for k, e := range v {
				leaves(e, join(at, k))
			}
		case []any:
			for i, e := range v {
				leaves(e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	leaves(doc, "")
	for _, want := range []string{"audit.max_file_age_sec", "audit.checkpoint_every", "audit.checkpoint_interval_sec", "sandbox.pids_max", "hooks.PreToolUse[0].hooks[0].timeout"} {
		if !slices.Contains(keys, want) {
			t.Fatalf("%s is not among the numbers tried: %q", want, keys)
		}
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			var d any
			if err := json.Unmarshal(js, &d); err != nil {
				t.Fatal(err)
			}
			m := d
			path := strings.FieldsFunc(key, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
			for i, p := range path {
				last := i == len(path)-1
				switch c := m.(type) {
				case map[string]any:
					if last {
						c[p] = -1
					}
					m = c[p]
				case []any:
					n, _ := strconv.Atoi(p)
					if last {
						c[n] = -1
					}
					m = c[n]
				}
			}
			body, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Default()
			if err := Parse(body, &cfg); err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), key+" must not be negative") {
				t.Fatalf("%s: -1: err = %v, want one naming the key", key, err)
			}
			named := 0
			for _, line := range strings.Split(err.Error(), "\n") {
				if first, _, _ := strings.Cut(line, " "); first == key {
					named++
				}
			}
			if named != 1 {
				t.Errorf("%s is named %d times: %v", key, named, err)
			}
		})
	}
}

// TestDrainEndsBeforeTheUnitKills: the longest drain, and the stop after it, end within the
// shipped unit's TimeoutStopSec, after which systemd SIGKILLs the daemon mid-drain; a longer
// drain is refused, naming the bound.
func TestDrainEndsBeforeTheUnitKills(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile(filepath.Join("..", "systemd", "sandboxd.service"))
	if err != nil {
		t.Fatal(err)
	}
	stop := -1
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "TimeoutStopSec="); ok {
			if stop, err = strconv.Atoi(v); err != nil {
				t.Fatalf("TimeoutStopSec=%s: want plain seconds: %v", v, err)
			}
		}
	}
	if stop < 0 {
		t.Fatal("systemd/sandboxd.service sets no TimeoutStopSec: systemd's default (90 s) is not what MaxDrainTimeoutSec was set for")
	}
	if MaxDrainTimeoutSec+stopAfterDrainSec != stop {
		t.Errorf("MaxDrainTimeoutSec %d + %d s for the stop after it != the unit's TimeoutStopSec=%d: change them together", MaxDrainTimeoutSec, stopAfterDrainSec, stop)
	}
	if d := Default().DrainTimeoutSec; d > MaxDrainTimeoutSec {
		t.Errorf("the default drain_timeout_sec %d is over the bound %d", d, MaxDrainTimeoutSec)
	}
	for v, ok := range map[int]bool{0: true, MaxDrainTimeoutSec: true, MaxDrainTimeoutSec + 1: false, stop: false, 600: false, -1: false} {
		c := Default()
		c.DrainTimeoutSec = v
		err := c.Validate()
		if (err == nil) != ok {
			t.Errorf("drain_timeout_sec %d: Validate() = %v, want ok %v", v, err, ok)
		}
		if !ok && v > 0 && !strings.Contains(fmt.Sprint(err), fmt.Sprintf("drain_timeout_sec must be between 0 and %d: the unit's TimeoutStopSec=%d", MaxDrainTimeoutSec, stop)) {
			t.Errorf("drain_timeout_sec %d: %v does not name the bound and the unit's timeout", v, err)
		}
	}
}
