package daemon

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// A reload that takes the host's network from a user takes it from the sessions the user
// already has, not only from new ones: they are suspended (every call denied, saying why), and
// a reload that gives it back resumes them. Sessions of other networks go on.
func TestReloadRevokesHostNetwork(t *testing.T) {
	u := testutil.CreateUser(t, "sbrn")
	td := startDaemon(t, "network:\n  host_users: ["+u.Name+"]\n")
	host := sessionAs(t, td, u, `,"mode":"bypassPermissions","network":"host"`)
	none := sessionAs(t, td, u, `,"mode":"bypassPermissions"`)
	run := func(id string) (int, protocol.CallResult) {
		code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+id+"/calls", `{"tool":"Bash","input":{"command":"echo ran"}}`, "")
		var res protocol.CallResult
		if code == http.StatusOK {
			decodeInto(t, b, &res)
		}
		return code, res
	}
	if code, res := run(host); code != http.StatusOK || res.IsError {
		t.Fatalf("host session before the reload: %d %+v", code, res)
	}
	// A background task holds the host's network as long as it runs.
	if code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+host+"/calls",
		`{"tool":"Bash","input":{"command":"sleep 300","run_in_background":true}}`, ""); code != http.StatusOK {
		t.Fatalf("start a background task: %d %s", code, b)
	}
	sleeping := func() []int { return sleepersOf(u.UID) }
	waitFor(t, func() bool { return len(sleeping()) > 0 })
	cfgPath := td.d.opts.ConfigPath
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(string(orig), "host_users: ["+u.Name+"]", "host_users: []", 1)
	if err := os.WriteFile(cfgPath, []byte(without), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	code, res := run(host)
	if code != http.StatusOK || !res.IsError || res.Decision == nil || res.Decision.Behavior != "deny" ||
		!strings.Contains(res.Decision.Reason, "network.host_users") {
		t.Errorf("host session after host_users no longer names its owner: %d %+v", code, res.Decision)
	}
	if code, res := run(none); code != http.StatusOK || res.IsError {
		t.Errorf("a session without the host's network after the reload: %d %+v", code, res.Decision)
	}
	if left := sleeping(); len(left) > 0 {
		t.Errorf("the host session's background task still runs after its network was withdrawn: pids %v", left)
	}
	// The asynchronous rules rebuild that follows a reload must not resume it either, nor
	// its owner's rules change: a rule set put in force lifts a suspension for rules that did
	// not load, not this one.
	td.d.core.reloadRules()
	if _, res := run(host); !res.IsError {
		t.Errorf("host session after a rules rebuild: %+v", res.Decision)
	}
	if code, b := curlAs(t, td, u, "PATCH", "/v1/sessions/"+host, `{"rules":{"allow":[],"deny":[],"ask":[]}}`, ""); code == http.StatusOK {
		t.Errorf("a rules change of the session whose network was withdrawn: %d %s, want refused", code, b)
	}
	if _, res := run(host); !res.IsError {
		t.Errorf("host session after its owner's rules change: %+v", res.Decision)
	}

	if err := os.WriteFile(cfgPath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	waitFor(t, func() bool { _, res := run(host); return !res.IsError })
}
