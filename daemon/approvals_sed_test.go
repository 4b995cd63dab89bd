package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestApprovalSedPreview: an approval for `sed -i` carries the diff of the same sed run
// without -i, confined, on the current file; approving writes exactly that content (the
// command is not run again: a file changed since is refused, not re-edited); a shape with no
// preview (a backup suffix) still asks and runs as the command.
func TestApprovalSedPreview(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	f := filepath.Join(dir, "a.txt")
	orig := "one\ntwo\nthree\n"
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	sed := callBody("Bash", fmt.Sprintf(`{"command":"sed -i 's/two/TWO/' %s"}`, f), "")
	for _, changed := range []bool{false, true} {
		if err := os.WriteFile(f, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		r := td.callRaw(t, s.ID, sed)
		if r.ApprovalID == "" {
			t.Fatalf("no approval: %+v", r)
		}
		_, b := td.do(t, "GET", "/v1/approvals", "")
		var list protocol.ApprovalList
		decodeInto(t, b, &list)
		if len(list.Approvals) != 1 || list.Approvals[0].Preview == nil || list.Approvals[0].Preview.Path != f ||
			!strings.Contains(list.Approvals[0].Preview.Diff, "-two\n+TWO\n") {
			t.Fatalf("preview: %s", b)
		}
		if got, _ := os.ReadFile(f); string(got) != orig {
			t.Fatalf("the preview changed the file: %q", got)
		}
		if changed {
			if err := os.WriteFile(f, []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != 200 {
			t.Fatalf("answer: %d %s", code, b)
		}
		r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
		got, _ := os.ReadFile(f)
		if !changed {
			if r.IsError || string(got) != "one\nTWO\nthree\n" || r.Data["approved_preview"] != true {
				t.Fatalf("applied: %+v %q", r, got)
			}
			continue
		}
		if !r.IsError || r.Error == nil || r.Error.Class != "stale" || string(got) != "one\ntwo\nthree\nfour\n" {
			t.Fatalf("changed file: %+v %q", r, got)
		}
	}
	// A backup suffix has no preview: approved, it runs as the command.
	if err := os.WriteFile(f, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	r := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":"sed -i.bak 's/two/2/' %s"}`, f), ""))
	if r.ApprovalID == "" {
		t.Fatalf("no approval: %+v", r)
	}
	_, b := td.do(t, "GET", "/v1/approvals", "")
	var list protocol.ApprovalList
	decodeInto(t, b, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].Preview != nil {
		t.Fatalf("sed -i.bak: %s", b)
	}
	td.answer(t, r.ApprovalID, `{"answer":"allow"}`)
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if got, _ := os.ReadFile(f); r.IsError || string(got) != "one\n2\nthree\n" {
		t.Fatalf("sed -i.bak approved: %+v %q", r, got)
	}
}
