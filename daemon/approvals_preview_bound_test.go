package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestApprovalPreviewBounded: an ask's preview is built only within what its owner's
// approval queue can hold. A replace_all Edit of a 16 MB file asks in default mode; its
// preview would be refused by the queue, so it must not be built: the daemon reads, edits
// and diffs nothing of the file (before, it allocated over 20 times the file's size).
func TestApprovalPreviewBounded(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	f := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(f, []byte(strings.Repeat(strings.Repeat("a", 99)+"\n", 16<<20/100)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	if r := td.callRaw(t, s.ID, callBody("Read", fmt.Sprintf(`{"file_path":%q,"limit":3}`, f), "")); r.IsError {
		t.Fatalf("read: %+v", r)
	}
	edit := callBody("Edit", fmt.Sprintf(`{"file_path":%q,"old_string":"a","new_string":"b","replace_all":true}`, f), "")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := td.callRaw(t, s.ID, edit)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("asking for a 16 MB edit allocated %d MB in the daemon", got>>20)
	}
	if r.ApprovalID == "" {
		t.Fatalf("no approval: %+v", r)
	}
	// A small edit still gets its preview.
	small := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(small, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	td.callRaw(t, s.ID, callBody("Read", fmt.Sprintf(`{"file_path":%q}`, small), ""))
	r = td.callRaw(t, s.ID, callBody("Edit", fmt.Sprintf(`{"file_path":%q,"old_string":"two","new_string":"TWO"}`, small), ""))
	_, b := td.do(t, "GET", "/v1/approvals", "")
	if r.ApprovalID == "" || !strings.Contains(string(b), `-two\n+TWO\n`) {
		t.Fatalf("small edit's preview missing: %s", b)
	}
}
