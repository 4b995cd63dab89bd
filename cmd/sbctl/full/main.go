// Command sbctl-full is sbctl with every command linked in: the client's, and those that need
// the MCP SDK, the policy engine, OPA's command line, the classifier or the audit verifier.
// sbctl runs it for those (see cmd/sbctl/main.go), so the client's own start pays for none of
// them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/mcpserver"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/offline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, heavy)
	stop()
	os.Exit(code)
}

func heavy(e *cli.Env, name string, args []string) error {
	switch name {
	case "classify":
		return offline.Classify(e, args)
	case "policy":
		return offline.Policy(e, args)
	case "audit":
		return offline.Audit(e, args)
	case "mcp":
		return mcpserver.Cmd(e, args)
	case "opa":
		return offline.OPA(e, args)
	}
	return cli.UsageError("unknown command " + name)
}
