package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestReloadThatConfinesMoreStopsCommands: a configuration reload that adds a deny path stops
// the commands already running, which see what it hides; one that only loosens does not.
func TestReloadThatConfinesMoreStopsCommands(t *testing.T) {
	u := testutil.CreateUser(t, "sbrc")
	td := startDaemon(t, "sandbox:\n  deny_paths: [/var/tmp/sbrc-a]\n")
	s := sessionAs(t, td, u, `,"mode":"acceptEdits"`)
	if code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+s+"/calls",
		`{"tool":"Bash","input":{"command":"sleep 300","run_in_background":true}}`, ""); code != 200 {
		t.Fatalf("start a background task: %d %s", code, b)
	}
	sleeping := func() int { return len(sleepersOf(u.UID)) }
	waitFor(t, func() bool { return sleeping() == 1 })
	cfgPath := td.d.opts.ConfigPath
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	reload := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		td.d.Reload()
	}
	reload(strings.Replace(string(orig), "deny_paths: [/var/tmp/sbrc-a]", "deny_paths: []", 1))
	if n := sleeping(); n != 1 {
		t.Fatalf("a reload that dropped a deny path stopped the task: %d running", n)
	}
	reload(strings.Replace(string(orig), "deny_paths: [/var/tmp/sbrc-a]", "deny_paths: [/var/tmp/sbrc-b]", 1))
	waitFor(t, func() bool { return sleeping() == 0 })
}

func TestSandboxNarrows(t *testing.T) {
	base := config.Sandbox{DenyPaths: []string{"/a"}, ExtraSyscalls: []string{"link"}, AllowUnixSockets: true}
	for name, tc := range map[string]struct {
		next config.Sandbox
		want bool
	}{
		"the same":            {base, false},
		"a deny path dropped": {config.Sandbox{ExtraSyscalls: []string{"link"}, AllowUnixSockets: true}, false},
		"a deny path added":   {config.Sandbox{DenyPaths: []string{"/a", "/b"}, ExtraSyscalls: []string{"link"}, AllowUnixSockets: true}, true},
		"a syscall taken":     {config.Sandbox{DenyPaths: []string{"/a"}, AllowUnixSockets: true}, true},
		"a syscall given":     {config.Sandbox{DenyPaths: []string{"/a"}, ExtraSyscalls: []string{"link", "linkat"}, AllowUnixSockets: true}, false},
		"unix sockets taken":  {config.Sandbox{DenyPaths: []string{"/a"}, ExtraSyscalls: []string{"link"}}, true},
	} {
		if got := sandboxNarrows(base, tc.next); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
