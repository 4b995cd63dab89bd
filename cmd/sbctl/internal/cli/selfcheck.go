package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// selfCheck refuses to act for an agent (sbctl hook, sbctl mcp) when the agent's own programs
// could have put another sbctl in this one's place. The agent CLI runs these commands itself,
// outside any sandbox: a planted sbctl would answer allow to everything, or run anything. A
// variable so in-process tests of a binary in a build cache can do without it.
var selfCheck = func() error { return checkSelf(os.Args[0], os.Getuid()) }

// checkSelf: sbctl must be named by its absolute path, not found on $PATH, where a directory
// the agent's commands may write (a project's .venv/bin or node_modules/.bin, an activated
// environment) can hold another sbctl first; and no part of where it is may be uid's to
// change, as ~/go/bin/sbctl is in a session rooted at the home.
func checkSelf(argv0 string, uid int) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find sbctl's own path: %w", err)
	}
	if !strings.Contains(argv0, "/") {
		return fmt.Errorf("sbctl was started as %q, found on $PATH, where a directory the agent's commands may write (a project's .venv/bin, node_modules/.bin) can hold another sbctl, which would run outside any sandbox; name it by its absolute path in the agent's hook or MCP command: %s", argv0, self)
	}
	if uid == 0 {
		return nil
	}
	// The name it was started by too: a link of the user's to the installed sbctl
	// (~/bin/sbctl) is theirs to point elsewhere next time.
	named, err := filepath.Abs(argv0)
	if err != nil {
		return fmt.Errorf("find sbctl's path: %w", err)
	}
	paths := []string{self}
	if named != self {
		paths = append(paths, named)
	}
	for _, path := range paths {
		if p, ok := replaceable(path, uint32(uid)); ok {
			return fmt.Errorf("%s could be replaced by uid %d's own programs (%s is theirs, or writable by them), and so by a confined call of the agent's, which would then run outside any sandbox; install sbctl root-owned (make install) and name that one by its path", path, uid, p)
		}
	}
	return nil
}

// replaceable returns the first of path and the directories above it through which uid's
// programs could put another file at path: one uid owns (it may chmod it), a file it may
// write, or a directory it may write in, unless the directory is sticky and what lies below
// it on the way is not uid's.
func replaceable(path string, uid uint32) (string, bool) {
	var below *syscall.Stat_t
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return p, true // cannot tell: fail closed
		}
		switch {
		case st.Uid == uid:
			return p, true
		case below == nil && unix.Access(p, unix.W_OK) == nil:
			return p, true
		case below != nil && unix.Access(p, unix.W_OK|unix.X_OK) == nil && (st.Mode&syscall.S_ISVTX == 0 || below.Uid == uid):
			return p, true
		}
		if p == "/" {
			return "", false
		}
		below = &st
	}
}
