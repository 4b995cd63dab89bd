package classifier

import (
	"slices"
	"strings"
	"unicode"

	"mvdan.cc/sh/v3/syntax"
)

// Programs that take a command line as an option's value and run it: tar -I zstd,
// split --filter, sort --compress-program, rsync -e. The value is read as a script (sh runs
// most of them), so deny and ask rules meet the command it names, as they do through
// find -exec; one known only at run time makes the command opaque.

// cmdOptSpec names a program's options whose value is a command line.
type cmdOptSpec struct {
	short string   // single-letter options, in any cluster (value attached or the next word)
	long  []string // long options, whole or abbreviated, --opt=V or --opt V
	// words are options spelled as one whole word that take the next word (zip -TT, gdb -ex).
	words []string
	// prefix: only a value starting with it is a command, the rest after it (tar's
	// --checkpoint-action=exec=CMD).
	prefix map[string]string
}

var cmdOptPrograms = map[string]cmdOptSpec{
	"tar": {short: "IF", long: []string{"use-compress-program", "to-command", "info-script", "new-volume-script", "rsh-command", "rmt-command", "checkpoint-action"},
		prefix: map[string]string{"checkpoint-action": "exec="}},
	"split":   {long: []string{"filter"}},
	"sort":    {long: []string{"compress-program"}},
	"install": {long: []string{"strip-program"}},
	"zip":     {long: []string{"unzip-command"}, words: []string{"-TT"}},
	"scp":     {short: "SD"},
	"sftp":    {short: "SD"},
	"rsync":   {short: "e", long: []string{"rsh", "rsync-path"}},
	"man":     {short: "PH", long: []string{"pager", "html"}},
	// rg runs --pre's program on each file it searches, --hostname-bin's for its name.
	"rg": {long: []string{"pre", "hostname-bin"}},
}

// commandLanguages run commands of their own language, which can start any program (vim's
// :!, gdb's shell, less's !), from these options: present at all, the command is opaque.
var commandLanguages = map[string]cmdOptSpec{
	"vim": {short: "cS", long: []string{"cmd"}}, "vi": {short: "cS", long: []string{"cmd"}},
	"nvim": {short: "cS", long: []string{"cmd"}}, "view": {short: "cS", long: []string{"cmd"}},
	"vimdiff": {short: "cS", long: []string{"cmd"}}, "ex": {short: "cS", long: []string{"cmd"}},
	"gdb": {short: "x", long: []string{"eval-command", "command", "init-eval-command", "init-command"}, words: []string{"-ex", "-iex", "-eval-command", "-command", "-init-eval-command", "-init-command"}},
}

// sshCommandKeys are ssh's config keys whose value is a command line run on this host.
var sshCommandKeys = map[string]bool{"proxycommand": true, "localcommand": true, "knownhostscommand": true}

// sshCommands reads the commands ssh, scp and sftp run locally from -o KEY=VALUE (or KEY
// VALUE), and makes -F (a config file that may name such commands) opaque.
func (w *walker) sshCommands(sb *sub, ws []word) {
	for i := 0; i < len(ws) && !sb.opaque; i++ {
		a := ws[i]
		if !a.static {
			sb.opaque = true
			return
		}
		if a.val == "--" || len(a.val) < 2 || a.val[0] != '-' {
			if a.val == "--" {
				return
			}
			continue
		}
		// A cluster of short options (-vo KEY=V, -4oKEY=V): the first that takes a value
		// takes the rest of the word, or the next word.
		for j := 1; j < len(a.val); j++ {
			c := a.val[j]
			if !strings.ContainsRune(sshArgOpts, rune(c)) {
				continue
			}
			v, ok := clusterValue(ws, &i, a.val[j+1:])
			if !ok {
				sb.opaque = true
				return
			}
			switch c {
			case 'F':
				sb.opaque = true // a config file, which may name such commands
				return
			case 'o':
				w.sshOption(sb, v)
			}
			break
		}
	}
}

// clusterValue is the value of a short option in a cluster: the rest of its word, or when
// that is empty the next word (ws[*i+1], moving *i on to it). ok is false for a next word known
// only at run time.
func clusterValue(ws []word, i *int, rest string) (string, bool) {
	if rest != "" || *i+1 >= len(ws) {
		return rest, true
	}
	*i++
	return ws[*i].val, ws[*i].static
}

// sshArgOpts are ssh's, scp's and sftp's short options that take a value.
const sshArgOpts = "BbcDEeFIiJLlmOoPpQRSWw"

// sshOption reads one -o KEY=VALUE (or KEY VALUE, a tab or blanks between): the command of a
// key that runs one locally is a script.
func (w *walker) sshOption(sb *sub, opt string) {
	opt = strings.TrimLeft(opt, " \t")
	i := strings.IndexAny(opt, "= \t")
	if i < 0 {
		return
	}
	key, val := opt[:i], strings.TrimLeft(opt[i:], " \t")
	val = strings.TrimLeft(strings.TrimPrefix(val, "="), " \t")
	if sshCommandKeys[strings.ToLower(key)] {
		w.nestedScript(sb, val, ShellSh)
	}
}

// stdinGiven reports a command whose stdin the line sets: a redirection of fd 0 (its own or
// a compound command's) or a pipe into it.
func (w *walker) stdinGiven(sb *sub, s *syntax.Stmt) bool {
	if w.pipeIn != nil || slices.ContainsFunc(s.Redirs, stdinRedirect) {
		return true
	}
	return slices.ContainsFunc(sb.redirs, func(r Redirect) bool { return strings.HasPrefix(bareOp(r.Op), "<") })
}

// dotCommand reports a line sqlite3 takes for one of its dot commands (.shell, .read).
func dotCommand(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) > 1 && s[0] == '.' && (s[1] >= 'a' && s[1] <= 'z' || s[1] >= 'A' && s[1] <= 'Z')
}

// nestedCommandOptions reads the command lines a program's options name (cmdOptPrograms),
// and makes a command-language program opaque when an option gives it commands; vim's and
// less's +CMD count too.
func (w *walker) nestedCommandOptions(sb *sub, s *syntax.Stmt, name string, ws []word) {
	if spec, ok := commandLanguages[name]; ok {
		w.optionValues(sb, ws, spec, func(string) { sb.opaque = true })
		for _, a := range ws {
			if !a.static || strings.HasPrefix(a.val, "+") && len(a.val) > 1 {
				sb.opaque = true
			}
		}
		return
	}
	if name == "sqlite3" {
		// Its dot commands run programs (.shell, .system) and read files (.read), given as an
		// argument, with -cmd, or on stdin.
		for _, a := range ws {
			if !a.static || strings.HasPrefix(a.val, "-cmd") || strings.HasPrefix(a.val, "-init") || dotCommand(a.val) {
				sb.opaque = true
			}
		}
		// What it reads on stdin is its input too: a here-document, a here-string, a literal
		// echo piped in, or (opaque) a file or a program's output.
		if w.stdinGiven(sb, s) {
			text, ok := w.stdinText(sb, s)
			if !ok {
				sb.opaque = true
			}
			for line := range strings.SplitSeq(text, "\n") {
				if dotCommand(line) {
					sb.opaque = true
				}
			}
		}
		return
	}
	if name == "less" || name == "more" {
		for _, a := range ws {
			// +CMD is a command less runs at start; ! and | in it run a shell.
			if !a.static || strings.HasPrefix(a.val, "+") && strings.ContainsAny(a.val, "!|") {
				sb.opaque = true
			}
		}
		return
	}
	if spec, ok := cmdOptPrograms[name]; ok {
		if name == "tar" {
			ws = tarOldStyle(sb, ws)
		}
		w.optionValues(sb, ws, spec, func(v string) { w.nestedScript(sb, v, ShellSh) })
	}
}

// tarValueLetters are tar's single-letter options that take a value.
const tarValueLetters = "bCfFgHIKLNTVX"

// tarOldStyle is ws with tar's old-style first word (`tar cIf 'touch x' a.tar f`: letters
// with no dash, each that takes a value taking the next word in turn) written as the dashed
// options it means, so -I and -F are read wherever their values are.
func tarOldStyle(sb *sub, ws []word) []word {
	if len(ws) == 0 || !ws[0].static || ws[0].val == "" || ws[0].val[0] == '-' {
		return ws
	}
	out := make([]word, 0, len(ws)+len(ws[0].val))
	rest := ws[1:]
	for _, c := range ws[0].val {
		if c > 0x7f || !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return ws // not options: a file name, as tar's first word may be in no mode
		}
		out = append(out, word{val: "-" + string(c), src: "-" + string(c), static: true})
		if strings.ContainsRune(tarValueLetters, c) {
			if len(rest) == 0 {
				break
			}
			if !rest[0].static {
				sb.opaque = true
			}
			out = append(out, rest[0])
			rest = rest[1:]
		}
	}
	return append(out, rest...)
}

// optionValues calls run with each value of spec's options among ws, up to `--`. A value,
// or an option, known only at run time makes sb opaque.
func (w *walker) optionValues(sb *sub, ws []word, spec cmdOptSpec, run func(string)) {
	value := func(opt string, i int, attached string, hasAttached bool) int {
		v := attached
		if !hasAttached {
			if i+1 >= len(ws) {
				return i
			}
			i++
			if !ws[i].static {
				sb.opaque = true
				return i
			}
			v = ws[i].val
		}
		if p, ok := spec.prefix[opt]; ok {
			if !strings.HasPrefix(v, p) {
				return i
			}
			v = v[len(p):]
		}
		run(v)
		return i
	}
	for i := 0; i < len(ws) && !sb.opaque; i++ {
		a := ws[i]
		if !a.static {
			sb.opaque = true // it may be any option
			return
		}
		v := a.val
		switch {
		case v == "--":
			return
		case containsWord(spec.words, v):
			i = value(v, i, "", false)
		case attachedWord(spec.words, v) != "":
			w := attachedWord(spec.words, v)
			i = value(w, i, strings.TrimPrefix(v[len(w):], "="), true) // zip -TT'cmd', -TT=cmd
		case strings.HasPrefix(v, "--"):
			name, val, has := strings.Cut(v[2:], "=")
			for _, l := range spec.long {
				if longIs(name, l) {
					i = value(l, i, val, has)
					break
				}
			}
		case len(v) > 1 && v[0] == '-' && spec.short != "":
			for j := 1; j < len(v); j++ {
				if strings.IndexByte(spec.short, v[j]) >= 0 {
					i = value(v[j:j+1], i, v[j+1:], j+1 < len(v))
					break
				}
			}
		}
	}
}

// attachedWord is the one of words that v starts with and goes on past (-TTcmd), or "".
func attachedWord(words []string, v string) string {
	for _, w := range words {
		if len(v) > len(w) && strings.HasPrefix(v, w) {
			return w
		}
	}
	return ""
}

func containsWord(list []string, w string) bool {
	for _, x := range list {
		if x == w {
			return true
		}
	}
	return false
}

// gitCommandOptions are the git subcommands' options whose value is a shell command git runs.
var gitCommandOptions = map[string]cmdOptSpec{
	"grep":     {short: "O", long: []string{"open-files-in-pager"}},
	"rebase":   {short: "x", long: []string{"exec"}},
	"difftool": {short: "x", long: []string{"extcmd"}},
	"filter-branch": {long: []string{"env-filter", "tree-filter", "index-filter", "parent-filter",
		"msg-filter", "commit-filter", "tag-name-filter"}},
	// The program run at the other end of a transport, through the shell for a local or ssh
	// remote: git clone -u 'curl x' /some/repo runs curl.
	"clone":      {short: "u", long: []string{"upload-pack"}},
	"fetch":      {long: []string{"upload-pack"}},
	"pull":       {long: []string{"upload-pack"}},
	"ls-remote":  {long: []string{"upload-pack"}},
	"fetch-pack": {long: []string{"upload-pack", "exec"}},
	"push":       {long: []string{"receive-pack", "exec"}},
	"send-pack":  {long: []string{"receive-pack", "exec"}},
	"archive":    {long: []string{"exec"}},
	// The web server and browser instaweb starts, daemon's access hook, and the browser
	// web--browse (help -w's) runs.
	"instaweb":    {short: "db", long: []string{"httpd", "browser"}},
	"daemon":      {long: []string{"access-hook"}},
	"web--browse": {short: "bt", long: []string{"browser", "tool", "cmd"}},
}

// gitCommands are the commands git runs as its own whatever aliases say: its builtins (git
// --list-cmds=builtins, 2.39) and the programs its core package installs beside them (bisect,
// submodule, mergetool, …). Any other subcommand may be an alias (git runs one only for a
// name it has no command of) or another program. Builtins of later gits are not here: an
// older git would run an alias of that name.
var gitCommands = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range strings.Fields(`
add add--interactive am annotate apply archive bisect bisect--helper blame branch
bugreport bundle cat-file check-attr check-ignore check-mailmap check-ref-format
checkout checkout--worker checkout-index cherry cherry-pick clean clone column commit
commit-graph commit-tree config count-objects credential credential-cache
credential-cache--daemon credential-store daemon describe diagnose diff diff-files
diff-index diff-tree difftool difftool--helper env--helper fast-export fast-import fetch
fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch fsck
fsck-objects fsmonitor--daemon gc get-tar-commit-id grep hash-object help hook
http-backend http-fetch http-push imap-send index-pack init init-db instaweb
interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge
merge-base merge-file merge-index merge-octopus merge-one-file merge-ours
merge-recursive merge-recursive-ours merge-recursive-theirs merge-resolve merge-subtree
merge-tree mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects
pack-redundant pack-refs patch-id pickaxe prune prune-packed pull push quiltimport
range-diff read-tree rebase receive-pack reflog remote remote-ext remote-fd remote-ftp
remote-ftps remote-http remote-https repack replace request-pull rerere reset restore
rev-list rev-parse revert rm send-pack sh-i18n--envsubst shell shortlog show show-branch
show-index show-ref sparse-checkout stage stash status stripspace submodule
submodule--helper subtree switch symbolic-ref tag unpack-file unpack-objects
update-index update-ref update-server-info upload-archive upload-archive--writer
upload-pack var verify-commit verify-pack verify-tag version web--browse whatchanged
worktree write-tree
	`) {
		m[c] = true
	}
	return m
}()

// nestedGitCommands reads the commands a git subcommand runs: rebase --exec, difftool
// --extcmd, filter-branch's filters, and the command lines of bisect run and submodule
// foreach.
func (w *walker) nestedGitCommands(sb *sub, ws []word) {
	i := 0
	for ; i < len(ws) && ws[i].static && strings.HasPrefix(ws[i].val, "-"); i++ {
		switch ws[i].val {
		case "-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--exec-path":
			i++ // its value is the next word
		}
	}
	if i >= len(ws) {
		return
	}
	if !ws[i].static || ws[i].glob || !gitCommands[ws[i].val] {
		// A subcommand git does not ship is an alias (from -c alias.p=push, GIT_CONFIG_*, or a
		// config file no word shows) or a git-NAME program: what it runs is not the word.
		sb.opaque = true
		return
	}
	sub, rest := ws[i].val, ws[i+1:]
	switch {
	case sub == "bisect" && len(rest) > 0 && rest[0].static && rest[0].val == "run":
		w.nestedArgv(sb, rest[1:], nil, ShellSh)
	case sub == "submodule":
		for j, a := range rest {
			if a.static && a.val == "foreach" {
				// --recursive is skipped as an option; it runs in each submodule's dir.
				w.inOtherDirs(true, func() { w.nestedArgv(sb, rest[j+1:], nil, ShellSh) })
				break
			}
		}
	default:
		if spec, ok := gitCommandOptions[sub]; ok {
			w.optionValues(sb, rest, spec, func(v string) { w.nestedScript(sb, v, ShellSh) })
		}
	}
	// An ext:: remote is a command git runs (where protocol.ext.allow lets it), in git's own
	// quoting: not read here, so it may be any command.
	for _, a := range rest {
		if strings.HasPrefix(a.val, "ext::") {
			sb.opaque = true
		}
	}
}

// hasCommandOptions reports a program nestedCommandOptions reads.
func hasCommandOptions(name string) bool {
	_, p := cmdOptPrograms[name]
	_, l := commandLanguages[name]
	return p || l || name == "less" || name == "more" || name == "sqlite3"
}
