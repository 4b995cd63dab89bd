package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
