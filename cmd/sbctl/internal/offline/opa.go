package offline

import (
	"errors"

	opacmd "github.com/open-policy-agent/opa/cmd"
	"github.com/spf13/cobra"

	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
	"github.com/sandboxd/sandboxd/policy"
)

// OPA runs `sbctl opa ARGS...`: OPA's own command line (check, test, eval, fmt, ...), of the
// OPA release the daemon links, with the sandboxd.* builtins registered as the daemon registers
// them. Rego that calls them (the embedded policy, an admin's custom modules) checks, tests and
// evaluates here as it does in the daemon; a stock opa needs policy/capabilities.json for check
// and cannot evaluate them at all.
func OPA(e *cli.Env, args []string) error {
	policy.RegisterBuiltins()
	root := opacmd.RootCommand
	// Help and usage say "sbctl opa check", not "opa check" (a stock opa's) nor "sbctl check".
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "sbctl opa"
	root.SetArgs(args)
	root.SetIn(e.Stdin)
	root.SetOut(e.Stdout)
	root.SetErr(e.Stderr)
	err := root.ExecuteContext(e.Ctx)
	if err == nil {
		return nil
	}
	// OPA's commands print their own errors (cobra the usage ones), so only the code is left,
	// the one a stock opa exits with: its own where it gives one, else 1.
	var ee *opacmd.ExitError
	if errors.As(err, &ee) {
		return &cli.ExitError{Code: ee.Exit}
	}
	return &cli.ExitError{Code: 1}
}
