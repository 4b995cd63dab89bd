package classifier

// Classification is what one Bash command line does, as far as static analysis can tell.
// Its JSON shape is the stable output of `sbctl classify --json`.
type Classification struct {
	// ReadOnly is true only if the text parsed and every simple command is read-only or neutral.
	ReadOnly bool `json:"read_only"`
	// Reason is a machine-readable reason (snake_case, e.g. "read_only", "parse_error",
	// "unknown_command", "write_redirect", "find_exec") for the overall verdict.
	Reason string `json:"reason"`
	// ParseError is the parser's message when the text did not parse; nil otherwise.
	ParseError *string `json:"parse_error"`
	// Subcommands are the simple commands in source order, including those nested in
	// substitutions, subshells, functions and control flow.
	Subcommands []Subcommand `json:"subcommands"`
	// Risks are auto-mode risk signals: destructive, network, exfiltration, privilege,
	// package_install, outside_workspace_write.
	Risks []string `json:"risks"`
}

// Subcommand is one simple command of a command line.
type Subcommand struct {
	// Text is the source text of the simple command (with its redirections).
	Text string `json:"text"`
	// Argv is the words when every word is static (literal or quoted literal); nil otherwise.
	Argv []string `json:"argv"`
	// ReadOnly and Reason classify this subcommand alone.
	ReadOnly bool   `json:"read_only"`
	Reason   string `json:"reason"`
	// Prefix is the argv used to match allow rules: wrappers (timeout, nice, ...) and
	// safe env assignments stripped. Nil when the command is not static: it then matches no allow rule.
	Prefix []string `json:"prefix"`
	// DenyPrefix is the argv used to match deny and ask rules: wrappers and every env
	// assignment stripped, so `X=1 rm -rf t` is caught by `Bash(rm *)`. When a word is not
	// static it holds the literal source words, so a deny rule errs toward matching.
	DenyPrefix []string `json:"deny_prefix"`
	// Redirects are the redirections of this command.
	Redirects []Redirect `json:"redirects,omitempty"`
	// ExactOnly is true for commands that only an exact rule may allow (watch, setsid, find -exec ...).
	ExactOnly bool `json:"exact_only,omitempty"`
}

// Redirect is one redirection of a simple command.
type Redirect struct {
	Op     string `json:"op"`     // ">", ">>", "<", "&>", ">&", "<<", "<<<", ...
	Target string `json:"target"` // the static target word; "" when not static
	Write  bool   `json:"write"`  // true when it writes to a file (not /dev/null and friends, not an fd dup)
}
