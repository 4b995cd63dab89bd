package classifier

// Classification is what one Bash command line does, as far as static analysis can tell.
// Its JSON shape is the stable output of `sbctl classify --json`.
type Classification struct {
	// ReadOnly is true only if the text parsed and every simple command is read-only or neutral.
	ReadOnly bool `json:"read_only"`
	// Reason is a machine-readable reason (snake_case, e.g. "read_only", "parse_error",
	// "unknown_command", "write_redirect", "find_exec") for the overall verdict.
	Reason string `json:"reason"`
	// LineReason, when set, is why the line as a whole is not read-only whatever its
	// commands are ("arithmetic_eval", "cd_git", a construct the classifier does not follow,
	// "empty_command"): a mode that accepts some commands that are not read-only (acceptEdits'
	// file commands) must not accept a line that has one.
	LineReason string `json:"line_reason,omitempty"`
	// ParseError is the parser's message when the text did not parse, or why it was not
	// classified (too long, too deeply nested); nil otherwise.
	ParseError *string `json:"parse_error"`
	// Subcommands are the simple commands in source order, including those nested in
	// substitutions, subshells, functions and control flow.
	Subcommands []Subcommand `json:"subcommands"`
	// Risks are auto-mode risk signals: destructive, network, exfiltration, privilege,
	// package_install, outside_workspace_write.
	Risks []string `json:"risks"`
	// Paths are the files and directories recognised commands read or write (arguments of
	// cat, cp, rm, sed -i, tee, ..., every file redirection, cd targets), absolute and cleaned
	// against Options.Cwd (~ against Options.Home), symlinks not resolved: the daemon resolves
	// them as the caller. Each path appears once per access and command. After a static cd,
	// later relative paths are listed joined both to the cd target and to the directory before
	// it (the cd may fail), so a check over all of them errs toward matching.
	Paths []PathUse `json:"paths,omitempty"`
	// PathsIncomplete is true when some path of a recognised command or redirection could
	// not be known statically (a non-static or glob word where a path goes, a relative path
	// after a non-static cd, ~user) or a nested script ran after a cd. Paths then lists only
	// what was seen. Commands the classifier does not recognise add no paths and do not set
	// it, their files being the sandbox's to confine, unless the command runs outside any
	// sandbox (Options.Unconfined: see PathUse.Mention).
	PathsIncomplete bool `json:"paths_incomplete,omitempty"`
	// PathsUnbounded is true when some path left out (a write redirection's target aside: see
	// RedirectsIncomplete) may lie anywhere: a name built at run
	// time ($VAR, $(…), ~user, ~+), one after a cd the line cannot follow, names read from
	// input (xargs). A glob relative to a directory the line names (`cat *.go`) leaves the
	// list incomplete but bounded: what it matches is under that directory.
	PathsUnbounded bool `json:"paths_unbounded,omitempty"`
	// Globs are the glob words that leave Paths incomplete but bounded, each an absolute
	// pattern per directory it is taken against (`cat up/*` in /w: /w/up/*): what they match
	// is under that directory by name, but a symbolic link there may lead anywhere, so the
	// daemon expands them as the caller (globwalk.Outside).
	Globs []string `json:"globs,omitempty"`
	// RedirectsIncomplete is true when some file a write redirection opens is known only at
	// run time (a target built by expansion, ~user, a relative target after a cd the line
	// cannot follow, a nested script's after a cd): Paths lacks it, so no rule about paths
	// can vouch for that write.
	RedirectsIncomplete bool `json:"redirects_incomplete,omitempty"`
	// GitObjectsUnseen is true when a git command prints what a repository holds for paths
	// the line does not show (-C, --git-dir, --work-tree, names on stdin, pathspec magic or a
	// wildcard): a committed file's content is out of the mounts' reach, so any Read rule may
	// be one it meets.
	GitObjectsUnseen bool `json:"git_objects_unseen,omitempty"`

	// symlinks: the line (or a script it runs) makes symbolic links, whose commands put
	// linkUses of Paths; the rest may go through them (linkedAway).
	symlinks bool
	linkUses int
}

// Size is about the bytes c holds: its strings with their headers and its structures, for a
// holder that bounds what it keeps (an approval waiting with the call). A 60 KB command of
// 30 000 words holds about 1.5 MB parsed.
func (c *Classification) Size() int {
	n := 0
	strs := func(ss []string) {
		for _, s := range ss {
			n += len(s) + 16
		}
	}
	for _, s := range c.Subcommands {
		n += len(s.Text) + 256
		strs(s.Argv)
		strs(s.Prefix)
		strs(s.DenyPrefix)
		strs(s.DenyShapes)
		n += 16 * len(s.DenyGlobs)
		if e := s.DenyExpanded; e != nil {
			strs(e.Words)
			strs(e.Shapes)
			n += 16 * len(e.Globs)
		}
		for _, r := range s.Redirects {
			n += len(r.Target) + len(r.tilde) + len(r.body) + 64
		}
	}
	for _, p := range c.Paths {
		n += len(p.Path) + len(p.Raw) + len(p.Cmd) + len(p.TreeOf) + 128
	}
	strs(c.Risks)
	strs(c.Globs)
	return n
}

// PathUse is one path a command line reads or writes.
type PathUse struct {
	Path string `json:"path"` // absolute and cleaned, symlinks not resolved
	// Raw is the path as the program gets it, made absolute but not cleaned, when that is
	// not Path: the kernel takes a `..` after a symlink from where the link leads, not from
	// the link's dir, which a decision for a command run outside any sandbox must follow.
	Raw    string `json:"raw,omitempty"`
	Access string `json:"access"` // "read" or "write" (a write may read too)
	Cmd    string `json:"cmd"`    // the command (base name) or "redirect"
	// Tree says a directory there is read whole, everything below it (grep -r, rg, diff -r,
	// cp -r's sources): a deny below it is met by a program that runs outside any sandbox.
	Tree bool `json:"tree,omitempty"`
	// Mention says a word of a command no path table describes names it, in a command run
	// outside any sandbox (Options.Unconfined): awk, tar or a script's argument may read it,
	// write it, or, for a directory, read what it holds.
	Mention bool `json:"mention,omitempty"`
	// Alternative says the read happens here or at another of the line's alternative paths,
	// which only the program knows (git takes HEAD:PATH from the repository's top, which may be
	// any dir above the cwd): it meets the rules as a read, but alone it is no read outside
	// the session's dirs.
	Alternative bool `json:"alternative,omitempty"`
	// Worktree says the write is of the whole git worktree the directory lies in (git checkout
	// BRANCH, reset --hard, pull), whose top may be above it.
	Worktree bool `json:"worktree,omitempty"`
	// TreeOf, on a write, names the source (absolute and cleaned) whose copy or move lands at
	// the path: when that source is a directory, the write is of everything below the path
	// (mv new .github/workflows puts new's files there), as Tree says.
	TreeOf string `json:"tree_of,omitempty"`
	// Unpacked, on a whole-tree write, says it puts there what comes from elsewhere (an
	// archive, a patch, a repository's objects) in place of what is there, moving or copying
	// none of it: an Edit rule below holds it, a Read rule has nothing it could show.
	Unpacked bool `json:"unpacked,omitempty"`
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
	// DenyGlobs, when any word of DenyPrefix is expanded by the shell, says for each what it
	// may become (denyglob.go): deny and ask rules take it for that, not for its text.
	DenyGlobs []GlobKind `json:"deny_globs,omitempty"`
	// DenyShapes holds, where DenyGlobs is GlobOne, the word's shape; "" elsewhere.
	DenyShapes []string `json:"deny_shapes,omitempty"`
	// DenyExpanded is DenyPrefix with its brace expansions done (`git {push,} x` is git push
	// x): deny and ask rules meet it too.
	DenyExpanded *DenyWords `json:"deny_expanded,omitempty"`
	// Redirects are the redirections of this command.
	Redirects []Redirect `json:"redirects,omitempty"`
	// ExactOnly is true for commands that only an exact rule may allow (watch, setsid, find -exec ...).
	ExactOnly bool `json:"exact_only,omitempty"`
	// Opaque is true when what this command runs is known only at run time: a command word
	// built by expansion ($X, $(...)), a shell fed a script the classifier cannot read (a
	// file, a pipe from a program, bash script.sh, eval "$X"), source/. FILE. Deny and ask
	// rules cannot see through it, so the policy treats it as matching every one of them.
	Opaque bool `json:"opaque,omitempty"`
	// RedirectOnly is true for a command that is read-only but for its redirections that
	// write files (`echo x > out.txt`): those writes are the command's edits, Paths lists
	// each (or RedirectsIncomplete says one is unknown).
	RedirectOnly bool `json:"redirect_only,omitempty"`
	// Nested is true for a command of a literal script another command runs: bash -c
	// 'STRING', eval 'STRING', a here-string or literal pipe into a shell, find -exec,
	// watch, setsid. It follows the command that runs it. Deny and ask rules and risk
	// signals see it; allow rules judge the outer command, which is never read-only.
	Nested bool `json:"nested,omitempty"`
	// Tail marks a nested command that is one tail of the words of a program no table
	// describes (it may be a runner: heaptrack rm x): a command line the program may run, not
	// one it is known to run.
	Tail bool `json:"tail,omitempty"`
}

// Redirect is one redirection of a simple command.
type Redirect struct {
	Op     string `json:"op"`     // ">", ">>", "<", "&>", ">&", "<<", "<<<", ...
	Target string `json:"target"` // the static target word; "" when not static
	Write  bool   `json:"write"`  // true when it writes to a file (not /dev/null and friends, not an fd dup)
	// tilde is the static target when it starts with ~ (Target is then ""), for Paths.
	tilde string
	// procSubst: the target is a process substitution, a pipe (`< <(ls)`).
	procSubst bool
	// body is a here-document's or here-string's source text: the script an interpreter
	// reads on stdin (`python3 - <<EOF`), where Mentions look for paths.
	body string
	// mayBeNet: the target is known only at run time and may expand to /dev/tcp/... or
	// /dev/udp/..., which bash opens as a connection.
	mayBeNet bool
}
