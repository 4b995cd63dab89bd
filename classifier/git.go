package classifier

import (
	"path"
	"strings"
)

// checkGit allows git only with global options that keep it in this
// repository with its own configuration, and only read-only subcommands.
// -c, --config-env and --exec-path can make any git command run a program
// (core.pager, core.fsmonitor, diff.external); -p forces the pager; -C,
// --git-dir and --work-tree point git at another repository, whose config
// (core.fsmonitor, ...) runs programs even for git status.
func checkGit(args []string, w *walker) string {
	if r := checkGitCmd(args, w); r != "" {
		return r
	}
	// Every read-only subcommand that walks history or diffs takes the
	// revision and diff options, --output=FILE among them (rev-list,
	// shortlog, blame, reflog, stash list, log, ...): check them all.
	return gitDiffOpts(args)
}

func checkGitCmd(args []string, w *walker) string {
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a := args[i]
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
			"--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects", "--no-lazy-fetch", "--no-advice":
		case "--version":
			return ""
		case "-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix":
			return "git_other_repo"
		case "-c", "--config-env":
			return "git_config_override"
		case "--exec-path":
			return "git_exec_path"
		case "-p", "--paginate":
			return "git_pager"
		default:
			if strings.HasPrefix(a, "-c") {
				return "git_config_override"
			}
			return "git_unknown_option"
		}
	}
	if i >= len(args) {
		return "git_no_subcommand"
	}
	sub, rest := args[i], args[i+1:]
	if r := gitVerifies(rest); r != "" {
		return r
	}
	switch sub {
	case "status", "rev-parse", "ls-files", "ls-tree", "show-ref", "for-each-ref", "merge-base",
		"name-rev", "rev-list", "count-objects", "check-ignore", "check-attr", "var",
		"cherry", "version", "shortlog", "show-branch":
		return ""
	case "describe":
		// --dirty and --broken refresh the index first, rewriting .git/index.
		if hasFlag(rest, "", "dirty", "broken") {
			return "git_index_write"
		}
		return ""
	case "diff", "log", "show", "diff-tree", "diff-files", "diff-index", "whatchanged", "range-diff":
		return gitDiffOpts(rest)
	case "blame", "annotate", "cat-file":
		if hasFlag(rest, "", "textconv", "filters") {
			return "git_textconv"
		}
		return ""
	case "grep":
		if hasFlag(rest, "O", "open-files-in-pager", "textconv", "ext-grep") {
			return "git_exec"
		}
		return ""
	case "branch":
		return gitListing(rest, []string{"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--show-current",
			"--color", "--no-color", "--column", "--no-column", "-i", "--ignore-case", "--abbrev", "--no-abbrev", "-q", "--quiet",
			"--omit-empty"})
	case "tag":
		return gitListing(rest, []string{"-n", "--color", "--no-color", "--column", "--no-column", "-i", "--ignore-case", "--omit-empty"})
	case "remote":
		switch {
		case len(rest) == 0, len(rest) == 1 && (rest[0] == "-v" || rest[0] == "--verbose"):
			return ""
		case rest[0] == "get-url":
			return ""
		}
		// git remote show/update contact the remote.
		return "git_write_subcommand"
	case "config":
		return gitConfig(rest)
	case "format-patch":
		return "git_write_subcommand"
	case "stash":
		if len(rest) > 0 && rest[0] == "list" {
			return ""
		}
		if len(rest) > 0 && rest[0] == "show" {
			return gitDiffOpts(rest[1:])
		}
		return "git_write_subcommand"
	case "worktree":
		if len(rest) > 0 && rest[0] == "list" {
			return ""
		}
		return "git_write_subcommand"
	case "reflog":
		for _, a := range rest {
			if strings.HasPrefix(a, "-") {
				continue
			}
			if a == "expire" || a == "delete" || a == "drop" {
				return "git_write_subcommand"
			}
			break
		}
		return ""
	}
	return "git_write_subcommand"
}

// gitVerifies refuses what has git verify a signature: --show-signature, and the %G
// placeholders and %(signature) atoms of its formats (log, show, rev-list, for-each-ref …).
// Verifying runs gpg or gpgsm on the commit's data, which any cloned repository chooses: it
// writes ~/.gnupg, starts agents that outlive the call, and gpgsm's dirmngr fetches the CRL
// at whatever URL the signing certificate names. Any word is looked at, so a pattern that
// merely holds %G asks too.
func gitVerifies(args []string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "--show-sig") || strings.Contains(a, "%G") || strings.Contains(a, "%(") && strings.Contains(a, "signature") {
			return "git_verify_signature"
		}
	}
	return ""
}

// gitDiffOpts refuses diff options that write a file or run a program.
func gitDiffOpts(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a[2:], "=")
		if name == "text" || name == "no-ext-diff" || name == "no-textconv" {
			continue
		}
		switch {
		case longIs(name, "output") && !strings.HasPrefix(name, "output-"):
			return "git_output"
		case longIs(name, "ext-diff"), longIs(name, "textconv"):
			return "git_exec"
		}
	}
	return ""
}

// gitListing allows git branch/tag only in list mode: no operands unless a
// flag puts it in list mode (--list, --contains, ...), and only known flags.
func gitListing(args []string, flags []string) string {
	listMode := false
	operands := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			operands++
			continue
		}
		name, _, has := strings.Cut(a, "=")
		switch name {
		case "-l", "--list":
			listMode = true
			continue
		case "--contains", "--no-contains", "--merged", "--no-merged", "--points-at":
			listMode = true
			continue
		case "--sort", "--format":
			if !has {
				i++
			}
			continue
		}
		known := false
		for _, f := range flags {
			if name == f || (f == "-n" && strings.HasPrefix(a, "-n")) || (f == "--abbrev" && strings.HasPrefix(a, "--abbrev")) {
				known = true
			}
		}
		if !known {
			return "git_write_subcommand"
		}
	}
	if operands > 0 && !listMode {
		return "git_write_subcommand"
	}
	return ""
}

// gitConfig allows only the pure read forms of git config: --get, --get-all,
// --get-regexp, --list (and the get/list subcommands of git 2.46+), with the
// options before the operands and the operand count of a read. git config
// parses options after operands too, so `git config a.b v --get`-style words
// are refused rather than guessed at: anything else may write.
func gitConfig(args []string) string {
	action := ""
	operands := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, has := strings.Cut(a, "=")
		switch {
		case operands == 0 && action == "" && (a == "get" || a == "list"):
			action = a
			continue
		case !strings.HasPrefix(a, "-"):
			operands++
			continue
		case operands > 0:
			// an option after an operand
			return "git_config_write"
		}
		switch name {
		case "--file", "-f", "--blob", "--type", "--default", "--value", "--url":
			if !has {
				i++
			}
		case "--get", "--get-all", "--get-regexp", "--list", "-l":
			if action != "" && action != "get" && action != "list" {
				return "git_config_write"
			}
			if action == "" {
				action = name
			}
		case "--global", "--system", "--local", "--worktree", "--show-origin",
			"--show-scope", "--includes", "--no-includes", "--null", "-z", "--name-only",
			"--bool", "--int", "--path", "--all", "--regexp", "--fixed-value", "--bool-or-int":
		default:
			return "git_config_write"
		}
	}
	switch action {
	case "":
		if operands == 1 {
			return "" // git config NAME prints its value
		}
	case "--list", "-l", "list":
		if operands == 0 {
			return ""
		}
	case "--get", "--get-all", "--get-regexp", "get":
		if operands == 1 || operands == 2 && action != "get" {
			return "" // name [value-pattern]
		}
	}
	return "git_config_write"
}

// inDirs reports whether the absolute, clean path p is in Cwd or a WorkDir.
func inDirs(p string, opts Options) bool {
	for _, d := range append([]string{opts.Cwd}, opts.WorkDirs...) {
		if d == "" {
			continue
		}
		d = path.Clean(d)
		if p == d || d == "/" || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
