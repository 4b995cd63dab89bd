package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// lockedBuffer collects a streaming command's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReloadEndsAdminStreams: an admin's open streams (approvals --watch, audit tail -f) stop
// showing other users' calls once a reload takes the admin group away; before it, they show
// them.
func TestReloadEndsAdminStreams(t *testing.T) {
	alice := testutil.CreateUser(t, "sbrva")
	bob := testutil.CreateUser(t, "sbrvb")
	td := startDaemon(t, "admin_group: "+bob.Name+"\n")
	sid := sessionAs(t, td, alice, `,"mode":"default"`)
	ask := func(marker string) string {
		t.Helper()
		code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls",
			callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, alice.Home+"/"+marker), ""), "")
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != http.StatusOK || behavior(res) != permission.Ask || res.ApprovalID == "" {
			t.Fatalf("want an ask: %d %s", code, b)
		}
		return res.ApprovalID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream := func(path string) (*exec.Cmd, *lockedBuffer) {
		cmd := exec.CommandContext(ctx, "curl", "-sS", "-N", "--unix-socket", td.socket, "http://sandboxd"+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: bob.UID, Gid: bob.GID}}
		out := &lockedBuffer{}
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	approvals, watched := stream("/v1/approvals/stream")
	audits, followed := stream("/v1/audit/records?follow=1&tail=0")
	time.Sleep(300 * time.Millisecond)

	before := ask("before-reload")
	waitFor(t, func() bool {
		return strings.Contains(watched.String(), before) && strings.Contains(followed.String(), "before-reload")
	})

	cfg, err := os.ReadFile(td.d.opts.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(td.d.opts.ConfigPath, []byte(strings.Replace(string(cfg), "admin_group: "+bob.Name, "admin_group: root", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	after := ask("after-reload")
	// The audit stream ends, saying why; the approvals stream goes on with bob's own only.
	if err := audits.Wait(); err != nil {
		t.Errorf("audit follow: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	_ = approvals.Wait()
	if strings.Contains(watched.String(), after) {
		t.Errorf("the approvals stream showed another user's call after the admin group was taken away: %s", watched.String())
	}
	if strings.Contains(followed.String(), "after-reload") || !strings.Contains(followed.String(), "no longer an admin") {
		t.Errorf("the audit stream after the admin group was taken away: %s", followed.String())
	}
}

// TestAuditFollowFreesItsScan: following the audit log reads the newest file again to catch up
// (a scan, which holds the user's one scan slot), then only what is appended: a query of the
// same user's while the follow goes on is served.
func TestAuditFollowFreesItsScan(t *testing.T) {
	alice := testutil.CreateUser(t, "sbafs")
	td := startDaemon(t, "")
	sessionAs(t, td, alice, `,"mode":"default"`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", "-sS", "-N", "--unix-socket", td.socket, "http://sandboxd/v1/audit/records?follow=1&tail=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: alice.UID, Gid: alice.GID}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b := curlAs(t, td, alice, "GET", "/v1/audit/records?tail=1", "", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a query while following: %d %s, want it served once the follow caught up", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
