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

// execFull replaces this process with sbctl-full and the same arguments, the one installed
// beside this binary. Not one found on $PATH: an agent's hook and MCP server run sbctl with
// the agent's PATH, where a project's node_modules/.bin may come first, and what they run
// runs outside any sandbox.
func execFull(e *cli.Env, name string, _ []string) error {
	path, err := findFull()
	if err != nil {
		return fmt.Errorf("`sbctl %s` runs in %s, which is not installed beside this sbctl (make build and make install put both in one dir): %w", name, fullName, err)
	}
	if err := syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil // not reached: Exec does not return on success
}

func findFull() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), fullName)
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}
