// Command sbctl is the sandboxd CLI: sessions, tool calls, decisions, the agents' hook and
// MCP server, audit and policy.
//
// It links only the protocol's client, so it starts in a few milliseconds: the agent hook and
// a confined Bash call start it on every tool call an agent makes. The commands that need the
// MCP SDK, the policy engine, the classifier or the audit verifier run in sbctl-full, which
// sbctl re-executes for them (Go runs every linked package's init at start, whichever command
// runs; 40 ms of it before the split).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
)

// fullName is the binary with every command; `make build` puts it beside sbctl.
const fullName = "sbctl-full"

func main() {
	// No signal handler here: sbctl dies of SIGINT and SIGTERM, as a shell expects of the
	// commands it runs, and the end of its connection makes the daemon cancel the call it was
	// in. A command with something to undo first catches them itself (cli.interruptible).
	os.Exit(cli.Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, execFull))
}

// execFull replaces this process with sbctl-full and the same arguments: beside this binary
// first (an install keeps the two together), then $PATH.
func execFull(e *cli.Env, name string, _ []string) error {
	path, err := findFull()
	if err != nil {
		return fmt.Errorf("`sbctl %s` runs in %s, which is not installed beside sbctl or on $PATH (make build builds both): %w", name, fullName, err)
	}
	if err := syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil // not reached: Exec does not return on success
}

func findFull() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), fullName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	// $PATH by hand: os/exec would add its init to every sbctl start for this one lookup.
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue // a relative $PATH entry is not a place to run a program from
		}
		p := filepath.Join(dir, fullName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
