package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/policy"
)

func cmdPolicy(e *env, args []string) error {
	if len(args) == 0 {
		return usageError("policy needs a subcommand: eval, show, test")
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "eval":
		return policyEval(e, rest)
	case "show":
		return policyShow(e, rest)
	case "test":
		return policyTest(e, rest)
	default:
		return usageError(fmt.Sprintf("unknown policy subcommand %q: want eval, show, test", sub))
	}
}

// policyEval decides one call in a short-lived session with the given rules and prints the
// decision; --explain adds the steps the decision chain went through.
func policyEval(e *env, args []string) error {
	fs := newFlags(e, "policy eval")
	tc := &toolCall{}
	tc.flags(fs)
	explain := fs.Bool("explain", false, "print the decision chain's steps")
	fs.Var(&tc.sf.allow, "allow", "allow rule (repeatable)")
	fs.Var(&tc.sf.deny, "deny", "deny rule (repeatable)")
	fs.Var(&tc.sf.ask, "ask", "ask rule (repeatable)")
	fs.Var(&tc.sf.allow, "rule", "allow rule (alias of --allow, repeatable)")
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return usageError("usage: sbctl policy eval [--explain] [--mode M] [--allow R]... [--deny R]... [--ask R]... TOOL 'JSON'")
	}
	return decideAndPrint(e, tc, args[0], json.RawMessage(args[1]), *explain)
}

// policyShow prints a session's effective rules with their sources.
func policyShow(e *env, args []string) error {
	fs := newFlags(e, "policy show")
	tc := &toolCall{}
	tc.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return tc.withSession(e, func(id, _ string) error {
		var rl api.RuleList
		if err := e.client().do(e.ctx, http.MethodGet, "/v1/sessions/"+id+"/rules", nil, &rl); err != nil {
			return err
		}
		if e.json {
			return printJSON(e.stdout, rl)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BEHAVIOR\tRULE\tSOURCE\tORIGIN")
		for _, r := range rl.Rules {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Behavior, r.Rule, r.Source, r.Origin)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		eff := rl.Effective
		fmt.Fprintf(e.stdout, "\ndefault mode: %s\n", eff.DefaultMode)
		if len(eff.AdditionalDirectories) > 0 {
			fmt.Fprintf(e.stdout, "additional directories: %s\n", strings.Join(eff.AdditionalDirectories, ", "))
		}
		if len(eff.Files) > 0 {
			fmt.Fprintf(e.stdout, "settings files: %s\n", strings.Join(eff.Files, ", "))
		}
		for _, w := range eff.Warnings {
			fmt.Fprintf(e.stdout, "warning: %s\n", w)
		}
		return nil
	})
}

// policyTest runs the embedded Rego tests and the admin's custom ones, offline.
func policyTest(e *env, args []string) error {
	fs := newFlags(e, "policy test")
	dir := fs.String("dir", config.DefaultPolicyDir, "custom policy directory (*.rego with *_test.rego beside them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	report, ok, err := policy.RunTests(e.ctx, *dir)
	if err != nil {
		return err
	}
	fmt.Fprint(e.stdout, report)
	if !ok {
		return &exitError{code: 1}
	}
	return nil
}
