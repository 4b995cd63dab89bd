package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSettingsEditReachesOpenSession: a deny rule the user adds to the project's or their own
// settings file while a session is open holds from a call made a moment later, through the
// decision and the run; taking it out again lifts it.
func TestSettingsEditReachesOpenSession(t *testing.T) {
	f := newTrustFixture(t, "sbsew")
	write := func(path, content string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Dir(path), int(f.u.UID), int(f.u.GID))
		os.Chown(path, int(f.u.UID), int(f.u.GID))
	}
	for _, tc := range []struct{ root, file string }{
		// Made while the session is open.
		{f.proj, filepath.Join(f.proj, ".sandboxd", "settings.json")},
		// The home as the session's root: one under /tmp (a test's) is out of the worker's
		// sight otherwise, behind the calls' own /tmp.
		{f.u.Home, filepath.Join(f.u.Home, ".config", "sandboxd", "settings.json")},
	} {
		write(filepath.Join(tc.root, "notes"), "keep\n")
		out, errOut, code := f.sbctl(t, "session", "new", "--cwd", tc.root, "--mode", "acceptEdits")
		if code != 0 {
			t.Fatalf("session new: %s", errOut)
		}
		id := strings.TrimSpace(out)
		decide := func() string {
			t.Helper()
			out, errOut, _ := f.sbctl(t, "decide", "--session", id, "Bash", `{"command":"rm notes"}`)
			return out + errOut
		}
		if got := decide(); !strings.Contains(got, "allow") {
			t.Fatalf("%s: before the edit: %s", tc.file, got)
		}
		write(tc.file, `{"permissions":{"deny":["Bash(rm *)"]}}`)
		time.Sleep(settingsRecheck + 100*time.Millisecond)
		if got := decide(); !strings.Contains(got, "deny") || !strings.Contains(got, "Bash(rm *)") {
			t.Errorf("%s: a deny added to it does not hold in the open session: %s", tc.file, got)
		}
		out, errOut, code = f.sbctl(t, "bash", "--session", id, "--", "rm notes")
		if code == 0 {
			t.Errorf("%s: rm ran after the deny was added: %s %s", tc.file, out, errOut)
		}
		f.unchanged(t, filepath.Join(tc.root, "notes"), "keep\n")
		write(tc.file, "{}\n")
		time.Sleep(settingsRecheck + 100*time.Millisecond)
		if got := decide(); !strings.Contains(got, "allow") {
			t.Errorf("%s: the deny taken out still holds: %s", tc.file, got)
		}
	}
}

// TestSettingsEditReachesSubAgent: a sub-agent rooted in a subdir holds its parent's rules; an
// edit of the parent's settings reaches it at its own next call, while the parent makes none,
// and the change is in the audit log.
func TestSettingsEditReachesSubAgent(t *testing.T) {
	f := newTrustFixture(t, "sbses")
	parent := f.session(t, "--mode", "acceptEdits")
	out, errOut, code := f.sbctl(t, "session", "new", "--parent", parent, "--cwd", filepath.Join(f.proj, "sub"), "--mode", "acceptEdits")
	if code != 0 {
		t.Fatalf("sub-agent: %s", errOut)
	}
	child := strings.TrimSpace(out)
	file := filepath.Join(f.proj, ".sandboxd", "settings.json")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte(`{"permissions":{"deny":["Bash(rm *)"]}}`), 0o644)
	os.Chown(filepath.Dir(file), int(f.u.UID), int(f.u.GID))
	os.Chown(file, int(f.u.UID), int(f.u.GID))
	time.Sleep(settingsRecheck + 100*time.Millisecond)
	if out, errOut, _ := f.sbctl(t, "decide", "--session", child, "Bash", `{"command":"rm x"}`); !strings.Contains(out+errOut, "Bash(rm *)") {
		t.Errorf("the parent's new deny does not hold in its sub-agent: %s%s", out, errOut)
	}
	if _, b := f.td.do(t, "GET", "/v1/audit/records?session="+parent, ""); !strings.Contains(string(b), "settings files changed") {
		t.Errorf("no record of the change: %s", b)
	}
}
