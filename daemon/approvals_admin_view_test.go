package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestAdminSeesNoPreviewContent: an admin who is not root sees another user's approvals, but
// not the lines of the file the daemon read as its owner for the preview, neither in the list
// nor in the stream; the owner sees the whole diff.
func TestAdminSeesNoPreviewContent(t *testing.T) {
	alice := testutil.CreateUser(t, "sbava")
	bob := testutil.CreateUser(t, "sbavb")
	td := startDaemon(t, "admin_group: "+bob.Name+"\n")
	const secret = "alice-private-line-7f3a"
	target := filepath.Join(alice.Home, "private.txt")
	if err := os.WriteFile(target, []byte("one\n"+secret+"\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(target, int(alice.UID), int(alice.GID)); err != nil {
		t.Fatal(err)
	}
	sid := sessionAs(t, td, alice, `,"mode":"default"`)
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls", callBody("Read", fmt.Sprintf(`{"file_path":%q}`, target), ""), ""); code != 200 {
		t.Fatalf("read: %d %s", code, b)
	}

	// Bob's stream is open before the ask, so the approval reaches it as an event.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	stream := exec.CommandContext(ctx, "curl", "-sS", "-N", "--unix-socket", td.socket, "http://sandboxd/v1/approvals/stream")
	stream.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: bob.UID, Gid: bob.GID}}
	var streamed strings.Builder
	stream.Stdout = &streamed
	if err := stream.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls", callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"replaced\n"}`, target), ""), "")
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != 200 || behavior(res) != permission.Ask || res.ApprovalID == "" {
		t.Fatalf("want an ask: %d %s", code, b)
	}
	_, b = curlAs(t, td, alice, "GET", "/v1/approvals", "", "")
	if !strings.Contains(string(b), secret) {
		t.Fatalf("the owner's approval lacks the diff: %s", b)
	}
	code, b = curlAs(t, td, bob, "GET", "/v1/approvals", "", "")
	var list protocol.ApprovalList
	decodeInto(t, b, &list)
	if code != http.StatusOK || len(list.Approvals) != 1 || list.Approvals[0].Preview == nil || list.Approvals[0].Preview.SHA256 == "" {
		t.Fatalf("the admin's list: %d %s", code, b)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the admin's list shows the owner's file: %s", b)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	_ = stream.Wait()
	if !strings.Contains(streamed.String(), res.ApprovalID) {
		t.Fatalf("the admin's stream: %s", streamed.String())
	}
	if strings.Contains(streamed.String(), secret) {
		t.Errorf("the admin's stream shows the owner's file: %s", streamed.String())
	}
}

// TestAdminSeesTasksRedacted: an admin who is not root lists another user's background tasks
// with their commands as the audit log shows them, secrets redacted; the owner sees them whole.
func TestAdminSeesTasksRedacted(t *testing.T) {
	alice := testutil.CreateUser(t, "sbatka")
	bob := testutil.CreateUser(t, "sbatkb")
	td := startDaemon(t, "admin_group: "+bob.Name+"\n")
	const secret = "hunter2-very-secret-61c0"
	sid := sessionAs(t, td, alice, `,"mode":"bypassPermissions"`)
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", fmt.Sprintf(`{"command":"DB_PASSWORD=%s sleep 30","run_in_background":true}`, secret), ""), ""); code != 200 {
		t.Fatalf("background task: %d %s", code, b)
	}
	if code, b := curlAs(t, td, alice, "GET", "/v1/sessions/"+sid+"/tasks", "", ""); code != 200 || !strings.Contains(string(b), secret) {
		t.Errorf("the owner's task list: %d %s", code, b)
	}
	code, b := curlAs(t, td, bob, "GET", "/v1/sessions/"+sid+"/tasks", "", "")
	if code != 200 || strings.Contains(string(b), secret) || !strings.Contains(string(b), "REDACTED") {
		t.Errorf("an admin's view of another user's tasks: %d %s", code, b)
	}
}
