package classifier

import (
	"path"
	"strings"
)

// checkGit allows git only with global options that keep it in this
// repository with its own configuration, and only read-only subcommands.
// -c, --config-env and --exec-path can make any git command run a program
// (core.pager, core.fsmonitor, diff.external); -p forces the pager.
func checkGit(args []string, w *walker) string {
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a := args[i]
		name, val, has := strings.Cut(a, "=")
		switch name {
		case "--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
			"--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects", "--no-lazy-fetch", "--no-advice":
		case "--version":
			return ""
		case "-C", "--git-dir", "--work-tree":
			if name == "-C" || !has {
				if i+1 >= len(args) {
					return "git_unknown_option"
				}
				i++
				val = args[i]
			}
			if !w.inside(val) {
				return "git_outside_repo"
			}
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
	switch sub {
	case "status", "rev-parse", "ls-files", "ls-tree", "show-ref", "for-each-ref", "merge-base",
		"name-rev", "rev-list", "describe", "count-objects", "check-ignore", "check-attr", "var",
		"cherry", "version", "shortlog", "show-branch":
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

// gitConfig allows reading configuration only.
func gitConfig(args []string) string {
	read := false
	operands := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, has := strings.Cut(a, "=")
		switch name {
		case "--file", "-f", "--blob", "--type", "--default":
			if !has {
				i++
			}
		case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color", "--get-colorbool":
			read = true
		case "--global", "--system", "--local", "--worktree", "--show-origin",
			"--show-scope", "--includes", "--no-includes", "--null", "-z", "--name-only",
			"--bool", "--int", "--path":
		case "get", "list":
			if operands == 0 {
				read = true
			}
			operands++
		default:
			if strings.HasPrefix(a, "-") {
				return "git_config_write"
			}
			operands++
		}
	}
	if read || operands == 1 {
		return ""
	}
	return "git_config_write"
}

// inside reports whether p (relative to the session cwd) stays in the
// session's directories. With no cwd known, only relative paths that do not
// climb out with .. are inside.
func (w *walker) inside(p string) bool {
	if p == "" {
		return false
	}
	if !path.IsAbs(p) {
		if w.opts.Cwd == "" {
			c := path.Clean(p)
			return c != ".." && !strings.HasPrefix(c, "../")
		}
		p = path.Join(w.opts.Cwd, p)
	}
	return inDirs(path.Clean(p), w.opts)
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
