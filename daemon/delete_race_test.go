package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestNothingStartsInADeletedSession: a batch whose session is deleted while one of its calls
// runs starts nothing after it, neither a background task (which would run on with nobody
// able to see or stop it) nor a file worker, and leaves no file behind.
func TestNothingStartsInADeletedSession(t *testing.T) {
	td := startDaemon(t, "")
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-deleted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := td.newSession(t, `{"cwd":"`+dir+`","mode":"bypassPermissions"}`)
	type call struct {
		Tool  string         `json:"tool"`
		Input map[string]any `json:"input"`
	}
	batch, _ := json.Marshal(map[string]any{"calls": []call{
		// Not read-only: the calls run one after another.
		{"Bash", map[string]any{"command": "touch " + filepath.Join(dir, "first") + "; sleep 5"}},
		{"Bash", map[string]any{"command": "touch " + filepath.Join(dir, "task") + "; sleep 300", "run_in_background": true}},
		{"Write", map[string]any{"file_path": filepath.Join(dir, "written"), "content": "x"}},
	}})
	type reply struct {
		code int
		body []byte
	}
	got := make(chan reply, 1)
	go func() {
		code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/batch", string(batch))
		got <- reply{code, b}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "first")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch's first call did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, b := td.do(t, "DELETE", "/v1/sessions/"+s.ID, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, b)
	}
	r := <-got
	if r.code != http.StatusOK {
		t.Fatalf("batch: %d %s", r.code, r.body)
	}
	var br protocol.BatchResponse
	decodeInto(t, r.body, &br)
	if len(br.Results) != 3 {
		t.Fatalf("want 3 results, got %s", r.body)
	}
	for i, res := range br.Results[1:] {
		if !res.IsError || res.Error == nil || res.Error.Class != "not_found" {
			t.Errorf("call %d after the delete: want a not_found error, got %+v", i+2, res)
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, f := range []string{"task", "written"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s exists: a call ran in the deleted session", f)
		}
	}
}
