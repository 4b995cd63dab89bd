package offline

import (
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

// AuditVerify runs `sbctl audit verify --dir D | --file F...` on a copy of the log, offline:
// with the log's public key, or with --chain-only, which says that no signature was checked.
func AuditVerify(e *cli.Env, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return cli.UsageError("sbctl-full runs only `audit verify --dir|--file`; use sbctl for the rest")
	}
	fs := cli.NewFlags(e, "audit verify")
	var files cli.Multi
	fs.Var(&files, "file", "log file to verify offline, in chain order (repeatable)")
	dir := fs.String("dir", "", "log directory to verify offline (a copy works)")
	pubPath := fs.String("pubkey", "", "public key file: also check checkpoint signatures and the head")
	var oldPubs cli.Multi
	fs.Var(&oldPubs, "old-pubkey", "public key file of a signing key the log's audit.key_replaced replaced: check the checkpoints it signed (repeatable)")
	head := fs.String("head", "", "head.json to check --file against")
	chainOnly := fs.Bool("chain-only", false, "check the hash chain alone, no signature: a chain recomputed after an edit passes it")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case len(files) == 0 && *dir == "":
		return cli.UsageError("audit verify offline needs --dir or --file")
	case *pubPath == "" && !*chainOnly:
		// Anyone who can edit the files can recompute every hash after the edit: without
		// the signatures an intact chain shows nothing, so it is not offered as a verdict.
		return cli.UsageError("audit verify offline needs the log's public key: --pubkey FILE (sbctl audit pubkey prints it; " +
			"on the daemon's host it is <state>/audit-key/audit.pub). Without it only the hash chain can be checked, " +
			"which a log rewritten and re-hashed after an edit passes; --chain-only checks that alone")
	case *pubPath != "" && *chainOnly:
		return cli.UsageError("--chain-only checks no signature: give it or --pubkey, not both")
	case len(oldPubs) > 0 && *pubPath == "":
		return cli.UsageError("--old-pubkey needs --pubkey, the key that signs the log now")
	}
	var opt audit.VerifyOptions
	if *pubPath != "" {
		var err error
		if opt.PublicKey, err = audit.LoadPublicKey(*pubPath); err != nil {
			return fmt.Errorf("public key: %w", err)
		}
	}
	for _, p := range oldPubs {
		k, err := audit.LoadPublicKey(p)
		if err != nil {
			return fmt.Errorf("old public key: %w", err)
		}
		opt.PreviousKeys = append(opt.PreviousKeys, k)
	}
	var rep *audit.VerifyReport
	var verr error
	if *dir != "" {
		rep, verr = audit.VerifyDirOptions(*dir, opt)
	} else {
		opt.Head = *head
		rep, verr = audit.Verify(files, opt)
	}
	return cli.PrintVerify(e, rep, verr)
}
