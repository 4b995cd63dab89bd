package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/protocol"
)

// A refused reload leaves the daemon on what it had; the status (for admins) and the metrics
// keep saying so until a reload succeeds, for the configuration and the policy each.
func TestRefusedReloadShowsInStatusAndMetrics(t *testing.T) {
	policyDir := filepath.Join(t.TempDir(), "policy.d")
	if err := os.Mkdir(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, "policy_dir: "+policyDir+"\n")
	check := func(when string, configOK, policyOK bool) {
		t.Helper()
		_, b := td.do(t, "GET", "/v1/healthz", "")
		var h protocol.Health
		decodeInto(t, b, &h)
		if got := strings.Contains(h.Reload, "configuration reload refused"); got == configOK {
			t.Errorf("%s: status says %q", when, h.Reload)
		}
		if got := strings.Contains(h.Reload, "policy reload refused"); got == policyOK {
			t.Errorf("%s: status says %q", when, h.Reload)
		}
		_, m := td.do(t, "GET", "/v1/metrics", "")
		for name, ok := range map[string]bool{"sandboxd_config_last_reload_successful": configOK, "sandboxd_policy_last_load_successful": policyOK} {
			want := name + " 0"
			if ok {
				want = name + " 1"
			}
			if !strings.Contains(string(m), "\n"+want+"\n") {
				t.Errorf("%s: metrics lack %q", when, want)
			}
		}
	}
	check("at start", true, true)

	cfgPath := td.d.opts.ConfigPath
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(append([]byte{}, orig...), "no_such_key: 1\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	check("after an unknown key", false, true)

	if err := os.WriteFile(cfgPath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(policyDir, "broken.rego"), []byte("package sandboxd.custom\n\ndeny contains \"x\" if {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	check("after a Rego syntax error", true, false)

	if err := os.Remove(filepath.Join(policyDir, "broken.rego")); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	check("after both were fixed", true, true)
}

// An admin settings file that does not load refuses every session, so the daemon must not
// say it is fine: refused at start, and after a reload the status (degraded, with the file
// and why for admins) and the policy metric say so until the file loads.
func TestBrokenAdminSettingsShowInStatusAndMetrics(t *testing.T) {
	policyDir := filepath.Join(t.TempDir(), "policy.d")
	if err := os.Mkdir(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(policyDir, "10-broken.json")
	writeBroken := func() {
		t.Helper()
		if err := os.WriteFile(broken, []byte(`{"permissions":{"deny":["Bash(git push:*)"`), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	writeBroken()
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	cfg := "policy_dir: " + policyDir + "\nsandbox:\n  cgroup_name: sandboxd-test-broken-admin-settings\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Socket: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), ConfigPath: cfgPath, ConfigRequired: true}, zaptest.NewLogger(t)); err == nil || !strings.Contains(err.Error(), "10-broken.json") {
		t.Fatalf("a daemon started with a broken admin settings file: %v", err)
	}
	// A daemon that refuses to start leaves nothing behind: not even its empty cgroup subtree.
	for _, d := range cgroupsLeft(t, "sandboxd-test-broken-admin-settings") {
		t.Errorf("the refused start left cgroup %s", d)
	}

	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, "policy_dir: "+policyDir+"\n")
	check := func(when string, ok bool) {
		t.Helper()
		_, b := td.do(t, "GET", "/v1/healthz", "")
		var h protocol.Health
		decodeInto(t, b, &h)
		if said := strings.Contains(h.Reload, "admin settings refused") && strings.Contains(h.Reload, "10-broken.json"); said == ok || (h.Status == "ok") != ok {
			t.Errorf("%s: status %q, reload %q", when, h.Status, h.Reload)
		}
		_, m := td.do(t, "GET", "/v1/metrics", "")
		want := "sandboxd_policy_last_load_successful " + map[bool]string{true: "1", false: "0"}[ok]
		if !strings.Contains(string(m), "\n"+want+"\n") {
			t.Errorf("%s: metrics lack %q", when, want)
		}
	}
	check("at start", true)
	writeBroken()
	td.d.Reload()
	check("after a broken admin settings file", false)
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	check("after it was removed", true)
}
