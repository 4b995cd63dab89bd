package classifier

import (
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Deny and ask rules must hold whatever runs the denied command: a wrapper (stripped by
// DenyPrefix), a shell given the command as a string (bash -c, eval, a here-string or a
// literal pipe into sh), or a program that runs its arguments (find -exec, watch, setsid).
// A literal script is parsed like the outer line and its commands become Nested
// subcommands; what only run time knows (a command word built by expansion, a script file,
// a shell reading a program's output) makes the command Opaque, which the policy treats as
// matching every deny and ask rule.

// maxNestDepth bounds how deep scripts inside scripts are parsed; deeper is opaque.
const maxNestDepth = 4

// shellNames are the programs that run a script given with -c, as a file operand, or on
// stdin.
var shellNames = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "zsh": true, "dash": true, "ash": true, "ksh": true,
	"mksh": true, "pdksh": true, "posh": true, "yash": true, "hush": true, "fish": true,
	"lksh": true, "oksh": true, "loksh": true,
	"csh": true, "tcsh": true,
}

// isShell reports whether name, a command's base name, is a shell's: one of shellNames, its
// restricted r-prefixed variant (rzsh) or a versioned one (zsh5, bash-5.2, ksh93).
func isShell(name string) bool {
	n := strings.TrimRight(strings.TrimSuffix(name, "-static"), "0123456789.-_")
	return shellNames[name] || shellNames[n] || shellNames[strings.TrimPrefix(n, "r")]
}

// zshSetsOption reports whether zsh's set is given an option beyond -e, -u, -x and -v (and
// their + forms), which leave how the line is read as it is.
func zshSetsOption(args []word) bool {
	for _, a := range args {
		if !a.static {
			return true
		}
		if a.val == "--" || a.val == "-" {
			return false
		}
		if len(a.val) > 1 && (a.val[0] == '-' || a.val[0] == '+') && strings.Trim(a.val[1:], "euxv") != "" {
			return true
		}
	}
	return false
}

// nestedOf finds what the simple command sb (statement s) runs beyond itself. It looks past
// the wrappers deny rules see through (DenyPrefix), so `timeout 5 bash -c X` is bash -c X.
func (w *walker) nestedOf(sb *sub, s *syntax.Stmt) {
	defer func() {
		if sb.opaque && !w.decodedScript {
			w.decodedScript = w.pipeIn != nil && (w.decodes(w.pipeIn) || w.transformsText(w.pipeIn)) || w.decodes(s)
		}
	}()
	if len(sb.args) == 0 {
		// PAGER='curl x' alone changes an exported variable for the commands after it.
		w.commandVars(sb, nil)
		return
	}
	vals := w.vals[:0]
	for _, a := range sb.args {
		if a.static {
			vals = append(vals, a.val)
		} else {
			vals = append(vals, a.src)
		}
	}
	w.vals = vals
	k := len(vals) - len(stripWrappers(vals, true))
	if k >= len(sb.args) {
		return
	}
	ws := sb.args[k:]
	if first := ws[0]; !first.static || first.glob {
		// $X, $(...), ${cmd}, a glob: the command is known only at run time.
		sb.opaque = true
		return
	}
	if v := "/" + ws[0].val + "/"; strings.Contains(v, "/proc/") || strings.Contains(v, "/fd/") || strings.Contains(v, "/dev/std") {
		// /proc/self/exe is the running shell, /dev/fd/N, /dev/stdin and /proc/PID/fd/N a file
		// held open (/dev/fd/../exe is /proc/self/exe): no name says what runs.
		sb.opaque = true
		return
	}
	w.commandVars(sb, sb.args[:k])
	if sb.opaque {
		return
	}
	if name := runnerName(baseName(ws[0].val)); xargsIn(sb.args[:k]) && (isShell(name) || name == "eval" || runners[name] || name == "busybox" ||
		isWrapper(name) || name == "sudo" || name == "doas" ||
		xargsReplace(sb.args[:k]) != "" && strings.Contains(ws[0].val, xargsReplace(sb.args[:k]))) {
		// echo 'git push' | xargs sh -c: the script, or the command line, is what xargs reads
		// (or the command itself: xargs -I{} {} x).
		sb.opaque = true
		return
	}
	if name := baseName(ws[0].val); evalsNames[name] && slices.ContainsFunc(ws[1:], func(a word) bool { return !a.static || strings.ContainsRune(a.val, '[') }) {
		// unset 'a[$(id)]', IFS= read 'a[$(id)]', read "$1": a name with a subscript, or
		// one known only at run time, is evaluated.
		w.evalsText = true
	}
	switch name := runnerName(baseName(ws[0].val)); {
	case w.opts.argvTail && shellOnly[name]:
		// A tail is the words a program may exec: a builtin of the shell's is no program
		// (gh secret set X, npx eslint ., a message's r or fc), and runs nothing there.
	case name == "git":
		w.nestedGitConfig(sb, ws[1:])
		w.nestedGitCommands(sb, ws[1:])
	case isShell(name):
		w.nestedShell(sb, s, ws)
	case name == "busybox" || name == "toybox":
		if len(ws) > 1 && ws[1].static && isShell(ws[1].val) {
			w.nestedShell(sb, s, ws[1:])
		} else {
			w.nestedTails(sb, ws[1:]) // busybox rm: the applet is the command
		}
	case name == "eval":
		parts := make([]string, 0, len(ws)-1)
		args := ws[1:]
		if len(args) > 0 && args[0].static && args[0].val == "--" {
			args = args[1:] // eval -- CMD
		}
		for _, a := range args {
			if !a.static {
				sb.opaque = true
				return
			}
			parts = append(parts, a.val)
		}
		if len(parts) > 0 {
			// eval joins its arguments with spaces and runs the result.
			w.nestedScript(sb, strings.Join(parts, " "), w.opts.Shell)
		}
	case name == "source" || name == ".":
		// A file's script, which the line does not show; with none, nothing runs (npx
		// eslint . has the tail ".").
		sb.opaque = len(ws) > 1
	case name == "sed" || name == "gsed":
		// A script that runs programs (e, s///e) runs what the input holds, and a script file
		// (-f) or a script it cannot read may: as for `bash script.sh`, no word shows what runs.
		args := make([]string, 0, len(ws)-1)
		for _, a := range ws[1:] {
			if a.static {
				args = append(args, a.val)
			} else {
				args = append(args, a.src) // a file name, or a script read as unparsed
			}
		}
		if sedRunsPrograms(args) {
			sb.opaque = true
		}
	case name == "fc" || name == "r":
		// fc re-runs lines of the history (fc -s, zsh's r), which the line may have filled
		// (history -s 'curl x'; fc -s), or an editor's output (fc -e CMD, $FCEDIT): what runs
		// is no word of the line. fc -l only lists.
		if !slices.ContainsFunc(ws[1:], func(a word) bool {
			return a.static && strings.HasPrefix(a.val, "-") && strings.Contains(a.val, "l") && !strings.Contains(a.val, "e")
		}) {
			sb.opaque = true
		}
	case name == "hash" || name == "enable":
		// hash -p PATH NAME (bash) and hash NAME=PATH (zsh) make a later NAME run PATH, and
		// enable -f FILE loads a builtin from a shared object: `hash -p /usr/bin/curl ls; ls x`
		// runs curl under a name no deny rule on curl meets.
		for _, a := range ws[1:] {
			if !a.static || strings.HasPrefix(a.val, "-") && strings.ContainsAny(a.val, "pf") || name == "hash" && strings.Contains(a.val, "=") {
				sb.opaque = true
				return
			}
		}
	case name == "trap":
		// trap [-lp] [--] [ACTION SIGNAL...]: the action is a script the shell runs when the
		// signal comes (EXIT: at the end of the line), `trap 'curl x' EXIT` runs curl.
		ops := ws[1:]
		for len(ops) > 0 && ops[0].static && (ops[0].val == "-l" || ops[0].val == "-p" || ops[0].val == "--") {
			done := ops[0].val == "--"
			ops = ops[1:]
			if done {
				break
			}
		}
		for _, a := range ops {
			if !a.static {
				sb.opaque = true
				return
			}
		}
		if len(ops) > 1 {
			w.nestedScript(sb, ops[0].val, w.opts.Shell)
			sb.dirsUnknown = true // it runs later, after whatever cd comes next
		}
	case name == "mapfile" || name == "readarray" || name == "compgen" || name == "complete":
		// -C COMMAND is a script the shell runs: mapfile's callback for every -c lines read
		// (`mapfile -C 'curl x' -c 1 a < f`), compgen's to list completions.
		w.nestedOptionScripts(sb, ws[1:], 'C')
	case name == "alias":
		// alias NAME=VALUE: VALUE runs where NAME is a command later (zsh expands aliases in
		// any shell, bash with expand_aliases), a script of its own.
		for _, a := range ws[1:] {
			if !a.static {
				sb.opaque = true
				return
			}
			if n, v, ok := strings.Cut(a.val, "="); ok && n != "" {
				w.nestedScript(sb, v, w.opts.Shell)
				sb.dirsUnknown = true // it runs later, after whatever cd comes next
				// And NAME, a command no rule names, then runs it with the words after
				// it (alias g=git; g push): the line is opaque.
				sb.opaque = true
			}
		}
	case name == "find":
		w.nestedFind(sb, ws)
	case name == "watch":
		w.nestedArgv(sb, ws[1:], map[string]bool{"-n": true, "--interval": true, "-q": true, "--equexit": true}, ShellSh)
	case name == "setsid":
		w.nestedArgv(sb, ws[1:], nil, w.opts.Shell)
	case opaqueRunners[name] && w.opts.inTails && (commandLanguages[name].short != "" || name == "at" || name == "batch"):
		// In a tail of a program no table describes, which only may be a command, a word
		// that names an editor or a scheduler is mostly an operand (gh pr view 12, aws batch
		// list-jobs): opaque when commands are given to it by option (vi -c, gdb -ex).
		if _, ok := commandLanguages[name]; ok {
			w.nestedCommandOptions(sb, s, name, ws[1:])
		}
	case opaqueRunners[name]:
		sb.opaque = true
	case w.opts.Shell == ShellZsh && (name == "setopt" || name == "unsetopt" || name == "autoload" || name == "set" && zshSetsOption(ws[1:])):
		// An option set in the line changes how zsh reads the rest of it: promptsubst runs
		// $(…) in print -P's argument, globsubst and shwordsplit make data words. autoload
		// makes a function of a file on $fpath (fpath=(.); autoload f; f), as source would.
		sb.opaque = true
	case name == "make" || name == "gmake":
		for _, a := range ws[1:] {
			if !a.static || a.val == "-E" || strings.HasPrefix(a.val, "--eval") || strings.HasPrefix(a.val, "-E") {
				sb.opaque = true
				return
			}
		}
	case runners[name] || dynamicLoader(name):
		if name == "ssh" {
			w.sshCommands(sb, ws[1:])
		}
		if name == "strace" {
			// -o '!CMD' and -o '|CMD' pipe the trace into a command line.
			w.optionValues(sb, ws[1:], cmdOptSpec{short: "o", long: []string{"output"}}, func(v string) {
				if strings.HasPrefix(v, "!") || strings.HasPrefix(v, "|") {
					w.nestedScript(sb, v[1:], ShellSh)
				}
			})
		}
		if name == "script" && !scriptRunsCommand(ws[1:]) {
			// script with no -c runs $SHELL on what it reads (echo 'git push' | script -q F).
			sb.opaque = true
		}
		if name == "parallel" || name == "sem" {
			// Each job is its command with words read from input (stdin, :::, -a FILE) after
			// it, or put where {} stands: no word shows them (echo push | parallel git).
			sb.opaque = true
		}
		w.nestedTails(sb, ws[1:])
		if name == "zargs" {
			// zargs puts the words before -- after the command (zargs -- push origin -- git):
			// its tails show the command, not what it is given.
			sb.opaque = true
		}
	case (name == "npm" || name == "pnpm" || name == "yarn") && len(ws) > 1 && ws[1].static &&
		(ws[1].val == "exec" || ws[1].val == "x" || ws[1].val == "dlx"):
		// npm exec -c CMD, npm exec --call=CMD, pnpm dlx CMD: a runner's tails.
		w.nestedTails(sb, ws[2:])
	case name == "wget":
		if wgetRunsProgram(ws[1:]) {
			sb.opaque = true
		}
	case hasCommandOptions(name):
		if name == "scp" || name == "sftp" {
			w.sshCommands(sb, ws[1:])
		}
		w.nestedCommandOptions(sb, s, name, ws[1:])
	case isWrapper(name) && len(ws) > 1 && !(name == "command" && lookupOnly(ws[1:])):
		// Still a wrapper after unwrapping: an option the classifier does not know (env -S
		// splits a string into a command line), so what it runs is not known.
		sb.opaque = true
	case undescribed(name):
		w.argvTails(sb, ws[1:])
	}
}

// shellOnly are the shell's own builtins that run or change what runs: no program of
// theirs exists for a runner to exec.
var shellOnly = map[string]bool{"source": true, ".": true, "set": true, "setopt": true, "unsetopt": true,
	"autoload": true, "fc": true, "r": true, "hash": true, "enable": true, "trap": true, "alias": true,
	"eval": true, "emulate": true, "zpty": true, "zargs": true}

// runnerAliases are other names of runners and opaqueRunners, as distributions install them
// (fakeroot-sysv, valgrind.bin) or link them (slogin, vim.basic, gdbtui): the same program
// under a name no table lists would run its command unread.
var runnerAliases = map[string]string{
	"fakeroot-sysv": "fakeroot", "fakeroot-tcp": "fakeroot", "fakeroot-ng": "fakeroot",
	"valgrind.bin": "valgrind", "slogin": "ssh", "gdbtui": "gdb", "gdb-multiarch": "gdb",
	"vim.basic": "vim", "vim.tiny": "vim", "vim.nox": "vim", "vim.gtk": "vim", "vim.gtk3": "vim",
	"vim.athena": "vim", "vimx": "vim", "rvim": "vim", "rview": "vim", "gvim": "vim", "gview": "vim",
	"evim": "vim", "eview": "vim", "gvimdiff": "vim", "nvi": "vi", "elvis": "vi",
	"rust-gdb": "gdb", "rust-lldb": "lldb", "gdb-static": "gdb",
	// The editor alternatives may be any of them.
	"editor": "vim", "sensible-editor": "vim", "sensible-pager": "vim",
}

// runnerName is name, or the runner it is another name of.
func runnerName(name string) string {
	if n, ok := runnerAliases[name]; ok {
		return n
	}
	// A versioned name (lldb-15, gdb-13.2): the runner it is a version of.
	if base := strings.TrimRight(name, "0123456789."); base != name && strings.HasSuffix(base, "-") {
		if b := strings.TrimSuffix(base, "-"); runners[b] || opaqueRunners[b] || hasCommandOptions(b) {
			return b
		}
	}
	return name
}

// undescribed reports a program no table of the classifier describes: not a read-only
// command, not one whose operands it knows as paths (an interpreter aside, whose script's
// words are the script's), nor one a case of nestedCommand reads.
func undescribed(name string) bool {
	if _, ro := readOnly[name]; ro || isWrapper(name) || stateBuiltins[name] {
		return false
	}
	spec, ok := pathSpecs[name]
	return !ok || spec.kind == pkInterp
}

// argvTails reads an undescribed program as a runner it may be (fakeroot-sysv rm x,
// heaptrack rm x, msgexec -i f.po rm x): each tail of its words that starts with a literal
// word is a command line of those words, which deny and ask rules meet as they meet a
// runner's tails (sub.tails: they add no path the program's own words do not, and make
// nothing opaque but a shell or runner they start). An option's value (--command=rm, -xrm)
// and a KEY=VALUE's value start tails too. A word with blanks names no program: it is read as
// a line of shell when it holds a separator (hyperfine 'make; rm x') or is such a value
// (ProxyCommand=rm x), and passed over otherwise (--title "Drop the curl loop", -k "a or b").
// A tail that starts with a word known only at run time is no command line the rules can
// read, as a script's is not; past maxUndescribedWords, the words are not read.
func (w *walker) argvTails(sb *sub, ws []word) {
	if w.opts.argvTail {
		return // this line is itself a tail: the tails of its words are the outer line's too
	}
	ws = ws[:min(len(ws), maxUndescribedWords)]
	quote := func(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }
	quoted := make([]string, len(ws))
	for i, a := range ws {
		if a.static && !a.glob {
			quoted[i] = quote(a.val)
		} else {
			quoted[i] = a.src // read as the line reads it: an expansion stays one
		}
	}
	for i, a := range ws {
		if !a.static || a.glob || a.val == "" {
			continue
		}
		sb.tails = true
		heads, values := []string{a.val}, 0
		if strings.HasPrefix(a.val, "-") {
			// An option names no command, but may carry one: --command=rm, -xrm, -exec=rm.
			if _, v, ok := strings.Cut(a.val, "="); ok {
				heads = []string{v}
			} else {
				heads = attachedValues(a.val)
			}
			values = len(heads)
		} else if i > 0 && ws[i-1].static && !strings.Contains(ws[i-1].val, "=") && namesProgram(ws[i-1].val) {
			values = 1 // the next word of --post-command, --diff-program: a command line
		} else if k, v, ok := strings.Cut(a.val, "="); ok && k != "" && !strings.ContainsAny(k, " /") {
			heads, values = []string{v, a.val}, 1 // KEY=VALUE: the value may be a command line
		}
		for j, head := range heads {
			switch {
			case strings.Trim(head, "0123456789.,:") == "":
				// A number names no command: -j4, -count=1.
			case strings.ContainsAny(head, " \t\n"):
				if j < values || strings.ContainsAny(head, ";&|`\n") || strings.Contains(head, "$(") {
					w.shellWord(sb, head)
				}
			default:
				w.tailScript(sb, strings.Join(append([]string{quote(head)}, quoted[i+1:]...), " "), w.opts.Shell)
			}
			if sb.opaque {
				return
			}
		}
	}
}

// maxUndescribedWords bounds the words of an undescribed program read for tails.
const maxUndescribedWords = 128

// shellWord reads text, a word an undescribed program may hand to a shell, as a line of shell
// in any dialect, its commands' own words not read again for tails. One that does not parse
// may still run up to its fault (dash runs the lines before a syntax error, and reads some
// bash refuses): its pieces between separators are read as the commands of their words.
func (w *walker) shellWord(sb *sub, text string) {
	before := sb.opaque
	w.parseNested(sb, text, shellAny, true, true)
	if sb.opaque != before || w.parsedLast {
		return
	}
	for _, piece := range shellPieces.Split(text, -1) {
		fields := strings.Fields(piece)
		if len(fields) == 0 {
			continue
		}
		for k, f := range fields {
			fields[k] = "'" + strings.ReplaceAll(f, "'", `'\''`) + "'"
		}
		w.tailScript(sb, strings.Join(fields, " "), w.opts.Shell)
	}
}

// shellPieces are what separates commands in a line of shell.
var shellPieces = regexp.MustCompile("[;&|\n`()]+|\\$\\(")

// gitTransportKey reports a git config key that makes a remote run a command: protocol.*
// allows the ext:: transport (git's command line as a remote), and url.*.insteadOf or any
// value naming ext:: turns a remote into one (url.ext::sh -c CMD.insteadOf=zz; fetch zz).
// include.path and includeIf.*.path read a file of config, which may set any of these, or a
// core.fsmonitor, alias or pager; core.hooksPath and init.templateDir name where the hooks
// it runs come from.
func gitTransportKey(k, v string) bool {
	k = strings.ToLower(k)
	return strings.HasPrefix(k, "protocol.") || strings.HasPrefix(k, "url.") || strings.Contains(k, "ext::") ||
		strings.Contains(v, "ext::") || k == "include.path" || strings.HasPrefix(k, "includeif.") ||
		k == "core.hookspath" || k == "init.templatedir"
}

// commandVar reports a variable whose value programs run as a shell command: git's and
// ssh's helpers, pagers, editors, less's preprocessor. GIT_SSH_COMMAND='curl x' git fetch
// runs curl.
func commandVar(name string) bool {
	if strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
		return true // GIT_CONFIG_KEY_n=core.pager GIT_CONFIG_VALUE_n='curl x': git -c's value
	}
	switch name {
	case "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT":
		// Prompt strings are expanded, $(...) included: bash -x prints PS4 before each
		// command. Read as a script, PS4='$(curl x)' shows curl.
		return true
	case "SHELL":
		// script, screen, tmux, su and editors' :sh run the program $SHELL names:
		// SHELL=/usr/bin/curl script -qc --version /dev/null runs curl.
		return true
	case "PAGER", "MANPAGER", "EDITOR", "VISUAL", "FCEDIT", "GIT_SSH", "GIT_EXTERNAL_DIFF", "LESSOPEN",
		"LESSCLOSE", "BROWSER", "BASH_ENV", "ENV", "PROMPT_COMMAND",
		"GH_BROWSER", "HGEDITOR", "SVN_SSH", "P4EDITOR", "TERMINAL", "MAILER":
		return true
	}
	return strings.HasSuffix(name, "_COMMAND") || strings.HasSuffix(name, "_EDITOR") || strings.HasSuffix(name, "_PAGER") ||
		strings.HasSuffix(name, "ASKPASS")
}

// codeFileVar reports a variable that names a file whose code or config the programs after
// it run, which the line does not show: BASH_ENV and ENV (a file the next shell sources),
// ZDOTDIR (the dir of zsh's .zshenv), git's config file, repository, templates (their hooks)
// and exec path (their config runs programs, core.fsmonitor even for git status) and
// GIT_CONFIG_PARAMETERS (a quoted list of -c's), the dynamic loader's LD_PRELOAD,
// LD_LIBRARY_PATH and LD_AUDIT, and wget's config (use_askpass runs a program).
// Options and config taken from the environment are the same: tar's TAR_OPTIONS
// (--checkpoint-action=exec=), make's MAKEFLAGS (--eval), the config dirs git and others read
// (XDG_CONFIG_HOME/git/config's core.fsmonitor), and the interpreters' and runtimes' module
// paths and option variables, glibc's GCONV_PATH (iconv loads a module from it), OpenSSL's
// config (engines), vim's and ex's start-up commands, npm's config (script-shell), and the
// credential plugins kubectl's and the AWS CLI's config name.
// A script file given to a shell is opaque the same way (`bash script.sh`).
func codeFileVar(name string) bool {
	switch name {
	case "BASH_ENV", "ENV", "ZDOTDIR", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
		"GIT_CONFIG_PARAMETERS", "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR",
		"WGETRC", "SYSTEM_WGETRC",
		"TAR_OPTIONS", "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS",
		"CURL_HOME", "GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "SHELLOPTS", "BASHOPTS", "BASH_LOADABLES_PATH",
		"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PERL5LIB", "PERLLIB", "PERL5OPT",
		"RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
		"CLASSPATH", "GOFLAGS", "GOENV", "RUSTC_WRAPPER", "RUSTC", "CARGO_BUILD_RUSTC_WRAPPER", "LUA_INIT",
		"LUA_PATH", "LUA_CPATH", "TCLLIBPATH", "VIMINIT", "EXINIT", "MYVIMRC", "GVIMINIT", "LESS", "KUBECONFIG",
		"AWS_CONFIG_FILE", "PIP_CONFIG_FILE", "RSYNC_RSH", "CVS_RSH", "RSYNC_CONNECT_PROG", "GIO_MODULE_DIR",
		"GTK_PATH", "QT_PLUGIN_PATH", "SCREENRC", "EMACSLOADPATH", "ZIPOPT", "ZIP", "MANOPT", "PARALLEL",
		"PYTHONBREAKPOINT", "JAVA_OPTS", "MAVEN_OPTS", "GRADLE_OPTS", "SBT_OPTS", "ANT_OPTS", "HISTFILE":
		return true
	}
	// The dynamic loader's (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, …) and npm's config.
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(strings.ToLower(name), "npm_config_")
}

// commandTable reports a variable that says what a command name runs: zsh's functions,
// aliases and commands hashes (and their kin), bash's BASH_CMDS and BASH_ALIASES.
// `commands[ls]=/usr/bin/curl; ls x` runs curl under a name no deny rule on curl meets.
func commandTable(name string) bool {
	switch name {
	case "functions", "functions_source", "aliases", "galiases", "saliases", "commands", "builtins",
		"reswords", "BASH_CMDS", "BASH_ALIASES":
		return true
	}
	return strings.HasPrefix(name, "dis_")
}

// commandVars reads the value of each command variable the command is given, in its own
// assignments or env's (FOO=x git …, env FOO=x git …), as a script sh runs; a value known only
// at run time makes the command opaque.
func (w *walker) commandVars(sb *sub, wrappers []word) {
	check := func(name string, value word) {
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i] // a[k]=v sets a
		}
		if commandTable(name) || codeFileVar(name) || name == "GIT_ALLOW_PROTOCOL" ||
			strings.HasPrefix(name, "GIT_CONFIG_KEY_") && (!value.static || gitTransportKey(value.val, "")) ||
			strings.HasPrefix(name, "GIT_CONFIG_VALUE_") && value.static && strings.Contains(value.val, "ext::") {
			sb.opaque = true
			return
		}
		if !commandVar(name) {
			return
		}
		if !value.static {
			sb.opaque = true
			return
		}
		// LESSOPEN='|cmd %s' pipes; the others are run as written.
		w.nestedScript(sb, strings.TrimLeft(value.val, "|"), ShellSh)
	}
	for _, a := range sb.assigns {
		if _, v, ok := strings.Cut(a.word.val, "="); ok || !a.static {
			check(a.name, word{val: v, static: a.static})
		}
	}
	for _, a := range wrappers {
		if name, v, ok := strings.Cut(a.val, "="); ok && isIdent(strings.Split(name, "[")[0]) {
			check(name, word{val: v, static: a.static})
		} else if commandTable(a.val) || strings.HasPrefix(a.val, "BASH_FUNC_") {
			// typeset -A aliases: the table is filled after. env 'BASH_FUNC_ls%%=() {…}': a
			// bash started under it runs that body for ls.
			sb.opaque = true
		}
	}
}

// nestedGitConfig reads what git -c KEY=VALUE may run: an alias's !command, core.sshCommand,
// core.pager, core.editor, diff.external and the other keys whose value is a command git
// runs through sh. Every value is read as a script (one that is not a command names none a
// rule denies); --config-env takes its value from the environment, so it is opaque.
func (w *walker) nestedGitConfig(sb *sub, ws []word) {
	for i := 0; i < len(ws); i++ {
		a := ws[i]
		switch {
		case a.static && strings.HasPrefix(a.val, "--config-env"):
			sb.opaque = true
			return
		case a.static && (a.val == "-c" || a.val == "--config" || len(a.val) > 2 && strings.HasPrefix(a.val, "-c")):
			kv := strings.TrimPrefix(a.val, "-c") // -cKEY=VALUE, as git reads it too
			if kv == "" || a.val == "--config" {
				if i+1 >= len(ws) {
					return
				}
				i++
				if !ws[i].static {
					sb.opaque = true
					return
				}
				kv = ws[i].val
			}
			k, v, ok := strings.Cut(kv, "=")
			if gitTransportKey(k, v) {
				sb.opaque = true
			}
			if strings.HasPrefix(strings.ToLower(k), "alias.") {
				// An alias names the command it runs in its value, under a name no rule
				// names (git -c alias.p=push p): a git line setting one is opaque, and a
				// shell alias's (!cmd) is read besides.
				sb.opaque = true
			}
			if ok {
				w.nestedScript(sb, strings.TrimPrefix(v, "!"), ShellSh)
			}
		case a.static && strings.HasPrefix(a.val, "-"):
			// -C DIR, --git-dir=…, -p: git's own options before the subcommand.
			if a.val == "-C" || a.val == "--git-dir" || a.val == "--work-tree" || a.val == "--namespace" {
				i++
			}
		default:
			return // the subcommand: -c after it is the subcommand's own option
		}
	}
}

// evalsNames are the builtins whose operands are variable names, a subscript in which bash
// evaluates as arithmetic, command substitutions included.
// (printf's -v NAME is its own check's: its other operands are data.)
var evalsNames = map[string]bool{"read": true, "unset": true, "wait": true, "mapfile": true, "readarray": true,
	"getopts": true}

// runners run a command named in their arguments after operands and options of their own,
// each in its own shape (taskset MASK CMD, chrt -f 10 CMD, flock FILE -c CMD, strace -o F CMD,
// ssh HOST CMD, uv run CMD, script -qc CMD FILE). Which word starts the command is not
// parsed per program: every tail of the arguments is read as a command line, so a deny or
// ask rule meets the command wherever it starts (and, rarely, an operand that happens to
// spell a denied command). Interpreters given code (python -c, awk, make) are not here:
// what their code runs is not a command line.
var runners = map[string]bool{
	"flock": true, "ionice": true, "taskset": true, "chrt": true, "setarch": true, "linux32": true,
	"linux64": true, "prlimit": true, "numactl": true, "unbuffer": true, "chronic": true,
	"fakeroot": true, "fakechroot": true, "cpulimit": true, "dbus-run-session": true,
	"dbus-launch": true, "strace": true, "ltrace": true, "unshare": true, "nsenter": true,
	"chroot": true, "setpriv": true, "bwrap": true, "firejail": true, "systemd-run": true,
	"systemd-inhibit": true, "runuser": true, "su": true, "sg": true, "doas": true, "pkexec": true,
	"ssh": true, "sshpass": true, "parallel": true, "sem": true, "script": true, "entr": true,
	"xvfb-run": true, "faketime": true, "proxychains": true, "proxychains4": true,
	"torsocks": true, "catchsegv": true, "valgrind": true, "perf": true, "eatmydata": true,
	"nocache": true, "trickle": true, "chpst": true, "setuidgid": true, "softlimit": true,
	"envdir": true, "runcon": true, "tmux": true, "screen": true, "daemonize": true,
	"npx": true, "pnpx": true, "bunx": true, "uvx": true, "uv": true, "pipx": true,
	"poetry": true, "pipenv": true, "conda": true, "mise": true, "asdf": true, "direnv": true,
	"nix-shell": true, "devbox": true, "bundle": true, "dotenv": true, "cross-env": true,
	"env-cmd": true, "op": true, "doppler": true, "aws-vault": true,
	"logsave": true, "start-stop-daemon": true, "systemd-cat": true, "ssh-agent": true, "gpg-agent": true,
	"choom": true, "uclampset": true, "tsocks": true, "rlwrap": true, "mpirun": true,
	"mpiexec": true, "orterun": true, "run-one": true, "cgexec": true, "timelimit": true,
	"minijail0": true, "nsjail": true, "proot": true, "schroot": true, "flatpak-spawn": true,
	"distrobox-enter": true, "catatonit": true, "tini": true, "dumb-init": true,
	"dpkg-architecture": true, "zargs": true, "emulate": true,
	// setarch by the names of the architectures it is linked as (i386 curl x).
	"i386": true, "i486": true, "i586": true, "i686": true, "x86_64": true, "ia64": true,
	"aarch64": true, "arm64": true, "arm": true, "armv7l": true, "armv8l": true, "ppc": true,
	"ppc32": true, "ppc64": true, "ppc64le": true, "s390": true, "s390x": true, "sparc": true,
	"sparc32": true, "sparc64": true, "mips": true, "mips32": true, "mips64": true, "alpha": true,
	"parisc": true, "parisc32": true, "parisc64": true, "uname26": true, "loongarch64": true,
	"riscv64": true,
}

// opaqueRunners run a program no word of their line names as a command: run-parts the ones a
// dir listing finds, capsh its --shell or a shell given -c after `--`, newgrp the user's shell
// reading its stdin, make the recipes --eval gives on the command line.
var opaqueRunners = map[string]bool{"run-parts": true, "capsh": true, "newgrp": true,
	// And those that run commands they read: zpty a command string, the debuggers what their
	// stdin says (gdb --args rm x <<< run), at, batch and crontab a schedule read from stdin,
	// the editors a `!` command.
	"zpty": true, "gdb": true, "lldb": true, "cgdb": true, "at": true, "batch": true,
	"crontab": true, "ed": true, "ex": true, "vi": true, "vim": true, "nvim": true, "view": true,
	"vimdiff": true}

// dynamicLoader reports the dynamic linker run as a program (ld.so /usr/bin/curl, as
// /lib64/ld-linux-x86-64.so.2 or by any of its names): it loads and runs the program its
// arguments name.
func dynamicLoader(name string) bool {
	return strings.HasPrefix(name, "ld") && strings.Contains(name, ".so") &&
		(strings.HasPrefix(name, "ld.") || strings.HasPrefix(name, "ld-") || strings.HasPrefix(name, "ld64"))
}

// maxRunnerWords bounds where a runner's command may start: its own options come first, and
// a tail starting past them is the arguments of the command it runs (npx eslint and 40
// files). maxTotalRunnerWords bounds the words read at all; a longer line is opaque.
const (
	maxRunnerWords      = 32
	maxTotalRunnerWords = 512
)

// nestedTails reads every tail of a runner's arguments as a command line (see runners). A
// word known only at run time may be the command, so it makes the command opaque. Some
// runners hand their command to the user's shell (script -c, su -c, ssh), which may be zsh or
// dash: a tail either reads differently is opaque too.
func (w *walker) nestedTails(sb *sub, ws []word) {
	if len(ws) > maxTotalRunnerWords {
		sb.opaque = true
		return
	}
	for _, a := range ws {
		if !a.static {
			sb.opaque = true
			return
		}
	}
	for i := range ws[:min(len(ws), maxRunnerWords)] {
		parts := make([]string, 0, len(ws)-i)
		for _, a := range ws[i:] {
			parts = append(parts, a.val)
		}
		// A runner's tails are read as scripts (su -c "heaptrack rm x" hands one to a shell):
		// an undescribed program in the first has its own tails read (argvTails), which are
		// every later one's too.
		w.parseNested(sb, strings.Join(parts, " "), shellAny, i > 0, false)
		if sb.opaque {
			return
		}
		// The command attached to an option: script -qc'git push' F, su --command=CMD.
		for _, head := range attachedValues(ws[i].val) {
			parts[0] = head
			w.nestedScript(sb, strings.Join(parts, " "), shellAny)
			if sb.opaque {
				return
			}
		}
	}
}

// maxClusterLetters bounds the options of one -abcVALUE word read for an attached value.
const maxClusterLetters = 8

// attachedValues are the values an option word may carry attached: after the = of a long
// option, and after each letter of a short cluster (-qcCMD: cCMD, CMD, …).
func attachedValues(v string) []string {
	if strings.HasPrefix(v, "--") {
		if _, val, ok := strings.Cut(v, "="); ok {
			return []string{val}
		}
		return nil
	}
	var out []string
	for j := 2; len(v) > 2 && v[0] == '-' && j < len(v) && j <= maxClusterLetters+1; j++ {
		if c := v[j-1]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			break
		}
		out = append(out, v[j:])
	}
	return out
}

// scriptRunsCommand reports a script(1) line given a command (-c CMD, -qcCMD,
// --command[=]CMD) rather than left to run $SHELL on its input.
func scriptRunsCommand(ws []word) bool {
	for _, a := range ws {
		if !a.static {
			return true // read as tails, and opaque there
		}
		v := a.val
		if v == "--" {
			return false
		}
		if strings.HasPrefix(v, "--c") {
			return true
		}
		if len(v) > 1 && v[0] == '-' && v[1] != '-' {
			for _, c := range v[1:] {
				if c == 'c' {
					return true
				}
				if strings.ContainsRune("BIOTtmE", c) || !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
					break // the rest is this option's value (-Tcfile is -T cfile)
				}
			}
		}
	}
	return false
}

// xargsIn reports an xargs among a command's wrappers.
func xargsIn(wrappers []word) bool {
	return slices.ContainsFunc(wrappers, func(a word) bool { return a.static && baseName(a.val) == "xargs" })
}

// nestedShell handles sh/bash/...: -c STRING runs STRING, an operand is a script file
// (opaque), and otherwise the script is read from stdin.
func (w *walker) nestedShell(sb *sub, s *syntax.Stmt, ws []word) {
	shell := ShellOf(ws[0].val)
	if shell == "" {
		sb.opaque = true // ksh, fish, csh: a script the classifier cannot read for them
		return
	}
	cmdString, stdinFlag := false, false
	i := 1
	for ; i < len(ws); i++ {
		a := ws[i]
		if !a.static {
			sb.opaque = true // it may be -c, a script name or the script
			return
		}
		v := a.val
		if v == "--" || v == "-" {
			i++
			break
		}
		if strings.HasPrefix(v, "--") {
			if v == "--rcfile" || v == "--init-file" || v == "--interactive" {
				sb.opaque = true // a start-up script the policy cannot see runs first
				return
			}
			continue
		}
		if len(v) > 1 && (v[0] == '-' || v[0] == '+') {
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'i':
					if v[0] == '-' {
						sb.opaque = true // an interactive shell runs ~/.bashrc and PROMPT_COMMAND first
						return
					}
				case 'c':
					cmdString = true
				case 's':
					stdinFlag = true
				case 'o', 'O':
					i++ // takes an option name
				}
			}
			continue
		}
		break
	}
	var ops []word
	if i < len(ws) {
		ops = ws[i:]
	}
	switch {
	case cmdString:
		if len(ops) == 0 {
			return // bash: -c: option requires an argument
		}
		if !ops[0].static {
			sb.opaque = true
			return
		}
		w.nestedScript(sb, ops[0].val, shell)
	case len(ops) > 0 && !stdinFlag:
		sb.opaque = true // a script file the policy cannot see
	default:
		script, ok := w.stdinText(sb, s)
		if !ok {
			sb.opaque = true
			return
		}
		w.nestedScript(sb, script, shell)
	}
}

// stdinText is the text a command reads on stdin when the line spells it out: its own
// here-string or literal here-document, or the output of a literal echo/printf/cat on the
// left of a pipe. ok is false when stdin is anything else (a file, a program's output, the
// caller's stdin): the script is then unknown.
func (w *walker) stdinText(sb *sub, s *syntax.Stmt) (string, bool) {
	var own *syntax.Redirect
	for _, r := range s.Redirs {
		if stdinRedirect(r) {
			own = r
		}
	}
	if own != nil {
		return redirectText(w.src, own)
	}
	for _, r := range sb.redirs {
		if strings.HasPrefix(bareOp(r.Op), "<") {
			return "", false // inherited from a compound command: not followed
		}
	}
	if w.pipeIn == nil {
		return "", false
	}
	return w.literalOutput(w.pipeIn)
}

// stdinRedirect reports a redirection of fd 0.
func stdinRedirect(r *syntax.Redirect) bool {
	if r.N != nil && r.N.Value != "0" {
		return false
	}
	switch r.Op {
	case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return true
	}
	return false
}

// redirectText is the literal text a here-string or here-document feeds.
func redirectText(src string, r *syntax.Redirect) (string, bool) {
	switch r.Op {
	case syntax.WordHdoc:
		if r.Word == nil {
			return "", false
		}
		v := evalWord(src, r.Word)
		if !v.static {
			return "", false
		}
		return v.val + "\n", true
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc == nil {
			return "", true
		}
		quoted := false
		if r.Word != nil {
			for _, p := range r.Word.Parts {
				if _, ok := p.(*syntax.Lit); !ok {
					quoted = true
				}
			}
			if l := srcText(src, r.Word); strings.ContainsRune(l, '\\') {
				quoted = true
			}
		}
		var b strings.Builder
		for _, p := range r.Hdoc.Parts {
			l, ok := p.(*syntax.Lit)
			if !ok || !quoted && strings.ContainsAny(l.Value, "\\$`") {
				return "", false
			}
			b.WriteString(l.Value)
		}
		return b.String(), true
	}
	return "", false
}

// literalOutput is what a statement writes to stdout when the line spells it out: echo of
// static words (without -e), printf of one static format without conversions, cat of its
// own here-string or here-document.
func (w *walker) literalOutput(st *syntax.Stmt) (string, bool) {
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 || st.Background {
		return "", false
	}
	args := make([]string, 0, len(call.Args))
	for _, a := range call.Args {
		v := evalWord(w.src, a)
		if !v.static || v.glob {
			return "", false
		}
		args = append(args, v.val)
	}
	var stdin *syntax.Redirect
	for _, r := range st.Redirs {
		switch {
		case stdinRedirect(r):
			stdin = r
		case r.Op == syntax.DplOut && r.N != nil && r.N.Value == "2":
		default:
			return "", false // stdout may go elsewhere
		}
	}
	switch args[0] {
	case "echo":
		rest := args[1:]
		newline := "\n"
		for len(rest) > 0 && len(rest[0]) > 1 && rest[0][0] == '-' && strings.Trim(rest[0][1:], "neE") == "" {
			if strings.ContainsRune(rest[0], 'e') {
				return "", false // escapes decoded at run time
			}
			if strings.ContainsRune(rest[0], 'n') {
				newline = ""
			}
			rest = rest[1:]
		}
		return strings.Join(rest, " ") + newline, true
	case "printf":
		if len(args) != 2 || strings.ContainsRune(args[1], '%') {
			return "", false
		}
		f := args[1]
		f = strings.ReplaceAll(f, `\\`, "\x00")
		f = strings.ReplaceAll(f, `\n`, "\n")
		f = strings.ReplaceAll(f, `\t`, "\t")
		if strings.ContainsRune(f, '\\') {
			return "", false
		}
		return strings.ReplaceAll(f, "\x00", `\`), true
	case "cat":
		if len(args) == 1 && stdin != nil {
			return redirectText(w.src, stdin)
		}
	}
	return "", false
}

// nestedFind parses the commands of find's -exec, -execdir, -ok and -okdir actions, each
// up to its ; or +, from their source words (find runs them without a shell, so the words
// stay as they are).
func (w *walker) nestedFind(sb *sub, ws []word) {
	var b strings.Builder
	for i := 1; i < len(ws); i++ {
		a := ws[i]
		if !a.static {
			continue
		}
		switch a.val {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		var action []string
		for k := j; k < len(ws) && !(ws[k].static && (ws[k].val == ";" || ws[k].val == "+")); k++ {
			action = append(action, ws[k].val)
		}
		if prog := stripWrappers(action, true); len(prog) > 0 && strings.Contains(prog[0], "{}") {
			// -exec {} push ;, -exec env {""} push ;: the program is each file found.
			sb.opaque = true
			return
		}
		for j < len(ws) && !(ws[j].static && (ws[j].val == ";" || ws[j].val == "+")) {
			if j > i+1 {
				b.WriteByte(' ')
			}
			b.WriteString(ws[j].src)
			j++
		}
		b.WriteByte('\n')
		i = j
	}
	if b.Len() > 0 {
		elsewhere := slices.ContainsFunc(ws, func(a word) bool { return a.static && (a.val == "-execdir" || a.val == "-okdir") })
		w.inOtherDirs(elsewhere, func() { w.nestedScript(sb, b.String(), w.opts.Shell) })
	}
}

// inOtherDirs runs read with the line's cwd unknown when on: a command find -execdir runs in
// each found file's dir, git submodule foreach in each submodule's, so its relative paths
// are not the line's (`-execdir cat ../../.env ;`).
func (w *walker) inOtherDirs(on bool, read func()) {
	if !on {
		read()
		return
	}
	cwd := w.opts.Cwd
	w.opts.Cwd = ""
	read()
	w.opts.Cwd = cwd
}

// nestedArgv parses the command a program runs from its operands (watch, setsid), after
// its options; argOpts take a separate argument. watch runs the operands through sh -c
// joined by spaces, setsid execs them: joining static values covers the first and, for
// simple words, the second; a non-static word keeps its source (and makes it opaque if it
// is the command).
func (w *walker) nestedArgv(sb *sub, ws []word, argOpts map[string]bool, shell string) {
	i := 0
	for i < len(ws) && ws[i].static && strings.HasPrefix(ws[i].val, "-") {
		if ws[i].val == "--" {
			i++
			break
		}
		if argOpts[ws[i].val] {
			i++
		}
		i++
	}
	if i >= len(ws) {
		return
	}
	parts := make([]string, 0, len(ws)-i)
	for _, a := range ws[i:] {
		if a.static {
			parts = append(parts, a.val)
		} else {
			parts = append(parts, a.src)
		}
	}
	w.nestedScript(sb, strings.Join(parts, " "), shell)
}

// nestedScript parses script as a line of its own, read as shell reads it, and keeps its
// classification on sb. A script that does not parse, is read differently by its shell, or
// is nested too deep, is opaque.
func (w *walker) nestedScript(sb *sub, script, shell string) {
	w.parseNested(sb, script, shell, false, false)
}

// tailScript is nestedScript for one of the tails of a command's words (nestedTails,
// argvTails), every one of which is read: an undescribed program at its head needs no tails
// of its own.
func (w *walker) tailScript(sb *sub, script, shell string) {
	w.parseNested(sb, script, shell, true, false)
}

// parseNested is nestedScript; tail marks the script as one tail of the words (tailScript),
// and maybe as a word that may or may not be a line of shell, which is passed over when it
// does not parse.
func (w *walker) parseNested(sb *sub, script, shell string, tail, maybe bool) {
	if w.depth+1 >= maxNestDepth || len(script) > maxParseLen {
		sb.opaque = true
		return
	}
	opts := w.opts
	opts.Shell = shell
	opts.inTails = tail
	opts.argvTail = tail && !maybe
	c := parseDepth(script, opts, w.depth+1, w.left)
	w.parsedLast = c.ParseError == nil
	if c.ParseError != nil {
		sb.opaque = sb.opaque || !maybe
		return
	}
	if sb.nested == nil {
		sb.nested = c
		return
	}
	// A second script of the same command (find with two -exec actions is one script):
	// keep both.
	sb.nested.Subcommands = append(sb.nested.Subcommands, c.Subcommands...)
	sb.nested.Risks = mergeRisks(sb.nested.Risks, c.Risks)
	sb.nested.Paths = append(sb.nested.Paths, c.Paths...)
	sb.nested.Globs = append(sb.nested.Globs, c.Globs...)
	sb.nested.PathsIncomplete = sb.nested.PathsIncomplete || c.PathsIncomplete
	sb.nested.RedirectsIncomplete = sb.nested.RedirectsIncomplete || c.RedirectsIncomplete
}

// mergeRisks is the sorted union of two risk lists.
func mergeRisks(a, b []string) []string {
	var set riskSet
	for _, l := range [][]string{a, b} {
		for _, n := range l {
			for i, rn := range riskNames {
				if rn == n {
					set |= 1 << i
				}
			}
		}
	}
	return set.list()
}

// nestedOptionScripts reads as scripts the values of a short option, letter, that takes a
// command (`-C CMD`, `-CCMD`, or last in a bundle: `-tC CMD`). They run later in the line.
func (w *walker) nestedOptionScripts(sb *sub, ws []word, letter byte) {
	for i := 0; i < len(ws); i++ {
		a := ws[i]
		if !a.static {
			sb.opaque = true
			return
		}
		if len(a.val) < 2 || a.val[0] != '-' || a.val[1] == '-' {
			continue
		}
		j := strings.IndexByte(a.val, letter)
		if j < 0 {
			continue
		}
		script, ok := clusterValue(ws, &i, a.val[j+1:])
		if !ok {
			sb.opaque = true
			return
		}
		w.nestedScript(sb, script, w.opts.Shell)
		sb.dirsUnknown = true // it runs later, after whatever cd comes next
	}
}

// lookupOnly reports `command -v NAME` / `-V`: a lookup that runs nothing, which the
// deny-rule unwrapping leaves as command.
func lookupOnly(ws []word) bool {
	for _, a := range ws {
		if !a.static || a.val == "--" || !strings.HasPrefix(a.val, "-") {
			return false
		}
		if strings.ContainsAny(a.val, "vV") {
			return true
		}
	}
	return false
}

// decodes reports a decoder among the commands of n (a pipeline on the left of a pipe, or the
// substitutions of a statement): base64 -d, xxd -r, uudecode, openssl -d, a decompressor, or an
// echo -e or printf whose escapes or conversions make text no word shows. What a shell runs
// from one is a script the line carries in a form no check reads, as a hidden rm -rf would be.
func (w *walker) decodes(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && !found && len(c.Args) > 0 {
			args := make([]string, 0, len(c.Args))
			for _, a := range c.Args {
				args = append(args, evalWord(w.src, a).val)
			}
			found = decoder(baseName(args[0]), args[1:])
		}
		return !found
	})
	return found
}

// decompressors decode whatever they are given; the other decoders (decoder) only with a flag.
var decompressors = map[string]bool{"gunzip": true, "zcat": true, "gzcat": true, "bunzip2": true, "bzcat": true,
	"unxz": true, "xzcat": true, "lzcat": true, "unlzma": true, "unzstd": true, "zstdcat": true, "uudecode": true,
	"lz4cat": true, "unlz4": true}

func decoder(name string, args []string) bool {
	if decompressors[name] {
		return true
	}
	flag := func(short, long string) bool {
		return slices.ContainsFunc(args, func(a string) bool {
			// --deco is --decode: GNU takes any unambiguous start of a long option.
			return len(a) > 3 && long != "" && strings.HasPrefix(long, a) ||
				len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a[1:], short)
		})
	}
	if (name == "busybox" || name == "toybox") && len(args) > 0 {
		return decoder(baseName(args[0]), args[1:])
	}
	switch name {
	case "base64", "base32", "basenc":
		return flag("dD", "--decode")
	case "xxd":
		return flag("r", "-revert")
	case "openssl":
		return slices.Contains(args, "-d") || slices.Contains(args, "-base64") || slices.Contains(args, "base64")
	case "gzip", "bzip2", "xz", "lzma", "zstd", "lz4", "brotli":
		return flag("d", "--decompress")
	case "echo":
		return flag("e", "") && slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, `\`) })
	case "printf":
		return slices.ContainsFunc(args, func(a string) bool { return strings.ContainsAny(a, `\%`) })
	}
	return false
}

// transformsText reports a pipeline (the left side of a pipe into what runs what no word
// shows) that changes text on its way: text the line spells (echo, printf, a here-string) put
// through another command (rev, tr, sed, awk, an interpreter), or a stage that is a function
// of the line's, whose body the pipe does not show. `echo 'mr- fr- ~' | rev | bash`.
func (w *walker) transformsText(pipe *syntax.Stmt) bool {
	var stages []*syntax.Stmt
	var flatten func(st *syntax.Stmt)
	flatten = func(st *syntax.Stmt) {
		if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
			flatten(b.X)
			flatten(b.Y)
			return
		}
		stages = append(stages, st)
	}
	flatten(pipe)
	for _, st := range stages {
		if c, ok := st.Cmd.(*syntax.CallExpr); ok && len(c.Args) > 0 && w.funcs[evalWord(w.src, c.Args[0]).val] {
			return true
		}
	}
	if inlineCode(w.src, stages[0]) {
		return true // python3 -c 'print("…")' | sh: text the line's own code prints
	}
	_, literal := w.literalOutput(stages[0])
	hereText := slices.ContainsFunc(stages[0].Redirs, func(r *syntax.Redirect) bool { return stdinRedirect(r) && r.Op != syntax.RdrIn })
	return len(stages) > 1 && (literal || hereText) || len(stages) == 1 && hereText && !literal
}

// inlineCode reports an interpreter running code given on its own command line (python3 -c,
// perl -e, node -e, ruby -e, awk's program): what it prints is text the line carries.
func inlineCode(src string, st *syntax.Stmt) bool {
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(c.Args) < 2 {
		return false
	}
	name := strings.TrimRight(baseName(evalWord(src, c.Args[0]).val), "0123456789.")
	switch name {
	case "awk", "gawk", "mawk", "nawk":
		return true
	case "python", "perl", "ruby", "node", "php", "lua", "deno", "bun":
		return slices.ContainsFunc(c.Args[1:], func(a *syntax.Word) bool {
			v := evalWord(src, a).val
			return v == "-c" || v == "-e" || v == "-E" || v == "-r" || v == "--eval" || v == "-p" ||
				len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsAny(v[1:], "ceE")
		})
	}
	return false
}
