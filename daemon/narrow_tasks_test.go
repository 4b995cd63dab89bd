package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestNarrowingStopsTasks: a background command runs with what its session gave when it
// started, so a change that takes something away (a mode that runs less unasked, plan mode
// entered by a tool call, a deny or ask rule added) stops it, and its sub-agents' too; a
// change that only widens leaves it running.
func TestNarrowingStopsTasks(t *testing.T) {
	u := testutil.CreateUser(t, "sbnar")
	td := startDaemon(t, "")
	sleeping := func() int { return len(sleepersOf(u.UID)) }
	background := func(sid string) {
		t.Helper()
		input, _ := json.Marshal(map[string]any{"command": "sleep 300", "run_in_background": true})
		code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", string(input), ""), "")
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != http.StatusOK || res.IsError {
			t.Fatalf("background task: %d %s", code, b)
		}
	}
	patch := func(sid, body string) {
		t.Helper()
		if code, b := curlAs(t, td, u, "PATCH", "/v1/sessions/"+sid, body, ""); code != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", body, code, b)
		}
	}
	stays := func(n int, what string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		if got := sleeping(); got != n {
			t.Fatalf("%s: %d background commands running, want %d", what, got, n)
		}
	}

	parent := sessionAs(t, td, u, `,"mode":"acceptEdits"`)
	child := sessionAs(t, td, u, fmt.Sprintf(`,"parent_id":%q,"mode":"default"`, parent))
	background(parent)
	background(child)
	waitFor(t, func() bool { return sleeping() == 2 })
	patch(parent, `{"mode":"bypassPermissions"}`)
	patch(parent, `{"rules":{"allow":["Bash(make *)"]}}`)
	stays(2, "after widening")
	patch(parent, `{"mode":"default"}`)
	waitFor(t, func() bool { return sleeping() == 0 })

	s := sessionAs(t, td, u, `,"mode":"default"`)
	background(s)
	waitFor(t, func() bool { return sleeping() == 1 })
	if code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+s+"/calls", callBody("EnterPlanMode", `{}`, ""), ""); code != http.StatusOK {
		t.Fatalf("EnterPlanMode: %d %s", code, b)
	}
	waitFor(t, func() bool { return sleeping() == 0 })

	s = sessionAs(t, td, u, `,"mode":"default"`)
	background(s)
	waitFor(t, func() bool { return sleeping() == 1 })
	patch(s, `{"rules":{"deny":["Read(./secrets/**)"]}}`)
	waitFor(t, func() bool { return sleeping() == 0 })
	// A foreground command is stopped too, and its caller told why; so is one in a session
	// that is deleted.
	for _, end := range []string{"PATCH", "DELETE"} {
		s = sessionAs(t, td, u, `,"mode":"acceptEdits"`)
		input, _ := json.Marshal(map[string]any{"command": "sleep 300", "timeout": 600000})
		done := make(chan string, 1)
		go func() {
			_, b := curlAs(t, td, u, "POST", "/v1/sessions/"+s+"/calls", callBody("Bash", string(input), ""), "")
			done <- string(b)
		}()
		waitFor(t, func() bool { return sleeping() == 1 })
		if end == "PATCH" {
			patch(s, `{"mode":"default"}`)
		} else if code, b := curlAs(t, td, u, "DELETE", "/v1/sessions/"+s, "", ""); code != http.StatusOK && code != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", code, b)
		}
		select {
		case b := <-done:
			if want := map[string]string{"PATCH": executor.KilledNarrowed, "DELETE": "session_deleted"}[end]; !strings.Contains(b, want) {
				t.Errorf("a foreground command stopped by %s: %s, want it to name %s", end, b, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a foreground command ran on after %s", end)
		}
		waitFor(t, func() bool { return sleeping() == 0 })
	}
	// A reload whose rules take something away (the user's settings gained a deny) stops
	// what the session runs; one that changes nothing does not.
	s = sessionAs(t, td, u, `,"mode":"default"`)
	background(s)
	waitFor(t, func() bool { return sleeping() == 1 })
	td.d.core.reloadRules()
	stays(1, "after a reload that changed nothing")
	settings := filepath.Join(u.Home, ".config", "sandboxd", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(`{"permissions":{"deny":["Bash(curl *)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", u.UID, u.GID), filepath.Join(u.Home, ".config")).Run()
	td.d.core.reloadRules()
	waitFor(t, func() bool { return sleeping() == 0 })
	// Each says why it ended.
	waitFor(t, func() bool {
		n := 0
		for _, r := range auditRecords(t, td) {
			if r.Kind == audit.KindTaskEnd && r.Detail["killed_by"] == executor.KilledNarrowed {
				n++
			}
		}
		return n == 5
	})
}
