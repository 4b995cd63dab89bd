package offline

import (
	"crypto/ed25519"
	"fmt"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/policy"
)

// Policy runs `sbctl policy test`: the embedded Rego tests and the admin's custom ones,
// in-process. The daemon's subcommands (eval, show) are the client's.
func Policy(e *cli.Env, args []string) error {
	if len(args) == 0 || args[0] != "test" {
		return cli.UsageError("sbctl-full runs only `policy test`; use sbctl for the rest")
	}
	fs := cli.NewFlags(e, "policy test")
	dir := fs.String("dir", config.DefaultPolicyDir, "custom policy directory (*.rego with *_test.rego beside them)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	report, ok, err := policy.RunTests(e.Ctx, *dir)
	if err != nil {
		return fmt.Errorf("run policy tests: %w", err)
	}
	fmt.Fprint(e.Stdout, report)
	if !ok {
		return &cli.ExitError{Code: 1}
	}
	return nil
}

// AuditVerify runs `sbctl audit verify --dir D | --file F...` on a copy of the log, offline.
func AuditVerify(e *cli.Env, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return cli.UsageError("sbctl-full runs only `audit verify --dir|--file`; use sbctl for the rest")
	}
	fs := cli.NewFlags(e, "audit verify")
	var files cli.Multi
	fs.Var(&files, "file", "log file to verify offline, in chain order (repeatable)")
	dir := fs.String("dir", "", "log directory to verify offline (a copy works)")
	pubPath := fs.String("pubkey", "", "public key file: also check checkpoint signatures and the head")
	head := fs.String("head", "", "head.json to check --file against")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(files) == 0 && *dir == "" {
		return cli.UsageError("audit verify offline needs --dir or --file")
	}
	var pub ed25519.PublicKey
	if *pubPath != "" {
		var err error
		if pub, err = audit.LoadPublicKey(*pubPath); err != nil {
			return fmt.Errorf("public key: %w", err)
		}
	}
	var rep *audit.VerifyReport
	var verr error
	if *dir != "" {
		rep, verr = audit.VerifyDir(*dir, pub)
	} else {
		rep, verr = audit.Verify(files, audit.VerifyOptions{PublicKey: pub, Head: *head})
	}
	return cli.PrintVerify(e, rep, verr)
}
