package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestParentNarrowingBindsChildDirs: a parent session cannot drop a directory one of its
// sub-agents still has, so the child never writes where its parent no longer may.
func TestParentNarrowingBindsChildDirs(t *testing.T) {
	td := startDaemon(t, "")
	root, err := os.MkdirTemp("/var/tmp", "sandboxd-childdirs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	proj, extra := filepath.Join(root, "proj"), filepath.Join(root, "extra")
	for _, d := range []string{proj, extra} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	parent := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"additional_dirs":[%q],"mode":"acceptEdits"}`, proj, extra))
	child := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"additional_dirs":[%q],"parent_id":%q}`, proj, extra, parent.ID))

	code, b := td.do(t, "PATCH", "/v1/sessions/"+parent.ID, `{"additional_dirs":[]}`)
	if code != http.StatusConflict {
		t.Fatalf("parent dropping a directory its child has: %d %s, want 409", code, b)
	}
	// The child may still write there, as the parent may.
	if _, res := td.call(t, child.ID, "Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, filepath.Join(extra, "a"))); res.IsError {
		t.Fatalf("child write: %+v", res)
	}
	// Once the child is gone, the parent narrows.
	if code, b := td.do(t, "DELETE", "/v1/sessions/"+child.ID, ""); code != http.StatusNoContent {
		t.Fatalf("delete child: %d %s", code, b)
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+parent.ID, `{"additional_dirs":[]}`); code != http.StatusOK {
		t.Fatalf("narrow parent without children: %d %s", code, b)
	}
}
