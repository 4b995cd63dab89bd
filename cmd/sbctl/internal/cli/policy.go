package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

func cmdPolicy(e *Env, args []string) error {
	sub, rest, err := subcommand(e, args, "usage: sbctl policy eval | show | test   (sbctl policy SUB -h: its flags)")
	if err != nil {
		return err
	}
	switch sub {
	case "eval":
		return policyEval(e, rest)
	case "show":
		return policyShow(e, rest)
	case "test":
		// The Rego tests run in-process with OPA, which only sbctl-full links.
		return e.Heavy(e, "policy", args)
	default:
		return UsageError(fmt.Sprintf("unknown policy subcommand %q: want eval, show, test", sub))
	}
}

// policyEval decides one call in a short-lived session with the given rules and prints the
// decision; --explain adds the steps the decision chain went through.
func policyEval(e *Env, args []string) error {
	fs := NewFlags(e, "policy eval")
	tc := &toolCall{}
	tc.flags(fs)
	explain := fs.Bool("explain", false, "print the decision chain's steps")
	tc.shellFlag(fs)
	fs.Var(&tc.sf.allow, "allow", "allow rule (repeatable)")
	fs.Var(&tc.sf.deny, "deny", "deny rule (repeatable)")
	fs.Var(&tc.sf.ask, "ask", "ask rule (repeatable)")
	fs.Var(&tc.sf.allow, "rule", "allow rule (alias of --allow, repeatable)")
	args, err := ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return UsageError("usage: sbctl policy eval [--explain] [--shell S] [--mode M] [--allow R]... [--deny R]... [--ask R]... TOOL 'JSON'")
	}
	return decideAndPrint(e, tc, args[0], json.RawMessage(args[1]), *explain)
}

// policyShow prints a session's effective rules with their sources.
func policyShow(e *Env, args []string) error {
	fs := NewFlags(e, "policy show")
	tc := &toolCall{}
	tc.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return tc.withSession(e, func(id, _ string) error {
		var raw json.RawMessage
		if err := e.Client().Do(e.Ctx, client.MethodGet, "/v1/sessions/"+id+"/rules", nil, &raw); err != nil {
			return err
		}
		if e.JSON {
			// As the daemon sent it: the client decodes only the fields it prints.
			return PrintJSON(e.Stdout, raw)
		}
		var rl protocol.RuleList
		if err := json.Unmarshal(raw, &rl); err != nil {
			return fmt.Errorf("decode rules: %w", err)
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BEHAVIOR\tRULE\tSOURCE\tORIGIN")
		for _, r := range rl.Rules {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", Visible(r.Behavior), Visible(r.Rule), Visible(r.Source), Visible(r.Origin))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		eff := rl.Effective
		fmt.Fprintf(e.Stdout, "\ndefault mode: %s\n", eff.DefaultMode)
		if len(eff.AdditionalDirectories) > 0 {
			fmt.Fprintf(e.Stdout, "additional directories: %s\n", Visible(strings.Join(eff.AdditionalDirectories, ", ")))
		}
		if len(eff.Files) > 0 {
			fmt.Fprintf(e.Stdout, "settings files: %s\n", Visible(strings.Join(eff.Files, ", ")))
		}
		for _, w := range eff.Warnings {
			fmt.Fprintf(e.Stdout, "warning: %s\n", Visible(w))
		}
		return nil
	})
}
