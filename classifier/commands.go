package classifier

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// checkFunc decides whether a known command with these arguments (argv[1:],
// all static) is read-only, returning "" when it is, or the reason it is not.
type checkFunc func(args []string, w *walker) string

// cmdSpec is one entry of the read-only table.
type cmdSpec struct {
	// strict commands have options that write or execute, so every argument
	// must be static and glob-free: `sort $x` or `find *` could expand to
	// -o or -delete at run time.
	strict  bool
	neutral bool // prints or sets shell state only (echo, true, cd)
	check   checkFunc
}

// readOnly is the table of commands known to be read-only, with the flag
// validation that keeps them so. Anything not here is not read-only.
var readOnly map[string]cmdSpec

func init() {
	plain := cmdSpec{}
	neutral := cmdSpec{neutral: true}
	names := cmdSpec{neutral: true, check: checkNameArgs}
	readOnly = map[string]cmdSpec{
		// Readers with no option that writes, runs a program or follows forever.
		"ls": plain, "cat": plain, "head": plain, "wc": plain, "stat": plain, "pwd": neutral,
		"which": plain, "du": plain, "diff": plain, "tac": plain, "nl": plain, "cut": plain,
		"tr": plain, "basename": plain, "dirname": plain, "realpath": plain, "readlink": plain,
		"grep": plain, "egrep": plain, "fgrep": plain, "id": plain, "whoami": plain,
		"uname": plain, "printenv": plain, "seq": plain, "md5sum": plain, "sha1sum": plain,
		"sha224sum": plain, "sha256sum": plain, "sha384sum": plain, "sha512sum": plain,
		"b2sum": plain, "cksum": plain, "cmp": plain, "comm": plain, "paste": plain,
		"fold": plain, "expand": plain, "unexpand": plain, "od": plain, "hexdump": plain,
		"strings": plain, "type": plain, "column": plain, "rev": plain, "df": plain,
		"free": plain, "uptime": plain, "nproc": plain, "arch": plain, "locale": plain,
		"tty": plain, "groups": plain, "ps": {strict: true, check: checkPs}, "jq": plain, "join": plain,
		// Neutral: output or shell state only. printf -v, read, mapfile, getopts and
		// test -v take variable names, whose subscripts bash evaluates (checkNameArgs);
		// the variables they set count for the line-level arithmetic check.
		"echo": neutral, "printf": names, "true": neutral,
		"false": neutral, ":": neutral, "test": names, "[": names, "sleep": neutral,
		"cd": neutral, "pushd": neutral, "popd": neutral, "dirs": neutral,
		"read": names, "mapfile": names, "readarray": names, "getopts": names,
		"set": {strict: true, neutral: true, check: checkSet},
		// Commands with options that write or execute.
		"tail":     {strict: true, check: checkTail},
		"file":     {strict: true, check: checkFile},
		"rg":       {strict: true, check: checkRg},
		"find":     {strict: true, check: checkFind},
		"sort":     {strict: true, check: checkSort},
		"sed":      {strict: true, check: checkSed},
		"git":      {strict: true, check: checkGit},
		"date":     {strict: true, check: checkDate},
		"uniq":     {strict: true, check: checkUniq},
		"tree":     {strict: true, check: checkTree},
		"hostname": {strict: true, check: checkHostname},
	}
}

// neverReadOnly names commands that run other code or escalate privilege,
// with the reason reported for them.
var neverReadOnly = map[string]string{
	"xargs": "executes_code", "eval": "executes_code", "exec": "executes_code",
	"source": "executes_code", ".": "executes_code", "watch": "executes_code",
	"setsid": "executes_code", "ionice": "executes_code", "flock": "executes_code",
	"trap": "executes_code", "alias": "executes_code", "enable": "executes_code",
	"sh": "shell", "bash": "shell", "zsh": "shell", "dash": "shell", "ksh": "shell",
	"fish": "shell", "csh": "shell", "tcsh": "shell", "busybox": "shell",
	"python": "interpreter", "python2": "interpreter", "python3": "interpreter",
	"node": "interpreter", "nodejs": "interpreter", "deno": "interpreter", "bun": "interpreter",
	"perl": "interpreter", "ruby": "interpreter", "php": "interpreter", "lua": "interpreter",
	"awk": "interpreter", "gawk": "interpreter", "mawk": "interpreter", "nawk": "interpreter",
	"tclsh": "interpreter", "Rscript": "interpreter", "osascript": "interpreter",
	"sudo": "privilege", "su": "privilege", "doas": "privilege", "pkexec": "privilege",
	"runuser": "privilege",
}

// safeEnv are the variables an env prefix may set and stay read-only (and be
// stripped for allow-rule matching): they change formatting, not which code
// runs. PATH, LD_*, GIT_*, PAGER, EDITOR and the like are deliberately absent. A
// variable with a check holds that only for the values it passes: glibc loads the
// message catalogue LANGUAGE=../../x/y names (its strings are printf formats), reads the
// file TZ=../../etc/shadow names, and a locale whose characters may end in an ASCII byte
// (zh_TW is Big5, where `\` ends one) makes bash read the lines after LC_ALL=zh_TW
// otherwise than the classifier does.
var safeEnv = map[string]func(string) bool{
	"LC_ALL": localeName, "LANG": localeName, "LC_CTYPE": localeName, "LC_COLLATE": localeName,
	"LC_MESSAGES": localeName, "LC_NUMERIC": localeName, "LC_TIME": localeName,
	"LANGUAGE": languageList, "TZ": tzName, "TERM": termName,
	"NO_COLOR": nil, "FORCE_COLOR": nil, "CLICOLOR": nil, "CLICOLOR_FORCE": nil,
	"COLUMNS": number, "LINES": number, "GREP_COLORS": nil, "LS_COLORS": nil, "TIME_STYLE": nil,
}

// number is a decimal count: zsh's COLUMNS and LINES are integer specials, whose value it
// evaluates as arithmetic when set (COLUMNS=$(cat f) with path[$(cmd)1] in f runs cmd).
func number(v string) bool {
	return v != "" && len(v) <= 9 && strings.Trim(v, "0123456789") == ""
}

// localePattern is a locale whose characters are ASCII or UTF-8: C, POSIX, or a
// language_TERRITORY with a UTF-8 codeset (C.UTF-8, en_US.utf8, de_DE.UTF-8@euro).
var localePattern = regexp.MustCompile(`^(C|POSIX|(C|[a-z]{2,3}(_[A-Z]{2})?)\.(UTF-8|utf8|UTF8|utf-8)(@[a-z]+)?)$`)

func localeName(v string) bool { return v == "" || localePattern.MatchString(v) }

// languageList is LANGUAGE's list of catalogue names: names under the system's locale
// dir, never a path.
func languageList(v string) bool {
	return strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@:.-") == "" &&
		!strings.Contains(v, "..")
}

// tzName is a zone below the system's zoneinfo (Europe/Paris, :UTC) or a POSIX rule
// (EST5EDT,M3.2.0/2,M11.1.0/2): no absolute path and no .. to leave the zoneinfo dir.
func tzName(v string) bool {
	v = strings.TrimPrefix(v, ":")
	return !strings.HasPrefix(v, "/") && !slices.Contains(strings.Split(v, "/"), "..")
}

// termName is a terminal type, a name in the terminfo database and never a path.
func termName(v string) bool {
	return strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") == "" &&
		!strings.Contains(v, "..")
}

// safeEnvAssign reports whether NAME=value (the whole assignment, as an env prefix or
// `env NAME=value` has it) sets a safeEnv variable to a value its check passes: a value
// known only at run time passes only a variable without a check, and NAME+=value never.
func safeEnvAssign(assignment string, static bool) bool {
	name, val, ok := strings.Cut(assignment, "=")
	check, safe := safeEnv[name]
	switch {
	case !ok || !safe:
		return false
	case check == nil:
		return true
	}
	return static && check(val)
}

// safeBareAssign reports whether a bare assignment (x=1 with no command) may
// appear in a read-only line run by shell (Options.Shell), whatever its value. Shell-special and
// exported variables are upper case by convention (PATH, IFS, BASH_ENV, PS4); a
// lower-case name only affects later words of this line, except zsh's own
// lower-case specials (zshSpecial). A safeEnv variable with a check needs its value seen
// (safeEnvAssign): read LANG or for TZ in … sets one no check saw.
func safeBareAssign(name, shell string) bool {
	if check, ok := safeEnv[name]; ok {
		return check == nil
	}
	if (shell == ShellZsh || shell == shellAny) && zshSpecial[name] {
		return false
	}
	return name != "" && strings.ToLower(name) == name
}

// zshSpecial are zsh's lower-case special parameters. path is tied to PATH: in zsh
// `path=~/evil; ls` runs ~/evil/ls. cdpath moves cd, fpath and module_path say where
// functions and modules load from, prompt is PS1, argv the positional parameters, and the
// zsh/parameter module's hashes (commands, functions, aliases, ...) change what a name runs.
var zshSpecial = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`path cdpath fpath module_path manpath mailpath fignore psvar
		watch prompt histchars argv status pipestatus signals zsh_eval_context zsh_scheduled_events
		commands functions functions_source dis_functions dis_functions_source aliases dis_aliases
		galiases dis_galiases saliases dis_saliases builtins dis_builtins reswords dis_reswords
		parameters options modules nameddirs userdirs usergroups dirstack history historywords
		jobdirs jobstates jobtexts funcstack functrace funcfiletrace funcsourcetrace patchars
		dis_patchars match mbegin mend reply keymaps widgets zle_bracketed_paste`) {
		m[n] = true
	}
	return m
}()

// classifySub fills *out, a zero Subcommand, for sb, taking its word slices
// from strs.
func (w *walker) classifySub(out *Subcommand, sb *sub, strs *strSlab) {
	out.Text, out.Redirects = sb.text, sb.redirs
	if sb.plain {
		// The common case, where staticArgv, allowPrefix and denyPrefix all
		// start from the same words: build them once and copy.
		n := len(sb.args)
		argv := strs.take(n)
		for _, a := range sb.args {
			argv = append(argv, a.val)
		}
		allow, deny := strs.take(n), strs.take(n)
		for _, v := range argv {
			allow = append(allow, v)
			deny = append(deny, v)
		}
		out.Argv = argv
		out.Prefix = stripWrappers(allow, false)
		out.DenyPrefix = stripWrappers(deny, true)
	} else {
		out.Argv = staticArgv(sb, strs)
		out.Prefix = allowPrefix(sb, strs)
		out.DenyPrefix = denyPrefix(sb, strs)
	}
	out.ExactOnly = exactOnly(out.DenyPrefix)
	denyGlobs(out, sb, w.opts)
	out.Reason = w.readOnlyReason(sb)
	out.ReadOnly = out.Reason == "read_only" || out.Reason == "neutral"
	if out.Reason == "write_redirect" {
		r := w.commandReason(sb)
		out.RedirectOnly = r == "read_only" || r == "neutral"
	}
}

// strSlab hands out string slices from one backing array.
type strSlab []string

// take returns an empty, non-nil slice with capacity exactly n.
func (s *strSlab) take(n int) []string {
	k := len(*s)
	if n == 0 || cap(*s)-k < n {
		return make([]string, 0, n)
	}
	*s = (*s)[:k+n]
	return (*s)[k : k : k+n]
}

// argvWords bounds the strings staticArgv, allowPrefix and denyPrefix take
// for sb.
func argvWords(sb *sub) int {
	if len(sb.args) == 0 {
		return 3 * len(sb.assigns)
	}
	return 2*len(sb.args) + len(sb.assigns) + len(sb.args)
}

func staticArgv(sb *sub, strs *strSlab) []string {
	if len(sb.args) == 0 {
		if len(sb.assigns) == 0 {
			return nil
		}
		for _, a := range sb.assigns {
			if !a.static {
				return nil
			}
		}
		out := strs.take(len(sb.assigns))
		for _, a := range sb.assigns {
			out = append(out, a.word.val)
		}
		return out
	}
	for _, a := range sb.args {
		if !a.static {
			return nil
		}
	}
	out := strs.take(len(sb.args))
	for _, a := range sb.args {
		out = append(out, a.val)
	}
	return out
}

// versionFlags are, for programs that print their version and exit on that one word before
// they read a file or load code (a project's config, a module, a start-up file), the words.
// Not go (go.mod's toolchain line runs another go), cargo or rustc (rust-toolchain runs
// another toolchain), npm or pip (their code and the project's .npmrc or .pth files load
// first): those run what the project names.
var versionFlags = func() map[string]map[string]bool {
	long, longV := map[string]bool{"--version": true}, map[string]bool{"--version": true, "-V": true}
	m := map[string]map[string]bool{
		"python": longV, "python2": longV, "python3": longV, "curl": longV,
		"node": {"--version": true, "-v": true}, "nodejs": {"--version": true, "-v": true},
		"make": {"--version": true, "-v": true},
		"gcc":  long, "g++": long, "cc": long, "c++": long, "clang": long, "clang++": long, "bash": long,
	}
	for minor := 6; minor <= 20; minor++ {
		m[fmt.Sprintf("python3.%d", minor)] = longV
	}
	return m
}()

// readOnlyReason returns "read_only" or "neutral" for a read-only command, or
// the reason it is not.
func (w *walker) readOnlyReason(sb *sub) string {
	for _, r := range sb.redirs {
		if strings.HasPrefix(r.Target, "/dev/tcp/") || strings.HasPrefix(r.Target, "/dev/udp/") || r.mayBeNet {
			return "network_redirect"
		}
		if r.Write {
			return "write_redirect"
		}
	}
	return w.commandReason(sb)
}

// commandReason is readOnlyReason of the command itself, its redirections aside.
func (w *walker) commandReason(sb *sub) string {
	switch {
	case sb.noCmd:
		return "neutral"
	case sb.isDecl:
		return "declaration"
	case sb.isLet:
		return "neutral"
	}
	if len(sb.args) == 0 {
		for _, a := range sb.assigns {
			if !safeBareAssign(a.name, w.opts.Shell) && !safeEnvAssign(a.word.val, a.static && !a.word.glob) {
				return reasonUnsafeAssign
			}
		}
		return "neutral"
	}
	for _, a := range sb.assigns {
		if !safeEnvAssign(a.word.val, a.static) || a.word.glob {
			return "unsafe_env_assignment"
		}
	}
	return w.argvReason(sb.args, 0)
}

// argvReason classifies one command's words, unwrapping wrappers.
func (w *walker) argvReason(args []word, depth int) string {
	if depth > maxWrapDepth {
		return "too_deep"
	}
	name := args[0]
	if !name.static || name.glob || name.tilde {
		return "dynamic_command"
	}
	n := name.val
	if strings.IndexByte(n, '/') >= 0 {
		// /bin/ls is ls; ./ls or /tmp/ls could be anything.
		base, ok := strings.CutPrefix(n, "/usr/bin/")
		if !ok {
			base, ok = strings.CutPrefix(n, "/bin/")
		}
		if !ok || strings.Contains(base, "/") {
			return "path_command"
		}
		n = base
	}
	if w.funcs[n] {
		return "shadowed_command"
	}
	if len(args) == 2 && args[1].static && !args[1].glob && versionFlags[n][args[1].val] {
		return "read_only"
	}
	e := lookupCmd(n) // neverReadOnly, isWrapper and readOnly in one lookup
	if e.never {
		return e.neverReason
	}
	if e.wrapper {
		return w.wrapperReason(n, args, depth)
	}
	if !e.known {
		return "unknown_command"
	}
	spec := e.spec
	vals := w.vals[:0]
	for _, a := range args[1:] {
		if spec.strict {
			if !a.static {
				return "dynamic_argument"
			}
			if a.glob {
				return "glob_argument"
			}
		}
		vals = append(vals, a.val)
	}
	w.vals = vals // no check keeps args, so the next command may reuse them
	w.cur = args
	if spec.check != nil {
		if r := spec.check(vals, w); r != "" {
			return r
		}
	}
	if spec.neutral {
		return "neutral"
	}
	return "read_only"
}

// cmdEntry is what the classifier knows about a command name, gathered from
// neverReadOnly, isWrapper, readOnly and the risk tables (networkCmds,
// privilegeCmds, destructiveCmds) so that each use costs one lookup.
type cmdEntry struct {
	never       bool // in neverReadOnly, with neverReadOnly's reason
	neverReason string
	wrapper     bool // isWrapper
	known       bool // in readOnly, with its spec
	spec        cmdSpec
	risk        uint8 // cmdNetwork, cmdPrivilege, cmdDestructive
}

const (
	cmdNetwork uint8 = 1 << iota
	cmdPrivilege
	cmdDestructive
)

// cmdTable maps command names to their entries. It is a small open-addressed
// hash table: these lookups run several times per simple command, and a
// short name hashes faster here than through a map.
var cmdTable struct {
	slots   [1024]uint16 // index+1 into entries; 0 is empty
	names   []string
	entries []cmdEntry
}

func cmdHash(s string) uint32 {
	h := uint32(len(s))
	for i := 0; i < len(s); i++ {
		h = h*31 + uint32(s[i])
	}
	return (h * 0x9E3779B1) >> (32 - 10)
}

// noCmdEntry is the entry of every name cmdTable does not hold.
var noCmdEntry cmdEntry

// lookupCmd returns the entry of name (&noCmdEntry when it has none); the
// caller must not modify it.
func lookupCmd(name string) *cmdEntry {
	for i := cmdHash(name); ; i = (i + 1) % uint32(len(cmdTable.slots)) {
		k := cmdTable.slots[i]
		if k == 0 {
			return &noCmdEntry
		}
		if cmdTable.names[k-1] == name {
			return &cmdTable.entries[k-1]
		}
	}
}

func init() {
	m := map[string]cmdEntry{}
	add := func(n string) {
		e := cmdEntry{wrapper: isWrapper(n)}
		e.neverReason, e.never = neverReadOnly[n]
		e.spec, e.known = readOnly[n]
		if networkCmds[n] {
			e.risk |= cmdNetwork
		}
		if privilegeCmds[n] {
			e.risk |= cmdPrivilege
		}
		if destructiveCmds[n] {
			e.risk |= cmdDestructive
		}
		m[n] = e
	}
	for _, t := range []map[string]bool{networkCmds, privilegeCmds, destructiveCmds} {
		for n := range t {
			add(n)
		}
	}
	for n := range neverReadOnly {
		add(n)
	}
	for n := range readOnly {
		add(n)
	}
	for _, n := range []string{"env", "nice", "timeout", "time", "nohup", "command", "builtin", "stdbuf", "noglob"} {
		if !isWrapper(n) {
			panic("classifier: wrapper list out of step with isWrapper")
		}
		add(n)
	}
	if 3*len(m) > len(cmdTable.slots) {
		panic("classifier: cmdTable too full")
	}
	for n, e := range m {
		cmdTable.names = append(cmdTable.names, n)
		cmdTable.entries = append(cmdTable.entries, e)
		i := cmdHash(n)
		for cmdTable.slots[i] != 0 {
			i = (i + 1) % uint32(len(cmdTable.slots))
		}
		cmdTable.slots[i] = uint16(len(cmdTable.names))
	}
}

// RunsCommandLine reports whether the command words (an allow prefix) run a command, script
// or code their arguments give: a wrapper, a shell, an interpreter, a runner, a privilege tool,
// a package manager's or container tool's exec (npm exec, docker run, kubectl exec), make
// given its makefile. A rule that allows such a prefix (`Bash(env:*)`, `Bash(npm exec:*)`)
// allows every command, so an approval suggests its whole line, never its prefix.
func RunsCommandLine(words []string) bool {
	if len(words) == 0 {
		return false
	}
	name := runnerName(path.Base(words[0]))
	if isWrapper(name) || isShell(name) || runners[name] || opaqueRunners[name] || dynamicLoader(name) || interpreters[name] {
		return true
	}
	switch neverReadOnly[name] {
	case "executes_code", "shell", "interpreter", "privilege":
		return true
	}
	if name == "xargs" || name == "exec" || strings.HasPrefix(name, "python") || strings.HasPrefix(name, "pypy") {
		return true
	}
	for _, w := range words[1:] {
		if subcommandRunners[name][w] || name == "make" && (w == "-f" || strings.HasPrefix(w, "--file") || strings.HasPrefix(w, "--makefile") || strings.HasPrefix(w, "--eval")) {
			return true
		}
		if programOption(name, w) {
			return true
		}
	}
	return false
}

// programOption reports an option that names a program or code to load: go test -exec, go
// build -toolexec, go vet -vettool, gcc -wrapper, pytest -p, and any option spelled with one
// of programOptionWords (--exec, --plugin, --pager, --shell-command, …).
func programOption(name, w string) bool {
	if !strings.HasPrefix(w, "-") {
		return false
	}
	o := strings.ToLower(strings.TrimLeft(w, "-"))
	o, _, _ = strings.Cut(o, "=")
	if name == "pytest" || name == "py.test" {
		if o == "p" || strings.HasPrefix(w, "-p") && !strings.HasPrefix(w, "--") {
			return true
		}
	}
	for _, k := range programOptionWords {
		if strings.Contains(o, k) {
			return true
		}
	}
	return false
}

// programOptionWords are parts of option names that name a program, a command or code to load.
var programOptionWords = []string{"exec", "tool", "wrapper", "plugin", "pager", "editor", "command",
	"shell", "hook", "eval", "script", "program", "interpreter", "runner", "preload", "require"}

// interpreters run code given on their command line, beyond neverReadOnly's.
var interpreters = map[string]bool{"expect": true, "julia": true, "guile": true, "sbcl": true, "clisp": true,
	"emacs": true, "racket": true, "scheme": true, "ghci": true, "runghc": true, "runhaskell": true,
	"elixir": true, "iex": true, "erl": true, "escript": true, "ocaml": true, "swift": true,
	"kotlin": true, "groovy": true, "jshell": true, "scala": true, "pwsh": true, "powershell": true,
	"wish": true, "jq": false, "gdb": true, "R": true, "octave": true, "matlab": true, "java": true,
	"dotnet": true, "mono": true, "ts-node": true, "tsx": true, "php-cgi": true, "irb": true}

// subcommandRunners are the subcommands of a program that run a command their words name.
var subcommandRunners = map[string]map[string]bool{
	"npm": {"exec": true, "x": true}, "pnpm": {"exec": true, "dlx": true}, "yarn": {"exec": true, "dlx": true},
	"bun": {"x": true, "exec": true}, "deno": {"run": true, "eval": true}, "git": {"bisect": true, "rebase": true, "submodule": true},
	"docker": {"run": true, "exec": true, "create": true}, "podman": {"run": true, "exec": true, "create": true},
	"nerdctl": {"run": true, "exec": true}, "kubectl": {"exec": true, "run": true, "debug": true, "attach": true},
	"uv": {"run": true, "tool": true}, "poetry": {"run": true},
	"pipenv": {"run": true}, "pdm": {"run": true}, "hatch": {"run": true}, "conda": {"run": true}, "mise": {"exec": true, "x": true},
}

func isWrapper(n string) bool {
	switch n {
	case "env", "nice", "timeout", "time", "nohup", "command", "builtin", "stdbuf", "noglob":
		return true
	}
	return false
}

// wrapperReason classifies a wrapper by its own options and its inner command.
func (w *walker) wrapperReason(n string, args []word, depth int) string {
	// Every word up to the inner command must be static: `nice $x ls` runs
	// whatever $x names.
	vals := w.vals[:0]
	for _, a := range args {
		vals = append(vals, a.val)
	}
	w.vals = vals // reused by the inner command once vals is no longer read
	inner, reason := unwrapOne(vals, false)
	if reason != "" {
		return reason
	}
	for _, a := range args[:inner] {
		if !a.static || a.glob {
			return "dynamic_argument"
		}
	}
	if n == "env" {
		first, eo := envOptions(vals)
		if eo.chdir {
			// env -C DIR is a cd for the command alone: git there reads DIR's repository
			// config, which runs programs (core.fsmonitor) even for git status, as after cd.
			return "env_chdir"
		}
		for _, v := range vals[first:inner] {
			if !safeEnvAssign(v, true) {
				return "unsafe_env_assignment"
			}
		}
	}
	r := "neutral" // env, nice, command -v x, time alone only print.
	if inner < len(args) {
		r = w.argvReason(args[inner:], depth+1)
	}
	if n == "nohup" && (r == "neutral" || r == "read_only") {
		// nohup writes nohup.out (in the cwd, else $HOME) when stdout is a terminal.
		return "nohup_output"
	}
	return r
}

// unwrapOne returns the index of the inner command of the wrapper argv[0],
// or a reason why the wrapper is not read-only. lenient (deny-rule matching)
// also unwraps env with assignments and xargs with options.
func unwrapOne(argv []string, lenient bool) (int, string) {
	name := argv[0]
	if i := strings.LastIndexByte(name, '/'); i >= 0 && (lenient || strings.HasPrefix(name, "/usr/bin/") || strings.HasPrefix(name, "/bin/")) {
		name = name[i+1:]
	}
	args := argv[1:]
	skip := func(sp optSpec) (int, []opt) {
		opts, operands := parseOpts(args, sp)
		return len(argv) - len(operands), opts
	}
	switch name {
	case "nohup", "builtin", "noglob":
		if len(args) > 0 && args[0] == "--" {
			return 2, ""
		}
		return 1, ""
	case "nice":
		// -5 is an adjustment, which parseOpts would read as flags -5.
		i, opts := skip(optSpec{shortArg: "n", longArg: []string{"adjustment"}})
		for _, o := range opts {
			if !(o.name == "n" || (o.long && longIs(o.name, "adjustment")) || (o.name >= "0" && o.name <= "9")) {
				return 0, "unsafe_wrapper_option"
			}
		}
		return i, ""
	case "timeout":
		i, opts := skip(optSpec{shortArg: "sk", longArg: []string{"signal", "kill-after"}})
		for _, o := range opts {
			ok := o.name == "s" || o.name == "k" || o.name == "v"
			for _, l := range []string{"signal", "kill-after", "preserve-status", "foreground", "verbose"} {
				ok = ok || (o.long && longIs(o.name, l))
			}
			if !ok {
				return 0, "unsafe_wrapper_option"
			}
		}
		if i < len(argv) {
			i++ // the duration
		}
		return i, ""
	case "time":
		i, opts := skip(optSpec{shortArg: "foa", longArg: []string{"format", "output"}})
		for _, o := range opts {
			if o.name == "o" || o.name == "a" || (o.long && (longIs(o.name, "output") || longIs(o.name, "append"))) {
				return 0, "write_option"
			}
		}
		return i, ""
	case "stdbuf":
		i, opts := skip(optSpec{shortArg: "ioe", longArg: []string{"input", "output", "error"}})
		for _, o := range opts {
			if !strings.Contains("ioe", o.name) && !(o.long && (longIs(o.name, "input") || longIs(o.name, "output") || longIs(o.name, "error"))) {
				return 0, "unsafe_wrapper_option"
			}
		}
		return i, ""
	case "command":
		i, opts := skip(optSpec{})
		for _, o := range opts {
			switch o.name {
			case "p":
			case "v", "V":
				if lenient {
					return 0, "not_a_wrapper"
				}
				return len(argv), "" // lookup only, runs nothing
			default:
				return 0, "unsafe_wrapper_option"
			}
		}
		return i, ""
	case "env":
		i, eo := envOptions(argv)
		switch {
		case !eo.known:
			return 0, "unsafe_wrapper_option"
		case eo.split && lenient:
			return 0, "not_a_wrapper"
		case eo.split:
			return 0, "env_split_string"
		case eo.argv0 && !lenient:
			// What a program does may follow from the name it runs under, not its words: git
			// run as git-clean cleans whatever subcommand its words name. Deny rules still see
			// the program.
			return 0, "env_argv0"
		}
		for i < len(argv) && isAssignWord(argv[i]) {
			i++
		}
		if i > len(argv) {
			i = len(argv)
		}
		return i, ""
	case "exec":
		if !lenient {
			return 0, "executes_code"
		}
		// exec [-cl] [-a name] command
		i, _ := skip(optSpec{shortArg: "a"})
		return i, ""
	case "xargs":
		if !lenient {
			return 0, "executes_code"
		}
		i, _ := skip(optSpec{shortArg: "IaLnPsdE", shortOpt: "iel", longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}})
		return i, ""
	case "sudo":
		if !lenient {
			return 0, "privilege"
		}
		i, _ := skip(optSpec{shortArg: "ugCDhprtTUR", longArg: []string{"user", "group", "close-from", "chdir", "host", "prompt", "role", "type", "other-user", "chroot", "command-timeout"}})
		return i, ""
	}
	return 0, "not_a_wrapper"
}

// envOpts is what env's options do besides setting the environment.
type envOpts struct {
	known bool // every option is one env has
	chdir bool // -C DIR: the command runs in DIR
	split bool // -S STRING: STRING is split into the command line
	argv0 bool // -a NAME: the command runs under NAME (git-NAME picks git's subcommand)
}

// envLong are GNU env's long options and whether each takes a value: 1 always (--chdir DIR,
// --chdir=DIR), 2 only after = (--default-signal[=SIG]).
var envLong = map[string]int{
	"argv0": 1, "block-signal": 2, "chdir": 1, "debug": 0, "default-signal": 2, "help": 0,
	"ignore-environment": 0, "ignore-signal": 2, "list-signal-handling": 0, "null": 0,
	"split-string": 1, "unset": 1, "version": 0,
}

// envOptions reads env's options as GNU env's getopt does: clusters (-iC DIR, -iCDIR), values
// attached or in the next word, long options abbreviated to any unique prefix. It returns the
// index in argv of the first word after them (an assignment or the command).
func envOptions(argv []string) (int, envOpts) {
	eo := envOpts{known: true}
	i := 1
	for ; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			return i + 1, eo
		case a == "-":
			continue // as -i
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			full, takes := "", 0
			for l, t := range envLong {
				if l == name {
					full, takes = l, t
					break
				}
				if strings.HasPrefix(l, name) && name != "" {
					if full != "" {
						return i, envOpts{} // ambiguous: env refuses it
					}
					full, takes = l, t
				}
			}
			if full == "" {
				return i, envOpts{}
			}
			eo.chdir = eo.chdir || full == "chdir"
			eo.split = eo.split || full == "split-string"
			eo.argv0 = eo.argv0 || full == "argv0"
			if takes == 1 && !hasValue {
				i++
			}
		case strings.HasPrefix(a, "-"):
			for j := 1; j < len(a); j++ {
				switch c := a[j]; c {
				case 'i', '0', 'v':
				case 'u', 'C', 'S', 'a':
					eo.chdir = eo.chdir || c == 'C'
					eo.split = eo.split || c == 'S'
					eo.argv0 = eo.argv0 || c == 'a'
					if j == len(a)-1 {
						i++ // the value is the next word
					}
					j = len(a)
				default:
					return i, envOpts{}
				}
			}
		default:
			return i, eo
		}
	}
	return min(i, len(argv)), eo
}

// isAssignWord reports whether a is NAME=value as env(1) reads it.
func isAssignWord(a string) bool {
	// env puts any word holding `=` before the command in the environment, whatever its
	// name: 'BASH_FUNC_ls%%=() { … }' is an exported function to a bash it starts, not the
	// command.
	return strings.Contains(a, "=")
}

// checkTail refuses following: tail -f never ends, and a command approved
// as read-only should finish on its own rather than hold a slot until the
// tool timeout.
func checkTail(args []string, _ *walker) string {
	if hasFlag(args, "fF", "follow", "retry", "pid") {
		return "tail_follow"
	}
	return ""
}

// checkFile refuses -m/-f (COMPAT: they prompt) and -C, which compiles a
// magic file and writes it.
func checkFile(args []string, _ *walker) string {
	if hasFlag(args, "mfC", "magic-file", "files-from", "compile") {
		return "unsafe_flag"
	}
	return ""
}

// checkRg refuses options that run other programs: --pre and --pre-glob run
// a preprocessor, -z runs decompressors found on PATH, --hostname-bin runs a
// program for hyperlinks.
func checkRg(args []string, _ *walker) string {
	if hasFlag(args, "z", "pre", "pre-glob", "search-zip", "hostname-bin") {
		return "rg_exec"
	}
	return ""
}

// checkFind refuses actions that run programs, delete or write files.
func checkFind(args []string, _ *walker) string {
	for _, a := range args {
		switch {
		case a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir":
			return "find_exec"
		case a == "-delete":
			return "find_delete"
		case strings.HasPrefix(a, "-fprint") || a == "-fls":
			return "find_write"
		}
	}
	return ""
}

// checkSort refuses -o (writes a file) and --compress-program (runs one).
func checkSort(args []string, _ *walker) string {
	if hasFlag(args, "o", "output") {
		return "sort_output"
	}
	if hasFlag(args, "", "compress-program") {
		return "executes_code"
	}
	// -T DIR: sort writes (and removes) its temporary files there once the data outgrows its
	// buffer.
	if hasFlag(args, "T", "temporary-directory") {
		return "sort_tempdir"
	}
	return ""
}

// psArgOptions are ps's options whose value is the next word (-C sleep names a command, not
// BSD's e).
var psArgOptions = map[string]bool{"-o": true, "-O": true, "--format": true, "-p": true, "--pid": true, "-u": true,
	"-U": true, "--user": true, "-C": true, "-G": true, "-g": true, "-t": true, "--sort": true, "-q": true, "--ppid": true,
	"o": true, "O": true, "p": true, "U": true, "t": true, "k": true}

// checkPs refuses BSD's e, which prints each process's environment: the tokens exported in
// the user's other shells and jobs. A confined ps sees only its own call's processes; one the
// agent runs itself sees them all.
func checkPs(args []string, _ *walker) string {
	for i, a := range args {
		if i > 0 && psArgOptions[args[i-1]] {
			continue
		}
		if !strings.HasPrefix(a, "-") && strings.ContainsRune(a, 'e') {
			return "ps_environment"
		}
	}
	return ""
}

// checkDate refuses setting the clock: -s/--set, or an operand that is not a
// +FORMAT (GNU date sets the time from MMDDhhmm[[CC]YY][.ss]).
func checkDate(args []string, _ *walker) string {
	opts, operands := parseOpts(args, pathSpecs["date"].opts)
	for _, o := range opts {
		if o.name == "s" || (o.long && longIs(o.name, "set")) {
			return "date_set"
		}
	}
	for _, op := range operands {
		if !strings.HasPrefix(op, "+") {
			return "date_set"
		}
	}
	return ""
}

// checkUniq refuses a second operand, which uniq writes its output to.
func checkUniq(args []string, _ *walker) string {
	_, operands := parseOpts(args, optSpec{shortArg: "fsw", longArg: []string{"skip-fields", "skip-chars", "check-chars"}, permute: true})
	if len(operands) > 1 {
		return "write_operand"
	}
	return ""
}

// strictOptions are the set -o options that only make a script stop sooner.
var strictOptions = map[string]bool{"errexit": true, "nounset": true, "pipefail": true, "errtrace": true}

// checkSet allows set only to make the script stop sooner (-e, -u, -E, -o pipefail and their
// + forms) or to print its state. Every other option changes how the shell reads or runs what
// follows (-k passes a command's later name=value words into its environment, -f and +B
// change what globs and braces name, -x expands PS4 before each command), and an operand sets
// the positional parameters.
func checkSet(args []string, w *walker) string {
	letters := "euE"
	if w.opts.Shell == ShellZsh {
		letters = "eu" // zsh's -E is another option
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') || a == "--" {
			return "unsafe_flag"
		}
		flags := a[1:]
		if n := strings.Count(flags, "o"); n > 1 {
			return "unsafe_flag"
		} else if n == 1 {
			flags = strings.Replace(flags, "o", "", 1)
			if i+1 < len(args) { // set -o alone prints the options
				i++
				if !strictOptions[args[i]] {
					return "unsafe_flag"
				}
			}
		}
		if strings.Trim(flags, letters) != "" {
			return "unsafe_flag"
		}
	}
	return ""
}

// checkTree refuses -o (output file) and -R (writes 00Tree.html files).
func checkTree(args []string, _ *walker) string {
	if hasFlag(args, "oR", "output") {
		return "write_option"
	}
	return ""
}

// checkHostname allows only the display options: an operand, -F or -b set
// the host name.
func checkHostname(args []string, _ *walker) string {
	for _, a := range args {
		switch a {
		case "-s", "-f", "-d", "-i", "-I", "-a", "-A", "--short", "--fqdn", "--long", "--domain",
			"--ip-address", "--all-ip-addresses", "--all-fqdns", "--alias":
		default:
			return "unsafe_flag"
		}
	}
	return ""
}
