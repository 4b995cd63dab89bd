package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestHookDecidesWhereTheAgentLooks: a call the agent makes itself (no --confine, or any file
// tool) is decided on the paths its own process finds on the host, not in the sandbox's view
// of them. A link left in the real /tmp or /dev/shm to a denied file, a `..` after a symlink
// (the kernel takes it from where the link leads), /proc/self/root, and a whole-tree read
// (grep -r, rg, cp -r, Grep) of a dir that holds the denied one are each denied, in
// bypassPermissions, for Bash and the file tools alike; the same names, harmless, stay
// allowed, and a confined Bash call is still decided in the sandbox's view.
func TestHookDecidesWhereTheAgentLooks(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	u, rt := userHome(t, "sbhv")
	work := filepath.Join(u.Home, "work")
	secret := filepath.Join(u.Home, "secret")
	ownedDirs(t, u, work, secret)
	if err := os.WriteFile(filepath.Join(secret, "f"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(secret, "f"), int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	// The agent's own links, in the host's shared dirs and in its work dir.
	var links []string
	ln := func(target, name string) {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(name, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
		links = append(links, name)
	}
	t.Cleanup(func() {
		for _, l := range links {
			os.Remove(l)
		}
	})
	tmpLink := fmt.Sprintf("/tmp/sbhv-%d-f", os.Getpid())
	shmLink := fmt.Sprintf("/dev/shm/sbhv-%d-f", os.Getpid())
	tmpDir := fmt.Sprintf("/tmp/sbhv-%d-d", os.Getpid())
	ln(filepath.Join(secret, "f"), tmpLink)
	ln(filepath.Join(secret, "f"), shmLink)
	ln(secret, tmpDir)
	ln(secret, filepath.Join(work, "lnk"))
	ln(work, filepath.Join(work, "lnk2")) // a link that stays inside
	// Absolute: the test's home is not the one NSS gives the user, which ~ names.
	deny := []string{"--deny", "Read(/" + secret + "/**)"}
	decide := func(id, tool string, input map[string]any, flags ...string) hookAnswer {
		in := map[string]any{"session_id": id, "cwd": work, "hook_event_name": "PreToolUse",
			"permission_mode": "bypassPermissions", "tool_name": tool, "tool_input": input}
		return decodeHook(t, runHook(t, b, d.socket, u, rt, in, append(flags, deny...)...))
	}
	for i, command := range []string{
		"cat " + tmpLink,
		"cat " + shmLink,
		"cat " + tmpDir + "/f",
		"cat " + tmpDir + "/../secret/f",
		"cat lnk/../secret/f",
		"cd " + tmpDir + " && cat ../secret/f",
		"cat /proc/self/root" + secret + "/f",
		// A whole tree read meets every file below it, the denied ones too.
		"grep -r s3cret " + u.Home,
		"rg s3cret ..",
		"cp -r " + u.Home + " /var/tmp/x",
	} {
		if h := decide(fmt.Sprint("hv-b", i), "Bash", map[string]any{"command": command}).HookSpecificOutput; h.PermissionDecision != "deny" {
			t.Errorf("%s, run by the agent: %s (%s)", command, h.PermissionDecision, h.PermissionDecisionReason)
		}
	}
	// A deny on the file alone: the commands name its dir, and read the file below it.
	denyFile := func(id, command string) hookAnswer {
		in := map[string]any{"session_id": id, "cwd": work, "hook_event_name": "PreToolUse",
			"permission_mode": "bypassPermissions", "tool_name": "Bash", "tool_input": map[string]any{"command": command}}
		return decodeHook(t, runHook(t, b, d.socket, u, rt, in, "--deny", "Read(/"+secret+"/f)"))
	}
	for i, command := range []string{
		// diff reads DIR/FILE's base name without -r; git diff too, in the repository or not.
		"diff " + secret + " ./f",
		"git diff " + secret + " ./f",
		// A cd in a loop moves the commands before it on the next pass.
		"for i in 1 2; do cat f; cd " + secret + "; done",
		// zsh prints the file of a statement with no command; bash opens it.
		"cd " + secret + "; < f",
		// git grep without a path searches the working tree below the cwd.
		"cd " + secret + " && git grep --no-index -h s3cret",
	} {
		if h := denyFile(fmt.Sprint("hv-df", i), command).HookSpecificOutput; h.PermissionDecision != "deny" {
			t.Errorf("%s under a deny of its file, run by the agent: %s (%s)", command, h.PermissionDecision, h.PermissionDecisionReason)
		}
	}
	if h := denyFile("hv-df-ok", "cat "+secret+"/g").HookSpecificOutput; h.PermissionDecision != "allow" {
		t.Errorf("cat %s/g under a deny of f, run by the agent: %s (%s)", secret, h.PermissionDecision, h.PermissionDecisionReason)
	}
	for i, tc := range []struct{ tool, key, path string }{
		{"Read", "file_path", tmpLink},
		{"Read", "file_path", shmLink},
		{"Read", "file_path", filepath.Join(work, "lnk") + "/../secret/f"},
		{"Grep", "path", tmpDir},
		{"Edit", "file_path", tmpDir + "/f"},
		{"Grep", "path", u.Home},
	} {
		in := map[string]any{tc.key: tc.path}
		switch tc.tool {
		case "Grep":
			in["pattern"] = "s3cret"
		case "Edit":
			in["old_string"], in["new_string"] = "s3cret", "x"
		}
		if h := decide(fmt.Sprint("hv-f", i), tc.tool, in).HookSpecificOutput; h.PermissionDecision != "deny" {
			t.Errorf("%s %s, by the agent: %s (%s)", tc.tool, tc.path, h.PermissionDecision, h.PermissionDecisionReason)
		}
	}
	for i, command := range []string{"cat ../work/x", "cat lnk2/x", "ls /tmp", "cat /proc/cpuinfo", "grep -r x .", "cat " + u.Home} {
		if h := decide(fmt.Sprint("hv-ok", i), "Bash", map[string]any{"command": command}).HookSpecificOutput; h.PermissionDecision != "allow" {
			t.Errorf("%s, run by the agent: %s (%s)", command, h.PermissionDecision, h.PermissionDecisionReason)
		}
	}
	// A bare-name deny may match below any dir: a search the agent runs itself is refused, as
	// its own Grep is; confined, the sandbox hides the files.
	bare := func(id string, flags ...string) hookAnswer {
		in := map[string]any{"session_id": id, "cwd": work, "hook_event_name": "PreToolUse",
			"permission_mode": "bypassPermissions", "tool_name": "Bash", "tool_input": map[string]any{"command": "grep -r KEY ."}}
		return decodeHook(t, runHook(t, b, d.socket, u, rt, in, append(flags, "--deny", "Read(.env)")...))
	}
	if h := bare("hv-env").HookSpecificOutput; h.PermissionDecision != "deny" {
		t.Errorf("grep -r KEY . under Read(.env), run by the agent: %s (%s)", h.PermissionDecision, h.PermissionDecisionReason)
	}
	if h := bare("hv-envc", "--confine").HookSpecificOutput; h.PermissionDecision != "allow" {
		t.Errorf("grep -r KEY . under Read(.env), confined: %s (%s)", h.PermissionDecision, h.PermissionDecisionReason)
	}
	// Confined, /tmp is the call's own: the agent's link is not there, and the sandbox hides
	// the secret whatever the name.
	if h := decide("hv-c", "Bash", map[string]any{"command": "cat " + tmpLink}, "--confine").HookSpecificOutput; h.PermissionDecision != "allow" {
		t.Errorf("cat %s, confined: %s (%s)", tmpLink, h.PermissionDecision, h.PermissionDecisionReason)
	}
}
