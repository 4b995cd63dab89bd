package classifier

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Path facts: which files the recognised commands of a line read and write, so the policy
// can apply Read and Edit rules and the protected-path checks to Bash as to the file tools.
// Paths are lexical (absolute, cleaned, ~ expanded); symlinks are the daemon's to resolve, as
// the caller. What cannot be known statically sets PathsIncomplete; the sandbox enforces the
// rules whatever the classifier saw.

// Access values of PathUse.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// maxPaths bounds the paths one line reports; beyond it the list is incomplete.
const maxPaths = 256

// maxDirs bounds the directories relative paths are joined to after cds.
const maxDirs = 4

// pathKind says how a command's operands are used.
type pathKind uint8

const (
	pkRead    pathKind = iota // every operand is read
	pkWrite                   // every operand is written
	pkPattern                 // first operand is a pattern/script unless given by option, the rest read
	pkCopy                    // last operand (or -t DIR) written, the rest read
	pkMove                    // every operand written (sources are removed), -t DIR too
	pkLink                    // last operand (or -t DIR) written
	pkMode                    // first operand a mode/owner (unless --reference), the rest written
	pkFind                    // leading operands are roots, read
	pkUniq                    // [input [output]]
	pkDD                      // if= read, of= written
	pkInterp                  // first operand a script, read, unless code is given by option
	pkFetch                   // curl/wget: their options' files (fetch.go)
	pkNone                    // no operand is a file; only fileOpts' values are read (date -f)
	pkXXD                     // xxd: [infile [outfile]], options as words of their own
)

type pathSpec struct {
	kind pathKind
	// opts' longArg must hold only options whose argument is required: one with an optional
	// argument (grep --color[=WHEN]) takes none unless given with =, and reading the next
	// word as its value would hide that word, a file, from the facts.
	opts optSpec
	// patOpts are the options that give the pattern or script (grep -e, sed -e, jq -f ...),
	// so that the first operand is a file; fileOpts' values are files read.
	patOpts, fileOpts string
	patLong, fileLong []string
}

var pathSpecs map[string]pathSpec

func init() {
	rd := pathSpec{kind: pkRead, opts: optSpec{permute: true}}
	wr := pathSpec{kind: pkWrite, opts: optSpec{permute: true}}
	pathSpecs = map[string]pathSpec{
		"cat": rd, "tac": rd, "nl": rd, "less": rd, "more": rd, "cmp": rd,
		"file": rd, "stat": rd, "ls": rd, "strings": rd, "od": rd, "xxd": {kind: pkXXD},
		"md5sum": rd, "sha1sum": rd, "sha224sum": rd, "sha256sum": rd, "sha384sum": rd, "sha512sum": rd,
		"b2sum": rd, "cksum": rd, "unexpand": rd,
		"readlink": rd, "realpath": rd, "rev": rd, "fold": rd, "expand": rd, "base64": rd,
		// Options whose value is a file the command reads: its lines are names (--files0-from),
		// patterns (-X) or a format (hexdump -f), and the error for each bad one prints it.
		"wc": {kind: pkRead, opts: optSpec{longArg: []string{"files0-from", "total"}, permute: true}, fileLong: []string{"files0-from"}},
		"du": {kind: pkRead, opts: optSpec{shortArg: "dtBX", longArg: []string{"files0-from", "exclude-from", "exclude", "max-depth", "threshold", "block-size", "time-style"}, permute: true},
			fileOpts: "X", fileLong: []string{"files0-from", "exclude-from"}},
		"diff": {kind: pkRead, opts: optSpec{shortArg: "xCDFILSUWX", longArg: []string{"from-file", "to-file", "exclude-from", "exclude", "starting-file", "ignore-matching-lines", "ifdef", "show-function-line", "label", "width", "tabsize", "horizon-lines", "palette",
			"line-format", "old-line-format", "new-line-format", "unchanged-line-format", "old-group-format", "new-group-format", "unchanged-group-format", "changed-group-format"}, permute: true},
			fileOpts: "X", fileLong: []string{"from-file", "to-file", "exclude-from"}},
		"hexdump": {kind: pkRead, opts: optSpec{shortArg: "efns", permute: true}, fileOpts: "f"},
		// tree prints the comments of an --infofile and the HTML --hintro/--houtro files.
		"tree": {kind: pkRead, opts: optSpec{shortArg: "LPIHTo", longArg: []string{"infofile", "gitfile", "hintro", "houtro", "charset", "filelimit", "timefmt", "sort"}, longFlag: []string{"info"}, permute: true},
			fileLong: []string{"infofile", "gitfile", "hintro", "houtro"}},
		"date": {kind: pkNone, opts: optSpec{shortArg: "dfrs", shortOpt: "I", longArg: []string{"date", "file", "reference", "set", "rfc-3339"}, permute: true},
			fileOpts: "fr", fileLong: []string{"file", "reference"}},
		"column": rd, "comm": rd, "paste": rd, "join": rd, "source": rd, ".": rd,
		"head": {kind: pkRead, opts: optSpec{shortArg: "nc", longArg: []string{"lines", "bytes"}, permute: true, countWord: true}},
		"tail": {kind: pkRead, opts: optSpec{shortArg: "ncs", longArg: []string{"lines", "bytes", "pid", "sleep-interval", "max-unchanged-stats"}, permute: true, countWord: true}},
		"cut":  {kind: pkRead, opts: optSpec{shortArg: "bcdf", longArg: []string{"bytes", "characters", "delimiter", "fields", "output-delimiter"}, permute: true}},
		"sort": {kind: pkRead, opts: optSpec{shortArg: "kotyST", longArg: []string{"key", "output", "field-separator", "buffer-size", "temporary-directory", "parallel", "files0-from", "compress-program", "sort", "random-source", "batch-size"}, permute: true},
			fileLong: []string{"files0-from", "random-source"}},
		"grep": {kind: pkPattern, opts: optSpec{shortArg: "efmABCdDX", longArg: []string{"regexp", "file", "max-count", "after-context", "before-context", "context", "label", "include", "exclude", "exclude-from", "exclude-dir", "devices", "directories", "binary-files", "group-separator"}, longFlag: []string{"binary"}, permute: true},
			patOpts: "ef", patLong: []string{"regexp", "file"}, fileOpts: "f", fileLong: []string{"file", "exclude-from"}},
		// rg's -d (--max-depth) and the options after "pre-glob" are newer than some rg: one that
		// does not know them stops at them, so reading a value for them never hides a file.
		"rg": {kind: pkPattern, opts: optSpec{shortArg: "efgmrABCEMtTjd", longArg: []string{"regexp", "file", "glob", "iglob", "max-count", "after-context", "before-context", "context", "encoding", "max-columns", "type", "type-not", "threads", "max-depth", "maxdepth", "sort", "sortr", "type-add", "type-clear", "ignore-file", "replace", "color", "colors", "path-separator", "pre", "pre-glob",
			"context-separator", "field-context-separator", "field-match-separator", "dfa-size-limit", "regex-size-limit", "max-filesize", "engine", "hostname-bin", "hyperlink-format", "generate"}, permute: true, exactLong: true},
			patOpts: "ef", patLong: []string{"regexp", "file"}, fileOpts: "f", fileLong: []string{"file", "ignore-file"}},
		"jq": {kind: pkPattern, opts: optSpec{shortArg: "fL", longArg: []string{"from-file", "indent", "library-path"}, permute: true, exactLong: true},
			patOpts: "f", patLong: []string{"from-file"}, fileOpts: "fL", fileLong: []string{"from-file"}},
		"sed": {kind: pkPattern, opts: optSpec{shortArg: "eflV", shortOpt: "i", longArg: []string{"expression", "file", "line-length"}, permute: true},
			patOpts: "ef", patLong: []string{"expression", "file"}, fileOpts: "f", fileLong: []string{"file"}},
		"find": {kind: pkFind},
		"uniq": {kind: pkUniq, opts: optSpec{shortArg: "fsw", longArg: []string{"skip-fields", "skip-chars", "check-chars"}, permute: true}},
		// --backup, --reflink and --preserve take a value only after =, install -C and mkdir -Z
		// none: a value read for them hides a file.
		"cp":      {kind: pkCopy, opts: optSpec{shortArg: "tS", longArg: []string{"target-directory", "suffix", "sparse", "no-preserve"}, permute: true}},
		"install": {kind: pkCopy, opts: optSpec{shortArg: "tSmog", longArg: []string{"target-directory", "suffix", "mode", "owner", "group", "strip-program"}, longFlag: []string{"strip"}, permute: true}},
		"mv":      {kind: pkMove, opts: optSpec{shortArg: "tS", longArg: []string{"target-directory", "suffix"}, permute: true}},
		"ln":      {kind: pkLink, opts: optSpec{shortArg: "tS", longArg: []string{"target-directory", "suffix"}, permute: true}},
		"rm":      wr, "rmdir": wr, "unlink": wr, "shred": wr,
		"mkdir":    {kind: pkWrite, opts: optSpec{shortArg: "m", longArg: []string{"mode"}, permute: true}},
		"touch":    {kind: pkWrite, opts: optSpec{shortArg: "drt", longArg: []string{"date", "reference", "time"}, permute: true}, fileOpts: "r", fileLong: []string{"reference"}},
		"truncate": {kind: pkWrite, opts: optSpec{shortArg: "sr", longArg: []string{"size", "reference"}, permute: true}, fileOpts: "r", fileLong: []string{"reference"}},
		"tee":      wr,
		"chmod":    {kind: pkMode, opts: optSpec{longArg: []string{"reference"}, permute: true}},
		"chown":    {kind: pkMode, opts: optSpec{longArg: []string{"reference", "from"}, permute: true}},
		"chgrp":    {kind: pkMode, opts: optSpec{longArg: []string{"reference"}, permute: true}},
		"chacl":    {kind: pkMode, opts: optSpec{permute: true}},
		"setfacl":  {kind: pkWrite, opts: optSpec{shortArg: "mMxX", longArg: []string{"modify", "modify-file", "remove", "remove-file", "set", "set-file"}, permute: true}},
		"dd":       {kind: pkDD},
		"python":   {kind: pkInterp, opts: optSpec{shortArg: "WXQ"}, patOpts: "cm"},
		"python3":  {kind: pkInterp, opts: optSpec{shortArg: "WXQ"}, patOpts: "cm"},
		"node":     {kind: pkInterp, opts: optSpec{shortArg: "r", longArg: []string{"require", "import", "loader"}, exactLong: true}, patOpts: "ep", patLong: []string{"eval", "print"}},
		"perl":     {kind: pkInterp, opts: optSpec{shortArg: "IMm"}, patOpts: "eE"},
		"ruby":     {kind: pkInterp, opts: optSpec{shortArg: "Ir"}, patOpts: "e"},
		"php":      {kind: pkInterp, opts: optSpec{shortArg: "dc"}, patOpts: "rR"},
		"lua":      {kind: pkInterp, opts: optSpec{shortArg: "l"}, patOpts: "e"},
		// curl's and wget's options with a value, as their --help lists them; curl's longFlag are
		// flags whose name starts one with a value (--head, --header).
		"curl": {kind: pkFetch, opts: optSpec{shortArg: "bcdemortuwxyzACDEFHKPQTUXY", longArg: []string{"abstract-unix-socket", "alt-svc", "aws-sigv4", "cacert", "capath", "cert", "cert-type", "ciphers", "config", "connect-timeout", "connect-to", "continue-at", "cookie", "cookie-jar", "create-file-mode", "crlfile", "curves", "data", "data-ascii", "data-binary", "data-raw", "data-urlencode", "delegation", "dns-interface", "dns-ipv4-addr", "dns-ipv6-addr", "dns-servers", "doh-url", "dump-header", "egd-file", "engine", "etag-compare", "etag-save", "expect100-timeout", "form", "form-string", "ftp-account", "ftp-alternative-to-user", "ftp-method", "ftp-port", "ftp-ssl-ccc-mode", "happy-eyeballs-timeout-ms", "header", "help", "hostpubmd5", "hostpubsha256", "hsts", "interface", "json", "keepalive-time", "key", "key-type", "krb", "libcurl", "limit-rate", "local-port", "login-options", "mail-auth", "mail-from", "mail-rcpt", "max-filesize", "max-redirs", "max-time", "netrc-file", "noproxy", "oauth2-bearer", "output", "output-dir", "parallel-max", "pass", "pinnedpubkey", "preproxy", "proto", "proto-default", "proto-redir", "proxy", "proxy-cacert", "proxy-capath", "proxy-cert", "proxy-cert-type", "proxy-ciphers", "proxy-crlfile", "proxy-header", "proxy-key", "proxy-key-type", "proxy-pass", "proxy-pinnedpubkey", "proxy-service-name", "proxy-tls13-ciphers", "proxy-tlsauthtype", "proxy-tlspassword", "proxy-tlsuser", "proxy-user", "proxy1.0", "pubkey", "quote", "random-file", "range", "rate", "referer", "request", "request-target", "resolve", "retry", "retry-delay", "retry-max-time", "sasl-authzid", "service-name", "socks4", "socks4a", "socks5", "socks5-gssapi-service", "socks5-hostname", "speed-limit", "speed-time", "stderr", "telnet-option", "tftp-blksize", "time-cond", "tls-max", "tls13-ciphers", "tlsauthtype", "tlspassword", "tlsuser", "trace", "trace-ascii", "unix-socket", "upload-file", "url", "url-query", "user", "user-agent", "write-out"},
			longFlag: []string{"crlf", "ftp-ssl-ccc", "head", "netrc", "parallel", "socks5-gssapi"}, permute: true}},
		"wget": {kind: pkFetch, opts: optSpec{shortArg: wgetShortArg, longArg: []string{"accept", "accept-regex", "append-output", "backups", "base", "bind-address", "body-data", "body-file", "ca-certificate", "ca-directory", "certificate", "certificate-type", "ciphers", "compression", "config", "connect-timeout", "crl-file", "cut-dirs", "default-page", "directory-prefix", "dns-timeout", "domains", "exclude-directories", "exclude-domains", "execute", "follow-tags", "ftp-password", "ftp-user", "header", "http-password", "http-user", "ignore-tags", "include-directories", "input-file", "level", "limit-rate", "load-cookies", "local-encoding", "method", "output-document", "output-file", "password", "pinnedpubkey", "post-data", "post-file", "prefer-family", "private-key", "private-key-type", "progress", "proxy-password", "proxy-user", "quota", "read-timeout", "referer", "regex-type", "reject", "reject-regex", "rejected-log", "remote-encoding", "report-speed", "restrict-file-names", "retry-on-http-error", "save-cookies", "secure-protocol", "start-pos", "timeout", "tries", "use-askpass", "user", "user-agent", "wait", "waitretry", "warc-dedup", "warc-file", "warc-header", "warc-max-size", "warc-tempdir"}, permute: true}},
	}
	pathSpecs["egrep"], pathSpecs["fgrep"] = pathSpecs["grep"], pathSpecs["grep"]
	for n := range treeSearchers {
		pathSpecs[n] = pathSpecs["grep"]
	}
	for _, sh := range []string{"sh", "bash", "zsh", "dash", "ksh"} {
		pathSpecs[sh] = pathSpec{kind: pkInterp, opts: optSpec{shortArg: "oO", longArg: []string{"rcfile", "init-file"}}, patOpts: "cs"}
	}
}

// pathCollector gathers one line's path facts.
type pathCollector struct {
	opts       Options
	out        []PathUse
	incomplete bool
	// globs are the bounded glob words, as absolute patterns (Classification.Globs).
	globs []string
	// unbounded: some path it missed may lie anywhere, not only under a directory the line
	// names (see Classification.PathsUnbounded).
	unbounded bool
	// symlinks: a command made symbolic links, whose own uses of out are linkUses
	// (Classification.symlinks).
	symlinks bool
	linkUses int
	// tree marks the reads put meanwhile as whole-tree reads (PathUse.Tree); treeWrite the
	// writes as whole-tree writes.
	tree, treeWrite bool
	// worktree marks the writes put meanwhile as a git worktree's (PathUse.Worktree).
	worktree bool
	// treeOf marks the writes put meanwhile as landings of that source (PathUse.TreeOf).
	treeOf string
	// unpacked marks the writes put meanwhile as PathUse.Unpacked.
	unpacked bool
	// mentioning marks the paths put meanwhile as mentions (PathUse.Mention); mentions counts
	// them, up to maxMentions.
	mentioning bool
	mentions   int
	// alternative marks the paths put meanwhile as alternatives (PathUse.Alternative).
	alternative bool
	// vals and ws are scratch space for one command's argument values and operand words.
	vals []string
	ws   []word
	// cdVars: the line may set CDPATH, zsh's cdpath or HOME (cdVarNamed), so where a cd goes
	// and what ~ is are not known.
	cdVars bool
	// curlrcVars: the line may name where curl finds its .curlrc (curlrcVarNamed).
	curlrcVars bool
	// gitUnseen: a git read names paths the line does not show (Classification.GitObjectsUnseen).
	gitUnseen bool
	// redirectsIncomplete: some write redirection's file is not among out
	// (Classification.RedirectsIncomplete).
	redirectsIncomplete bool
}

// cdPathFree reports whether a cd to t goes there whatever CDPATH holds: a path from / or
// from the current dir.
func cdPathFree(t string) bool {
	return path.IsAbs(t) || t == "." || t == ".." || strings.HasPrefix(t, "./") || strings.HasPrefix(t, "../")
}

// cdVarNamed reports CDPATH, zsh's cdpath and HOME written as a name rather than expanded ($HOME,
// ${HOME}): set by an assignment, export, read, printf -v, a for loop, ... CDPATH moves a
// relative cd (`CDPATH=~ cd .ssh` goes to ~/.ssh), HOME is what ~ and a bare cd mean
// (`HOME=~/.ssh; cat ~/id_rsa`). A name merely mentioned errs toward unknown.
func cdVarNamed(src string) bool {
	if !strings.Contains(src, "HOME") && !strings.Contains(src, "CDPATH") && !strings.Contains(src, "cdpath") && !strings.Contains(src, "cdable") {
		return false // most lines: no regexp
	}
	return cdVarName.MatchString(src)
}

// cdVarName also finds bash's cdable_vars option, with which `cd o` goes where $o names.
var cdVarName = regexp.MustCompile(`(^|[^$\w{/.-])(CDPATH|cdpath|HOME|cdable_vars)\b`)

// add records p (a static word) with access for cmd, against the directories dirs (nil:
// Options.Cwd); unknownDir says a non-static cd came before.
func (pc *pathCollector) add(p, access, cmd string, dirs []string, unknownDir bool) {
	if p == "" || p == "-" {
		return
	}
	if dotDotAfterName(p) || len(dirs) > 0 && !path.IsAbs(p) && hasDotDot(p) {
		// The kernel takes .. from where a symlink leads, not from the name before it: with
		// link -> /home/u/other, `cat link/../secret/f` reads /home/u/secret/f, which the
		// cleaned name (secret/f) does not show. After a cd (bash's is logical), a leading .. is
		// taken from the physical directory too. The symlinks are not known here.
		pc.unknown()
	}
	if len(p) > 1 && p[0] == '=' && (pc.opts.Shell == ShellZsh || pc.opts.Shell == shellAny) {
		// zsh's EQUALS: =NAME is the path of the command NAME on $PATH, wherever that is
		// (`cat =deploy-key` reads ~/bin/deploy-key). A quoted '=x' errs toward unknown.
		pc.unknown()
		return
	}
	if strings.HasPrefix(p, "~") {
		if pc.opts.Home == "" || pc.cdVars || !(p == "~" || strings.HasPrefix(p, "~/")) {
			pc.unknown() // ~user, or no home known
			return
		}
		p = pc.opts.Home + p[1:]
	}
	if path.IsAbs(p) {
		pc.put(p, access, cmd)
		return
	}
	if unknownDir {
		pc.unknown()
	}
	if len(dirs) == 0 {
		if pc.opts.Cwd == "" {
			pc.unknown()
			return
		}
		dirs = []string{pc.opts.Cwd}
	}
	for _, d := range dirs {
		pc.put(strings.TrimSuffix(d, "/")+"/"+p, access, cmd)
	}
}

// runtimeWord marks the list incomplete by a word where a path goes that is known only when
// the line runs: bounded when it is a glob under a directory the line names (`*.go`,
// `+(a|b).go`), unbounded otherwise.
func (pc *pathCollector) runtimeWord(a word, sb *sub) {
	if a.glob && !sb.dirsUnknown && pc.inSession(sb.dirs) && (a.static && bracesBounded(a, pc.opts) || a.extGlob && boundedExtGlob(a.src)) {
		pc.incomplete = true
		pc.glob(a, sb.dirs)
		return
	}
	pc.unknown()
}

// maxGlobs bounds the glob patterns of one line; past it the paths are unbounded.
const maxGlobs = 32

// glob records the patterns of a bounded glob word a, taken against dirs (nil:
// Options.Cwd), in Classification.Globs.
func (pc *pathCollector) glob(a word, dirs []string) {
	pats := []string{extGlobQuotes.Replace(a.src)}
	if a.static {
		vals, ok := braceVals(a, pc.opts)
		if !ok {
			pc.unknown()
			return
		}
		pats = vals
	}
	if len(dirs) == 0 {
		dirs = []string{pc.opts.Cwd}
	}
	for _, d := range dirs {
		if d == "" {
			pc.unknown()
			return
		}
		for _, p := range pats {
			g := strings.TrimSuffix(d, "/") + "/" + p
			if slices.Contains(pc.globs, g) {
				continue
			}
			if len(pc.globs) >= maxGlobs {
				pc.unknown()
				return
			}
			pc.globs = append(pc.globs, g)
		}
	}
}

// inSession reports whether dirs (nil: Options.Cwd) all lie in the cwd or a WorkDir. A glob
// is bounded by the dir it starts in only there: after a cd out of the session's dirs
// (`cd ~/other && cat *`) what it matches lies outside them, where no rule's match is known.
func (pc *pathCollector) inSession(dirs []string) bool {
	if len(dirs) == 0 {
		return true
	}
	for _, d := range dirs {
		ok := false
		for _, w := range append([]string{pc.opts.Cwd}, pc.opts.WorkDirs...) {
			if w != "" && (d == w || w == "/" || strings.HasPrefix(d, strings.TrimSuffix(w, "/")+"/")) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// boundedExtGlob is boundedGlob of an extended glob's source text, its quotes and backslashes
// dropped (`'/etc/'*(x)` starts at /). One that expands a parameter or a command inside its
// pattern (`@($d|x)`) is not bounded.
func boundedExtGlob(src string) bool {
	return !strings.ContainsAny(src, "$`") && boundedGlob(extGlobQuotes.Replace(src))
}

var extGlobQuotes = strings.NewReplacer(`\`, "", `'`, "", `"`, "")

// bracesBounded reports whether a static word, or each word its braces give, is bounded as
// boundedGlob says (`{a,b}.go` and `x{1..3}` are; `.{.,}/x` is `../x`, `{x,}/etc/passwd` is
// `/etc/passwd`: their text alone shows neither). A brace expansion that cannot be told is not.
func bracesBounded(a word, opts Options) bool {
	vals, ok := braceVals(a, opts)
	if !ok {
		return false
	}
	for _, v := range vals {
		if !boundedGlob(v) {
			return false
		}
	}
	return true
}

// braceVals are the words a static word's brace expansion gives (itself when it has none);
// false when they cannot be told (braceWords).
func braceVals(a word, opts Options) ([]string, bool) {
	ws, ok := braceWords(a, opts)
	if !ok {
		if !a.glob || !strings.Contains(a.src, "{") {
			return []string{a.val}, true // no braces
		}
		if tooManyBraces(a.src) {
			return nil, false // not taken apart: whether they expand is not told
		}
		if w, parsed := parseWord(a.src); parsed && !syntax.SplitBraces(w) {
			return []string{a.val}, true // no braces that expand
		}
		return nil, false
	}
	vals := make([]string, len(ws))
	for i, w := range ws {
		vals[i] = w.val
	}
	return vals, true
}

// braceWords are the words a static word's braces give, each static (a glob still where it
// has one); false when it has no braces that expand, or what they give cannot be told (too
// many, an expansion in one), which the word's other checks then judge.
func braceWords(a word, opts Options) ([]word, bool) {
	if !a.static || !a.glob || a.braced || !strings.Contains(a.src, "{") {
		return nil, false
	}
	exp := expandBraces(a.src, opts)
	if exp == nil {
		return nil, false
	}
	var out []word
	for _, e := range exp {
		for i, v := range e.Words {
			if e.Globs[i] == GlobAny || strings.HasPrefix(v, "~") || strings.HasPrefix(v, "=") {
				return nil, false // expanded again after the braces (~, zsh's =cmd)
			}
			out = append(out, word{val: v, src: v, static: true, glob: e.Globs[i] == GlobPattern, braced: true})
		}
	}
	return out, true
}

// mayNameDotEntry reports a glob word (or one its braces give) with a segment that starts with
// a dot and matches more than one name (.g*, .[g]it, {.,}g*): a write through it may be one of
// .git's, which the word's text never names.
func mayNameDotEntry(a word, opts Options) bool {
	vals, ok := braceVals(a, opts)
	if !ok {
		return true
	}
	for _, v := range vals {
		for seg := range strings.SplitSeq(v, "/") {
			// A literal dot dir (.next/*) is a path of its own, which the checks see.
			if len(seg) > 1 && seg[0] == '.' && seg != ".." && strings.ContainsAny(seg, "*?[") {
				return true
			}
		}
	}
	return false
}

// boundedGlob reports a glob that matches only names under the directory it starts in (the
// cwd, or one a cd before it names): relative, no .., and no brace or extended glob
// alternative that starts elsewhere (`cat {/etc/x,y}`, `cat @(/etc/x|y)`); zsh's =cmd and the
// ~ forms start elsewhere too.
func boundedGlob(p string) bool {
	if p == "" || strings.Contains(p, "..") {
		return false
	}
	for i := 0; i < len(p); i++ {
		// A word, or a brace or extended glob alternative, starting at / ~ or = names a
		// place of its own.
		if (i == 0 || strings.IndexByte("{,(|", p[i-1]) >= 0) && strings.IndexByte("/~=", p[i]) >= 0 {
			return false
		}
	}
	return true
}

// dotDotAfterName reports a .. component that follows a named one (a/.., not ../a).
func dotDotAfterName(p string) bool {
	named := false
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return true
			}
		default:
			named = true
		}
	}
	return false
}

// hasDotDot reports a .. component in p.
func hasDotDot(p string) bool {
	return p == ".." || strings.HasPrefix(p, "../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "/../")
}

// procLink reports a path through one of /proc's magic links (/proc/PID/root, cwd, exe, fd/N,
// map_files/..., of a task too): it names a file elsewhere, /proc/self/root/home/u/.env being
// /home/u/.env, which the owner's resolution does not follow under /proc.
func procLink(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	i := 1 // past the pid, self or thread-self
	if i+1 < len(parts) && parts[i] == "task" {
		i += 2
	}
	if i >= len(parts) {
		return false
	}
	switch parts[i] {
	case "root", "cwd", "exe", "fd", "map_files":
		return true
	}
	return false
}

// put records the absolute path raw, cleaned, and raw itself when cleaning changed it.
func (pc *pathCollector) put(raw, access, cmd string) {
	p := path.Clean(raw)
	if raw == p {
		raw = ""
	}
	if procLink(p) {
		pc.unknown()
	}
	tree := pc.tree && access == AccessRead || pc.treeWrite && access == AccessWrite
	treeOf := ""
	if access == AccessWrite {
		treeOf = pc.treeOf
	}
	for _, u := range pc.out {
		// A mention adds nothing to the same path a table already put (its Mention is false).
		// An alternative adds nothing to a path already put as read there.
		if u.Path == p && u.Raw == raw && u.Access == access && u.Cmd == cmd && (u.Tree == tree || pc.alternative && !u.Alternative) && u.Worktree == pc.worktree && u.TreeOf == treeOf && u.Unpacked == (pc.unpacked && access == AccessWrite) &&
			(u.Mention == pc.mentioning || !u.Mention) && (u.Alternative == pc.alternative || !u.Alternative) {
			return
		}
	}
	if len(pc.out) >= maxPaths {
		pc.unknown()
		return
	}
	pc.out = append(pc.out, PathUse{Path: p, Raw: raw, Access: access, Cmd: cmd, Tree: tree, Mention: pc.mentioning, Alternative: pc.alternative, Worktree: pc.worktree, TreeOf: treeOf, Unpacked: pc.unpacked && access == AccessWrite})
}

// unknown marks the list incomplete by a path that may lie anywhere.
func (pc *pathCollector) unknown() {
	pc.incomplete, pc.unbounded = true, true
}

// word records a word where a path goes: a static, glob-free one as a path, anything else
// makes the list incomplete.
func (pc *pathCollector) word(a word, access, cmd string, sb *sub) {
	if a.procSubst {
		return // a pipe: what its command reads are that command's paths
	}
	if ws, ok := braceWords(a, pc.opts); ok {
		// Each word the braces give, as bash gives it: rm -rf .{pytest,mypy}_cache names two
		// dirs, .gi{t,} names .git.
		for _, w := range ws {
			pc.word(w, access, cmd, sb)
		}
		return
	}
	if !a.static || a.glob {
		if a.static && access == AccessWrite && mayNameDotEntry(a, pc.opts) {
			// rm -rf .g*: what it writes may be a repository's git dir, or another dot dir
			// the protected paths name, where no path the decision sees shows it.
			pc.unknown()
		} else {
			pc.runtimeWord(a, sb)
		}
		if a.static && access == AccessWrite && (removers[cmd] || cmd == "find") {
			// rm -rf me/*, find me/* -delete: what it removes lies in the dir the glob starts in, as that dir
			// leads (a link made by an earlier call: ln -s . me). Put as "me/", which the
			// decision resolves through the link (Executor: the critical-path check). After a
			// cd (cd me && rm -rf *), the dir it starts in is where the cd went: "./".
			dir, _ := splitGlob(a.val)
			if dir == "" && len(sb.dirs) > 0 {
				dir = "./"
			}
			if dir != "" && !strings.ContainsAny(dir, "*?[") {
				pc.add(dir, access, cmd, sb.dirs, sb.dirsUnknown)
			}
		}
		return
	}
	pc.add(a.val, access, cmd, sb.dirs, sb.dirsUnknown)
}

// removers are the commands whose written operands they remove.
var removers = map[string]bool{"rm": true, "rmdir": true, "unlink": true, "shred": true}

// bareOp is a redirection's operator without the fd it names: 3< and {fd}< are <.
func bareOp(op string) string {
	if strings.HasPrefix(op, "{") {
		if i := strings.IndexByte(op, '}'); i >= 0 {
			return op[i+1:]
		}
	}
	return strings.TrimLeft(op, "0123456789")
}

// subPaths adds the paths of one simple command: its file redirections and, for a
// recognised command, its file operands.
func (pc *pathCollector) subPaths(sb *sub, denyPrefix []string) {
	for _, r := range sb.redirs {
		op := bareOp(r.Op)
		t := r.Target
		if t == "" {
			t = r.tilde
		}
		switch {
		case r.Write:
			// A write redirect's unknown target leaves the list incomplete and says so
			// (redirectsIncomplete), not unbounded: that one says some read may lie anywhere,
			// and the kernel holds what a write reaches.
			was, wasUnbounded := pc.incomplete, pc.unbounded
			pc.incomplete = false
			if t == "" {
				pc.unknown()
			} else {
				pc.add(t, AccessWrite, "redirect", sb.dirs, sb.dirsUnknown)
			}
			pc.redirectsIncomplete = pc.redirectsIncomplete || pc.incomplete
			pc.incomplete, pc.unbounded = pc.incomplete || was, wasUnbounded
		case op == "<":
			if r.procSubst {
				continue // a pipe: what its command reads are that command's paths
			}
			if t == "" {
				pc.unknown()
				continue
			}
			pc.add(t, AccessRead, "redirect", sb.dirs, sb.dirsUnknown)
		}
	}
	k := len(sb.args) - len(denyPrefix)
	for i := 0; i < len(sb.args) && i <= k; i++ {
		if a := sb.args[i]; a.static && (baseName(a.val) == "xargs" || baseName(a.val) == "parallel" || baseName(a.val) == "sem") {
			// The command gets the names xargs or parallel reads (stdin, -a FILE) as operands:
			// `echo ~/.ssh/id_rsa | xargs cat` reads a file no word names.
			pc.unknown()
			if sb.listedIn != "" && k < len(sb.args) && sb.args[k].static && removers[baseName(sb.args[k].val)] {
				// ls | xargs rm -rf: the names are the listed dir's entries, so what goes lies
				// in that dir as it leads (cd me && ls | xargs rm -rf, me a link to the cwd),
				// put as rm -rf me/* puts it.
				pc.add(strings.TrimSuffix(sb.listedIn, "/")+"/", AccessWrite, baseName(sb.args[k].val), sb.dirs, sb.dirsUnknown)
			}
		}
	}
	if len(sb.args) == 0 || k < 0 || k >= len(sb.args) || !sb.args[k].static {
		return
	}
	if k > 0 && wrapperChdir(sb.args[:k]) {
		// env -C DIR and sudo -D DIR run the command in DIR: its relative paths are DIR's, which
		// the directories tracked for the line are not.
		moved := *sb
		moved.dirsUnknown = true
		sb = &moved
	}
	ws := sb.args[k:]
	name := baseName(ws[0].val)
	if name == "cd" || name == "pushd" {
		if pc.cdVars {
			pc.unknown() // CDPATH or HOME may be set: where it goes is not known
		}
		if t, ok := cdTarget(ws); ok && pc.opts.Unconfined && !cdPathFree(t) && !strings.HasPrefix(t, "~") {
			pc.unknown() // the agent's environment may hold CDPATH: `cd keys` may go to ~/keys
		}
		if t, ok := cdTarget(ws); ok && t != "" {
			pc.add(t, AccessRead, name, sb.dirs, sb.dirsUnknown)
		} else if !ok {
			// A command after it that reads the directory it is in names no path at all (ls,
			// du): the directory itself is then the one path no fact shows.
			pc.unknown()
		}
		return
	}
	if name == "git" {
		pc.gitPaths(sb, ws[1:])
		pc.globWords(sb, ws[1:])
		return
	}
	for _, f := range pkgConfigWrittenBy(name, ws[1:]) {
		pc.add(f, AccessWrite, name, sb.dirs, sb.dirsUnknown)
	}
	if name == "script" {
		for _, f := range scriptWrites(ws[1:]) {
			if !harmlessTargets[f] { // script -qc CMD /dev/null: a pty, no log
				pc.add(f, AccessWrite, name, sb.dirs, sb.dirsUnknown)
			}
		}
	}
	if name == "kubectl" && len(ws) > 2 && ws[1].val == "config" && ws[2].val == "view" {
		// It prints the config, credentials too with --raw: a read of it.
		pc.add("~/.kube/config", AccessRead, name, sb.dirs, sb.dirsUnknown)
	}
	spec, ok := pathSpecs[name]
	before, linked := len(pc.out), pc.symlinks
	pc.symlinks = unpacksLinks[name] // operands decides for ln, cp and mv
	if pc.opts.Unconfined || pc.opts.MentionReads {
		pc.mentionsOf(sb, name, ws[1:], !ok || spec.kind == pkInterp)
	}
	if ok {
		pc.operands(sb, name, spec, ws[1:])
		pc.globWords(sb, ws[1:])
	}
	if pc.opts.Unconfined {
		pc.unpacks(sb, name, ws[1:])
		pc.compresses(sb, name, ws[1:])
	}
	if pc.symlinks {
		pc.linkUses += len(pc.out) - before
	}
	pc.symlinks = pc.symlinks || linked
}

// globWords puts each glob or brace word of a command's arguments as one that may name paths:
// where an option's value or a pattern goes, bash makes it more words than one, the rest the
// command's operands (`head -n {1,/etc/x} f`, `grep -e ../x/* f`). An operand's own is put
// again, which changes nothing.
func (pc *pathCollector) globWords(sb *sub, args []word) {
	for _, a := range args {
		if a.static && a.glob {
			pc.runtimeWord(a, sb)
		}
	}
}

// writingTrees runs put with the writes it puts marked as whole-tree writes when on.
func (pc *pathCollector) writingTrees(on bool, put func()) {
	pc.treeWrite = on
	put()
	pc.treeWrite = false
}

// treeFlag reports the option that makes a remover or a mode, owner or ACL changer act on
// everything below its operands: rm -r/-R, chmod/chown/chgrp/setfacl -R, chacl -r.
func treeFlag(name string, opts []opt) bool {
	return slices.ContainsFunc(opts, func(o opt) bool {
		switch {
		case o.long:
			return longIs(o.name, "recursive")
		case removers[name]:
			return o.name == "r" || o.name == "R"
		case name == "chacl":
			return o.name == "r"
		}
		return o.name == "R"
	})
}

// gitTreeWriters are the git subcommands that move, remove or rewrite the files their path
// operands name, each a whole tree: git mv, rm -r, clean, restore, checkout -- PATH.
var gitTreeWriters = map[string]bool{"mv": true, "rm": true, "clean": true, "restore": true, "checkout": true}

// gitTreeWrites adds the operands of a gitTreeWriters subcommand (past its options; for
// checkout and restore, a revision too, which names no file here) as whole-tree writes, and
// git mv's sources as tree reads, as mv's are. With no operand, git clean cleans the cwd.
func (pc *pathCollector) gitTreeWrites(sb *sub, sub string, ws []word) {
	var ops []word
	for j := 0; j < len(ws); j++ {
		a := ws[j]
		if !a.static {
			pc.runtimeWord(a, sb)
			continue
		}
		switch v := a.val; {
		case v == "--":
			ops = append(ops, ws[j+1:]...)
			j = len(ws)
		case strings.HasPrefix(v, "--pathspec-from-file"):
			pc.unknown() // the paths are in a file, or on stdin
		case v == "-e" || v == "-s" || v == "-b" || v == "-B" || v == "--orphan" || v == "--source" || v == "--exclude" || v == "--conflict":
			j++ // its value
		case strings.HasPrefix(v, "-"):
		default:
			ops = append(ops, a)
		}
	}
	if len(ops) == 0 && sub == "clean" {
		ops = []word{{val: ".", src: ".", static: true}}
	}
	if slices.ContainsFunc(ops, gitPathspecMagic) || slices.ContainsFunc(ws, func(a word) bool { return a.glob }) {
		// git matches a pathspec's wildcards and magic itself, in the whole worktree and
		// from its top (:/, :(top)): `git checkout evil -- '*.yml'` writes every .yml there.
		// A glob bash leaves as it is when it matches nothing here reaches git so too.
		pc.worktree = true
		pc.writingTrees(true, func() { pc.add(".", AccessWrite, "git", sb.dirs, sb.dirsUnknown) })
		pc.worktree = false
	}
	sources := ops
	if sub == "mv" && len(ops) > 1 {
		pc.word(ops[len(ops)-1], AccessWrite, "git", sb)
		sources = ops[:len(ops)-1]
	}
	pc.writingTrees(true, func() { pc.all(sources, AccessWrite, "git", sb) })
	if sub == "mv" {
		pc.tree = true
		pc.all(sources, AccessRead, "git", sb)
		pc.tree = false
	}
}

// gitWorktreeWrites adds, for a command run outside any sandbox, the worktree a git subcommand
// rewrites from the repository's objects as a whole-tree write (PathUse.Worktree): git checkout
// BRANCH, switch, merge, pull, reset --hard, stash pop, apply, ... write any tracked file, and
// which ones only the repository knows, so `git checkout evil` under Edit(.github/**) may
// replace .github/workflows/ci.yml. git worktree add writes the tree of its path. In the
// sandbox the kernel holds each file's write.
func (pc *pathCollector) gitWorktreeWrites(sb *sub, sub string, ws []word) {
	vals := staticVals(ws)
	first := ""
	if len(ws) > 0 {
		first = ws[0].val
	}
	switch sub {
	case "checkout":
		if slices.Contains(vals, "--") {
			return // git checkout REV -- PATH writes what PATH names (gitTreeWrites)
		}
	case "checkout-index":
		// --prefix=DIR/ puts each file at DIR/PATH (--prefix=.git/hooks/ plants a hook).
		for _, v := range vals {
			if p, ok := strings.CutPrefix(v, "--prefix="); ok && p != "" {
				pc.writingTrees(true, func() { pc.add(path.Dir(p+"x"), AccessWrite, "git", sb.dirs, sb.dirsUnknown) })
			}
		}
	case "switch", "merge", "pull", "cherry-pick", "revert", "rebase", "am", "filter-branch", "mergetool":
	case "reset":
		if !hasFlag(vals, "", "hard", "merge", "keep") {
			return // the index only
		}
	case "read-tree":
		if !hasFlag(vals, "u") {
			return // -u in any cluster (-mu) updates the worktree
		}
	case "subtree", "rerere", "merge-recursive", "merge-ort", "merge-resolve", "merge-octopus", "merge-subtree",
		"merge-index", "merge-one-file":
	case "apply":
		if hasFlag(vals, "", "cached", "check", "stat", "numstat", "summary") && !hasFlag(vals, "", "apply") {
			return
		}
	case "stash":
		switch first {
		case "list", "show", "drop", "clear", "create", "store":
			return
		}
	case "bisect":
		switch first {
		case "log", "visualize", "view", "terms", "help":
			return
		}
	case "sparse-checkout":
		if first == "list" || first == "check-rules" {
			return
		}
	case "submodule":
		switch first {
		case "update", "add", "deinit", "absorbgitdirs", "set-url", "sync":
		default:
			return
		}
	case "worktree":
		switch first {
		case "add":
			pc.gitWorktreeAdd(sb, ws[1:])
		case "move":
			// worktree move SRC DEST puts a checked-out tree at DEST (.vscode, .claude):
			// DEST's landing names are written as a named tree's are.
			var ops []word
			for _, a := range ws[1:] {
				if !a.static {
					pc.unknown()
					return
				}
				if !strings.HasPrefix(a.val, "-") {
					ops = append(ops, a)
				}
			}
			if len(ops) == 2 {
				pc.unpacked = true
				pc.writingTrees(true, func() { pc.word(ops[1], AccessWrite, "git", sb) })
				pc.unpacked = false
			}
		}
		return
	case "clone", "init":
		pc.gitNewRepo(sb, sub, ws)
		return
	default:
		if gitCommands[sub] {
			return
		}
		// An alias (git co evil, with co = checkout in the user's config) or a program on
		// $PATH named git-SUB: what it does is known only when it runs.
	}
	pc.worktree, pc.unpacked = true, true
	pc.writingTrees(true, func() { pc.add(".", AccessWrite, "git", sb.dirs, sb.dirsUnknown) })
	pc.worktree, pc.unpacked = false, false
}

// gitNewRepoOpts are git clone's and git init's options that take a value.
var gitNewRepoOpts = optSpec{shortArg: "objuc", permute: true, longArg: []string{"origin", "branch", "upload-pack",
	"reference", "reference-if-able", "separate-git-dir", "depth", "shallow-since", "shallow-exclude", "config",
	"template", "jobs", "filter", "bundle-uri", "server-option", "object-format", "ref-format", "initial-branch", "shared"}}

// gitNewRepo adds what git clone and git init write: the new repository's dir, named or the
// one clone takes from the source's last name (git clone ../.github makes ./.github), whole
// for clone, and a --separate-git-dir. What git init writes in its dir is git's own
// template, not the line's to choose (--template is a config risk).
func (pc *pathCollector) gitNewRepo(sb *sub, sub string, ws []word) {
	vals := staticVals(ws)
	if len(vals) != len(ws) {
		pc.unknown()
		return
	}
	opts, ops := parseOpts(vals, gitNewRepoOpts)
	bare := false
	pc.writingTrees(true, func() {
		for _, o := range opts {
			switch {
			case o.long && longIs(o.name, "separate-git-dir"):
				pc.add(o.val, AccessWrite, "git", sb.dirs, sb.dirsUnknown)
			case o.long && (longIs(o.name, "bare") || longIs(o.name, "mirror")):
				bare = true
			}
		}
	})
	dir := "."
	switch {
	case sub == "init" && len(ops) > 0:
		dir = ops[0]
	case sub == "clone" && len(ops) > 1:
		dir = ops[1]
	case sub == "clone" && len(ops) == 1:
		dir = cloneDirName(ops[0], bare)
	case sub == "clone":
		return
	}
	pc.unpacked = sub == "clone"
	pc.writingTrees(sub == "clone", func() { pc.add(dir, AccessWrite, "git", sb.dirs, sb.dirsUnknown) })
	pc.unpacked = false
}

// cloneDirName is the dir git clone makes for source when none is named: its last name
// without a trailing /.git or .git (.bundle), and .git added for a bare one; "." when that
// leaves nothing git would take.
func cloneDirName(source string, bare bool) string {
	s := strings.TrimRight(source, "/")
	s = strings.TrimSuffix(strings.TrimRight(strings.TrimSuffix(s, "/.git"), "/"), ".git")
	s = strings.TrimSuffix(s, ".bundle")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		s = s[i+1:]
	}
	if s == "" || s == "." || s == ".." {
		return "."
	}
	if bare {
		s += ".git"
	}
	return s
}

// gitWorktreeAdd adds the tree git worktree add checks out at its path (past its options).
func (pc *pathCollector) gitWorktreeAdd(sb *sub, ws []word) {
	for j := 0; j < len(ws); j++ {
		a := ws[j]
		switch {
		case !a.static:
			pc.unknown()
			return
		case a.val == "-b" || a.val == "-B" || a.val == "--reason":
			j++ // its value
		case a.val == "--":
			if j+1 < len(ws) {
				pc.unpacked = true
				pc.writingTrees(true, func() { pc.word(ws[j+1], AccessWrite, "git", sb) })
				pc.unpacked = false
			}
			return
		case strings.HasPrefix(a.val, "-"):
		default:
			pc.unpacked = true
			pc.writingTrees(true, func() { pc.word(a, AccessWrite, "git", sb) })
			pc.unpacked = false
			return
		}
	}
}

// gitPathspecMagic reports a pathspec git itself matches against the worktree: with a wildcard
// or a magic prefix (:/, :(top), :!, :(glob)).
func gitPathspecMagic(a word) bool {
	return a.static && (strings.ContainsAny(a.val, "*?[") || strings.HasPrefix(a.val, ":"))
}

// unpacksLinks are programs that may put symbolic links (or a dir holding them) under names
// the line goes on to use: archives unpacked, trees synced, a hard link to a link made.
var unpacksLinks = map[string]bool{"link": true, "rsync": true, "tar": true, "gtar": true, "bsdtar": true,
	"cpio": true, "pax": true, "unzip": true, "7z": true, "7za": true}

// wrapperChdir reports whether the wrapper words before a command may change its directory:
// env's -C/--chdir and sudo's -D/--chdir and -R/--chroot, in any cluster or abbreviation (no
// other long option of theirs starts with c), or a word not known until run time.
func wrapperChdir(ws []word) bool {
	for _, a := range ws {
		if !a.static {
			return true
		}
		v := a.val
		switch {
		case v == "--":
		case strings.HasPrefix(v, "--c"):
			return true
		case len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsAny(v[1:], "CDR"):
			return true
		}
	}
	return false
}

// gitReads are the git subcommands that print what the repository holds for a path: a file
// at a revision (show HEAD:f, cat-file -p :f), its history (log -p -- f, blame f), a search of
// a revision (grep x HEAD -- f). A committed file's content lives in .git/objects as well as at
// its path, where the sandbox hides it from a Read deny rule; so the paths these name are
// reads of those paths, and a Read deny rule refuses `git show HEAD:.env` as it refuses
// `cat .env`. What names no path (git log -p alone) is the documented limit.
var gitReads = map[string]bool{
	"show": true, "cat-file": true, "log": true, "whatchanged": true, "diff": true, "diff-tree": true,
	"diff-index": true, "grep": true, "blame": true, "annotate": true, "archive": true,
	"format-patch": true, "range-diff": true, "stash": true,
}

// gitPaths adds the paths a git command names where it reads a repository's copy of a file
// (gitReads): each REV:PATH or :[N:]PATH object name (PATH from the repository's top, taken
// from the cwd, where agents run git), each operand (a path or a revision: which, only git
// knows, so each counts), everything after `--`, and -L's :PATH. A global option that moves
// git elsewhere (-C, --git-dir, --work-tree) leaves the list incomplete.
func (pc *pathCollector) gitPaths(sb *sub, ws []word) {
	i := 0
	moved := false
	for ; i < len(ws); i++ {
		if !ws[i].static {
			pc.unknown()
			pc.gitUnseen = true
			return
		}
		v := ws[i].val
		if !strings.HasPrefix(v, "-") {
			break
		}
		name, _, _ := strings.Cut(v, "=")
		switch {
		case name == "-C" || strings.HasPrefix(v, "-C") || name == "--git-dir" || name == "--work-tree":
			moved = true
			if (v == "-C" || v == "--git-dir" || v == "--work-tree") && i+1 < len(ws) {
				i++ // its value
			}
		case v == "-c" && i+1 < len(ws):
			i++
			pc.gitConfigValue(sb, ws[i])
		case v == "--config-env" || v == "--namespace" || v == "--exec-path":
			i++ // its value
		}
	}
	if moved {
		// Every path below is taken from elsewhere: what the line names is not what git reads.
		pc.unknown()
		pc.gitUnseen = pc.gitUnseen || i < len(ws) && gitReads[ws[i].val]
		return
	}
	if i < len(ws) && gitFileOpts[ws[i].val] != nil {
		pc.gitFileOpts(sb, gitFileOpts[ws[i].val], ws[i+1:], AccessRead)
	}
	if i < len(ws) && !gitDescribed[ws[i].val] && (pc.opts.Unconfined || pc.opts.MentionReads) {
		// A subcommand no table here describes reads and writes the files its words name as
		// any program's (git credential-store --file ~/.bashrc store, git merge-file
		// .git/config a b, git interpret-trailers ~/.ssh/id_rsa): each word is a mention.
		if slices.ContainsFunc(ws[i+1:], func(a word) bool { return strings.HasPrefix(a.val, "--stdin") }) {
			pc.unknown() // hash-object --stdin-paths, update-index --stdin: names come from stdin
		}
		pc.mentionWords(sb, "git", ws[i+1:], true)
	}
	if i < len(ws) {
		// Any subcommand that takes diff options takes --output (reflog, stash show, rev-list,
		// and more with each release): it is read as a file written wherever it appears.
		out := gitOutputOpts[ws[i].val]
		if out == nil {
			out = []string{"--output"}
		}
		pc.gitFileOpts(sb, out, ws[i+1:], AccessWrite)
	}
	if i < len(ws) {
		pc.gitRepoSources(sb, ws[i].val, ws[i+1:])
	}
	if i+2 < len(ws) && ws[i].val == "bundle" && ws[i+1].val == "create" {
		pc.word(ws[i+2], AccessWrite, "git", sb)
	}
	if i < len(ws) && ws[i].val == "config" {
		for _, a := range ws[i+1:] {
			if a.val == "--includes" {
				// A config file's include.path names another file, which git config prints
				// too: `git config -f evil.cfg --includes -l` reads what evil.cfg points at.
				pc.unknown()
			}
		}
		pc.gitConfigFiles(sb, ws[i+1:])
	}
	if i < len(ws) {
		for _, f := range gitConfigWrittenBy(ws[i].val, ws[i+1:]) {
			pc.add(f, AccessWrite, "git", sb.dirs, sb.dirsUnknown)
		}
		if gitTreeWriters[ws[i].val] {
			pc.gitTreeWrites(sb, ws[i].val, ws[i+1:])
		}
		if pc.opts.Unconfined {
			pc.gitWorktreeWrites(sb, ws[i].val, ws[i+1:])
		}
	}
	if i+1 < len(ws) && ws[i].val == "var" {
		for _, a := range ws[i+1:] {
			if a.val == "-l" {
				pc.gitConfigFiles(sb, nil)
			}
		}
	}
	if i >= len(ws) || !gitReads[ws[i].val] {
		return
	}
	sub := ws[i].val
	for _, a := range ws[i+1:] {
		if a.val == "--" {
			break
		}
		if a.val == "--stdin" || strings.HasPrefix(a.val, "--batch") {
			// The object names (cat-file --batch) or revisions and pathspecs (log --stdin)
			// come from stdin: `echo HEAD:.env | git cat-file --batch` prints .env.
			pc.unknown()
			pc.gitUnseen = true
		}
	}
	// git grep's first operand is its pattern unless -e or -f gave one. Any word that may be
	// one counts, a value too: the pattern then taken for a path errs toward more paths.
	pattern := sub == "grep"
	for _, a := range ws[i+1:] {
		if name, _, _ := gitGrepOpt(a.val); sub == "grep" && a.static && (name == "e" || name == "f") {
			pattern = false
		}
	}
	// A pathspec names a directory as well as a file (`git log -p -- secrets` prints the
	// history of every file below), and git diff compares two paths as diff does, in the
	// repository or not (--no-index, implied for a path outside it): `git diff ~/.ssh ./id_rsa`
	// prints ~/.ssh/id_rsa. Every path here may be read below.
	pc.tree = true
	defer func() { pc.tree = false }()
	afterDashes, skip, patFile, named := false, false, false, false
	for _, a := range ws[i+1:] {
		if skip { // the value of an option of git grep: for -f, the file of patterns
			skip = false
			if patFile {
				pc.tree = false
				pc.word(a, AccessRead, "git", sb)
				pc.tree = true
			}
			continue
		}
		if !a.static || a.glob {
			pc.unknown()
			pc.gitUnseen = true
			continue
		}
		v := a.val
		opt, val, next := "", "", false
		if sub == "grep" && !afterDashes {
			opt, val, next = gitGrepOpt(v)
		}
		switch {
		case afterDashes:
		case opt != "":
			skip, patFile = next, opt == "f"
			if opt == "f" && !next {
				pc.tree = false
				pc.add(val, AccessRead, "git", sb.dirs, sb.dirsUnknown)
				pc.tree = true
			}
			continue
		case v == "--":
			afterDashes = true
			continue
		case strings.HasPrefix(v, "-L"):
			if p, ok := objectPath(v); ok {
				pc.add(p, AccessRead, "git", sb.dirs, sb.dirsUnknown)
			}
			continue
		case strings.HasPrefix(v, "-"):
			continue
		case pattern:
			pattern = false
			continue
		}
		if strings.HasPrefix(v, ":(") || strings.HasPrefix(v, ":/") || strings.ContainsAny(v, "*?[") {
			// A pathspec with magic (:(top), :/ from the top, :(icase), :(glob)) or a wildcard,
			// which git matches itself (even quoted, even before --): `git log -p -- '*.env'`
			// reads .env's history under a name no path rule meets.
			pc.unknown()
			pc.gitUnseen = true
		}
		p, object := objectPath(v)
		if object {
			v = p
		}
		pc.add(v, AccessRead, "git", sb.dirs, sb.dirsUnknown)
		if object {
			pc.objectAbove(p, sb)
		}
		named = true
	}
	if sub == "grep" && !named {
		// git grep without a path searches the working tree below the cwd, as rg does
		// (--no-index and --untracked the files git does not track too): `git grep
		// --no-index -h ''` prints ./.env.
		pc.add(".", AccessRead, "git", sb.dirs, sb.dirsUnknown)
	}
}

// gitRepoSources adds, as reads of the whole tree, the local repositories a git subcommand
// takes objects from: clone's source, fetch's, pull's and ls-remote's repository, a clone's
// --reference and archive's --remote. `git clone ~/proj x && cat x/f` reads what a Read deny
// on ~/proj/** hides. A URL (scheme://, host:path) is no local path; a fetch's operand that
// names no path (origin) is a remote's name.
func (pc *pathCollector) gitRepoSources(sb *sub, sub string, ws []word) {
	var sources []string
	firstOperand := sub == "clone" || sub == "fetch" || sub == "pull" || sub == "ls-remote"
	for i := 0; i < len(ws); i++ {
		a := ws[i]
		if !a.static {
			if firstOperand || strings.HasPrefix(a.val, "--re") {
				pc.runtimeWord(a, sb)
			}
			continue
		}
		name, val, has := strings.Cut(a.val, "=")
		switch {
		case a.val == "--":
			continue
		case (sub == "clone" && (name == "--reference" || name == "--reference-if-able")) || sub == "archive" && name == "--remote":
			if has {
				sources = append(sources, val)
			} else if i+1 < len(ws) && ws[i+1].static {
				i++
				sources = append(sources, ws[i].val)
			}
		case strings.HasPrefix(a.val, "-"):
		case firstOperand:
			firstOperand = false
			if sub == "clone" || strings.ContainsAny(a.val, "/~") || strings.HasPrefix(a.val, ".") {
				sources = append(sources, a.val)
			}
		}
	}
	for _, src := range sources {
		p := strings.TrimPrefix(src, "file://")
		if p != src || !strings.Contains(p, "://") && !scpLike(p) {
			pc.tree = true
			pc.add(p, AccessRead, "git", sb.dirs, sb.dirsUnknown)
			pc.tree = false
		}
	}
}

// scpLike reports git's scp-like remote, host:path: a colon before any slash.
func scpLike(p string) bool {
	colon := strings.IndexByte(p, ':')
	return colon > 0 && !strings.Contains(p[:colon], "/")
}

// gitConfigValue reads a `git -c KEY=VALUE` whose key names a file git reads (include.path,
// includeIf.*.path, core.excludesFile, mailmap.file, diff.orderFile, commit.template, ...): its
// value is a read of that file (`git -c include.path=~/x config -l` prints x as config).
func (pc *pathCollector) gitConfigValue(sb *sub, a word) {
	key, val, _ := strings.Cut(a.val, "=")
	key = strings.ToLower(key)
	// http's certificates and keys are files it reads and sends (http.sslCert, sslKey,
	// sslCAInfo, proxySSLCert, ...).
	tls := strings.HasPrefix(key, "http.") && (strings.Contains(key, "sslcert") || strings.Contains(key, "sslkey") || strings.Contains(key, "sslca"))
	if !strings.HasSuffix(key, "path") && !strings.HasSuffix(key, "file") && key != "commit.template" && !tls {
		return
	}
	if !a.static || a.glob {
		pc.runtimeWord(a, sb)
		return
	}
	pc.add(val, AccessRead, "git", sb.dirs, sb.dirsUnknown)
}

// objectAbove adds an object name's PATH (HEAD:PATH, :PATH) below each dir above the cwd, as
// alternative reads (PathUse.Alternative): git takes it from the repository's top, which may
// be any of them (in a session made in a repository's subdir, `git show HEAD:.env` prints the
// top's .env), and the line does not say which. A PATH that starts with ./ or ../ is git's
// from the cwd, which add takes.
func (pc *pathCollector) objectAbove(p string, sb *sub) {
	if p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") || path.IsAbs(p) || sb.dirsUnknown {
		return
	}
	dirs := sb.dirs
	if len(dirs) == 0 {
		dirs = []string{pc.opts.Cwd} // none known: add has made the list incomplete
	}
	// Not tree reads: a dir above the session's is not read whole because it may be the top.
	tree := pc.tree
	pc.alternative, pc.tree = true, false
	defer func() { pc.alternative, pc.tree = false, tree }()
	for _, d := range dirs {
		for a := path.Dir(path.Clean(d)); path.IsAbs(d) && d != "/"; a = path.Dir(a) {
			pc.put(strings.TrimSuffix(a, "/")+"/"+p, AccessRead, "git")
			if a == "/" {
				break
			}
		}
	}
}

// gitGrepOpt reads a word of git grep as git's parse-options does and returns the option in
// it that takes a value, if any: in a cluster of short options, a letter that takes one (-e,
// -f, -A, -B, -C, -m) takes the rest of the cluster (-eK: the pattern K), or the next word when
// it ends the cluster (-hf FILE), and -O takes the rest as its optional value; a long option
// (abbreviated too) takes what follows its =, else the next word. name is the short letter,
// or "e" or "f" for --regexp and --file; next reports that the value is the next word.
func gitGrepOpt(v string) (name, val string, next bool) {
	if long, ok := strings.CutPrefix(v, "--"); ok {
		long, val, has := strings.Cut(long, "=")
		for _, l := range []string{"regexp", "file", "max-depth", "threads", "max-count", "context", "after-context", "before-context"} {
			if longIs(long, l) {
				name = l
				switch l {
				case "regexp":
					name = "e"
				case "file":
					name = "f"
				}
				return name, val, !has
			}
		}
		return "", "", false
	}
	if len(v) < 2 || v[0] != '-' {
		return "", "", false
	}
	for j := 1; j < len(v); j++ {
		switch c := v[j]; {
		case strings.IndexByte("efABCm", c) >= 0:
			return string(c), v[j+1:], j+1 == len(v)
		case c == 'O':
			return "", "", false
		}
	}
	return "", "", false
}

// gitConfigFiles records the config files git config (its options ws) and git var -l print
// when no -f or --blob names one: the user's (~/.gitconfig, ~/.config/git/config), the
// system's (/etc/gitconfig) and the repository's (.git/config, from the cwd, where agents run
// git), or those of the scope an option gives. `git config -l` prints ~/.gitconfig, tokens in
// it included, as `cat ~/.gitconfig` does.
func (pc *pathCollector) gitConfigFiles(sb *sub, ws []word) {
	scopes := map[string][]string{
		"--global":   {"~/.gitconfig", "~/.config/git/config"},
		"--system":   {"/etc/gitconfig"},
		"--local":    {".git/config"},
		"--worktree": {".git/config", ".git/config.worktree"},
	}
	writes := gitConfigWrites(ws)
	var files []string
	for i, a := range ws {
		name, val, hasVal := strings.Cut(a.val, "=")
		switch {
		case !a.static:
			pc.unknown()
		case a.val == "-f" || name == "--file":
			// gitFileOpts has the file as read; a setting written there is a write of it:
			// `git config -f ~/.bashrc a.b c` writes ~/.bashrc.
			if writes && hasVal {
				pc.add(val, AccessWrite, "git", sb.dirs, sb.dirsUnknown)
			} else if writes && i+1 < len(ws) {
				pc.word(ws[i+1], AccessWrite, "git", sb)
			}
			return
		case shortInCluster(a.val, 'f') >= 0:
			if f := a.val[shortInCluster(a.val, 'f')+1:]; writes && f != "" {
				pc.add(f, AccessWrite, "git", sb.dirs, sb.dirsUnknown)
			} else if writes && i+1 < len(ws) {
				pc.word(ws[i+1], AccessWrite, "git", sb)
			}
			return
		case name == "--blob":
			return // gitFileOpts has the file
		case scopes[a.val] != nil:
			files = append(files, scopes[a.val]...)
		}
	}
	access := AccessRead
	if writes {
		// git writes the scope's file: the repository's config, unless a scope says otherwise.
		access = AccessWrite
		if files == nil {
			files = []string{".git/config"}
		}
	}
	if files == nil {
		files = []string{"~/.gitconfig", "~/.config/git/config", "/etc/gitconfig", ".git/config"}
	}
	for _, f := range files {
		pc.add(f, access, "git", sb.dirs, sb.dirsUnknown)
	}
}

// gitConfigWrittenBy names the config, hooks and settings files a git subcommand other than
// config writes with what its words say: clone's -c/--config keys and init's and clone's
// --template hooks go into the new repository (named here as ./.git, which the protected
// paths hold wherever it is), submodule add writes .gitmodules and the repository's config,
// maintenance start and register write the global config and the user's systemd timers.
func gitConfigWrittenBy(sub string, ws []word) []string {
	has := func(names ...string) bool {
		for _, a := range ws {
			name, _, _ := strings.Cut(a.val, "=")
			if !a.static || slices.Contains(names, name) || slices.ContainsFunc(names, func(n string) bool {
				return len(n) == 2 && strings.HasPrefix(a.val, n) // -ckey=value
			}) {
				return true
			}
		}
		return false
	}
	first := ""
	if len(ws) > 0 {
		first = ws[0].val
	}
	switch {
	case sub == "clone" && has("-c", "--config", "--template"), sub == "init" && has("--template"):
		return []string{".git/config", ".git/hooks"}
	case sub == "submodule" && first == "add":
		return []string{".gitmodules", ".git/config"}
	case sub == "maintenance" && (first == "start" || first == "register"):
		return []string{"~/.gitconfig", "~/.config/systemd/user"}
	}
	return nil
}

// pkgConfigWrittenBy names the settings files `npm config set` and its kin write: npm's,
// pnpm's and yarn's settings run code at the user's next install (npm's script-shell and
// node-options, yarn's yarnPath), so each is a protected path. Where the setting goes
// (--location, -g, -H, GOENV, KUBECONFIG) is not modelled: the default places are named.
func pkgConfigWrittenBy(name string, ws []word) []string {
	var ops []string
	for _, a := range ws {
		if !a.static {
			ops = append(ops, "\x00") // may be anything, "set" too
			continue
		}
		if !strings.HasPrefix(a.val, "-") {
			ops = append(ops, a.val)
		}
	}
	sets := func(i int) bool {
		return i < len(ops) && (slices.Contains([]string{"set", "delete", "rm", "edit", "fix", "unset"}, ops[i]) || ops[i] == "\x00")
	}
	op := func(i int, set ...string) bool {
		return i < len(ops) && (ops[i] == "\x00" || slices.Contains(set, ops[i]))
	}
	has := func(opt string) bool {
		return slices.ContainsFunc(ws, func(a word) bool { return !a.static || a.val == opt || strings.HasPrefix(a.val, opt+"=") })
	}
	if strings.HasPrefix(name, "pip") && strings.Trim(name[3:], "0123456789.") == "" {
		name = "pip" // pip3.11
	}
	if strings.HasPrefix(name, "python") && len(ops) > 0 && slices.ContainsFunc(ws, func(a word) bool { return a.val == "-m" }) {
		// python3 -m pip …: the module's words follow it.
		for i, a := range ws {
			if a.val == "-m" && i+1 < len(ws) && ws[i+1].val == "pip" {
				return pkgConfigWrittenBy("pip", ws[i+2:])
			}
		}
	}
	switch name {
	case "npm", "pnpm":
		if len(ops) > 0 && (ops[0] == "set" || ops[0] == "\x00" || (ops[0] == "config" || ops[0] == "c") && sets(1)) {
			return []string{"~/.npmrc", ".npmrc"}
		}
	case "yarn":
		if len(ops) > 0 && (ops[0] == "\x00" || ops[0] == "config" && sets(1)) {
			return []string{"~/.yarnrc", "~/.yarnrc.yml", ".yarnrc", ".yarnrc.yml"}
		}
	// Other tools that write their own settings, or programs on the user's PATH, in the home:
	// go's env file (GOFLAGS=-toolexec runs a program at every build), kubectl's config (an
	// exec credential plugin), aws's (credential_process), systemd's user units, pip's config
	// and --user installs, rustup's toolchains, gh's config and aliases, and the binaries
	// go install and cargo install put on PATH.
	case "go":
		if op(0, "env") && (has("-w") || has("-u")) {
			return []string{"~/.config/go/env"}
		}
		if op(0, "install") {
			return []string{"~/go/bin"}
		}
	case "kubectl":
		if op(0, "config") && op(1, "set", "set-cluster", "set-context", "set-credentials", "unset", "use-context", "use",
			"delete-cluster", "delete-context", "delete-user", "rename-context") {
			return []string{"~/.kube/config"}
		}
	case "aws":
		if op(0, "configure") && !op(1, "get", "list", "list-profiles", "export-credentials") {
			return []string{"~/.aws/config", "~/.aws/credentials"}
		}
	case "systemctl":
		if has("--user") && op(0, "enable", "disable", "reenable", "link", "edit", "set-property", "preset", "preset-all",
			"mask", "unmask", "revert", "add-wants", "add-requires") {
			return []string{"~/.config/systemd/user"}
		}
	case "pip", "pip3":
		if op(0, "config") && sets(1) {
			return []string{"~/.config/pip/pip.conf", "~/.pip/pip.conf"}
		}
		if op(0, "install") && has("--user") {
			return []string{"~/.local/lib", "~/.local/bin"}
		}
	case "rustup":
		if op(0, "default", "toolchain", "override", "set", "component", "target", "self", "update", "install", "uninstall") {
			return []string{"~/.rustup", "~/.cargo/bin"}
		}
	case "gh":
		if op(0, "config", "alias") && op(1, "set", "import", "delete") {
			return []string{"~/.config/gh"}
		}
		if op(0, "extension", "ext") && op(1, "install", "upgrade", "create") {
			return []string{"~/.local/share/gh/extensions"}
		}
	case "cargo":
		if op(0, "install") {
			return []string{"~/.cargo/bin"}
		}
	}
	return nil
}

// scriptWrites are the files script(1) writes: its typescript operand (before or after its
// options: util-linux takes both, and `typescript` when none) and its log files (-I, -O, -B,
// -T and their long forms). A word known only at run time writes where the line cannot say.
func scriptWrites(ws []word) []string {
	var out []string
	takesValue := map[string]bool{"-c": true, "--command": true, "-E": true, "--echo": true, "-m": true, "--logging-format": true,
		"-I": true, "--log-in": true, "-O": true, "--log-out": true, "-B": true, "--log-io": true, "-T": true, "--log-timing": true}
	logs := "IOBT"
	operand := false
	for i := 0; i < len(ws); i++ {
		v := ws[i].val
		switch {
		case !ws[i].static:
		case v == "--":
			if i+1 < len(ws) && ws[i+1].static {
				out = append(out, ws[i+1].val)
				operand = true
			}
			i = len(ws)
		case strings.HasPrefix(v, "--"):
			name, val, attached := strings.Cut(v, "=")
			isLog := name == "--log-in" || name == "--log-out" || name == "--log-io" || name == "--log-timing"
			switch {
			case attached && isLog:
				out = append(out, val)
			case !attached && takesValue[name]:
				if isLog && i+1 < len(ws) && ws[i+1].static {
					out = append(out, ws[i+1].val)
				}
				i++
			}
		case len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				if !takesValue["-"+string(v[j])] {
					continue
				}
				val := v[j+1:]
				if val == "" && i+1 < len(ws) {
					i++
					val = ws[i].val
				}
				if strings.IndexByte(logs, v[j]) >= 0 && val != "" {
					out = append(out, val)
				}
				break
			}
		default:
			if !operand {
				out = append(out, v)
				operand = true
			}
		}
	}
	if !operand {
		out = append(out, "typescript")
	}
	return out
}

// gitConfigWrites reports whether `git config` (its words past "config") sets or removes
// something: the set, unset, rename-section, remove-section and edit subcommands, the
// --add, --unset, --replace-all, ..., --edit options, or the older `git config NAME VALUE`
// (two operands, no --get). A setting a later git runs (core.fsmonitor, core.pager, an alias)
// is then a write of the config file, which the protected paths hold.
func gitConfigWrites(ws []word) bool {
	operands, get := 0, false
	for i, a := range ws {
		v := a.val
		name, _, _ := strings.Cut(v, "=")
		switch {
		case !a.static:
			operands++
		case i == 0 && (v == "set" || v == "unset" || v == "rename-section" || v == "remove-section" || v == "edit"):
			return true
		case i == 0 && (v == "get" || v == "list"):
			return false
		case name == "--add" || name == "--unset" || name == "--unset-all" || name == "--replace-all" ||
			name == "--rename-section" || name == "--remove-section" || name == "--edit" || v == "-e":
			return true
		case strings.HasPrefix(name, "--get") || name == "--list" || v == "-l" || strings.HasPrefix(v, "-l") && !strings.HasPrefix(v, "--"):
			get = true
		case v == "-f" || name == "--file" || name == "--blob" || name == "--type" || name == "--default" || name == "--comment":
			if !strings.Contains(v, "=") {
				operands-- // its value is the next word, not an operand
			}
		case strings.HasPrefix(v, "-"):
		default:
			operands++
		}
	}
	return !get && operands >= 2
}

// gitDescribed are the git subcommands whose words this file reads: revisions, pathspecs in
// the repository (gitReads), the file options of gitFileOpts and gitOutputOpts, and what
// gitConfigWrittenBy, gitTreeWrites and gitWorktreeWrites know they write. Any other
// subcommand's words are mentions (gitPaths).
var gitDescribed = func() map[string]bool {
	m := map[string]bool{}
	for _, sub := range strings.Fields(`status add rm mv restore checkout switch reset branch log show
		diff diff-tree diff-index diff-files blame annotate grep ls-files ls-tree rev-parse rev-list
		describe shortlog reflog cat-file show-ref for-each-ref stash fetch pull push clone init
		rebase cherry-pick revert bisect clean gc worktree submodule remote config commit tag merge
		range-diff format-patch whatchanged archive check-ignore check-attr var version help
		count-objects fsck prune maintenance name-rev merge-base cherry show-branch verify-commit
		verify-tag sparse-checkout notes fmt-merge-msg`) {
		m[sub] = true
	}
	return m
}()

// gitFileOpts are the options of git subcommands whose value is a file git reads: a config
// file whose entries `git config -f F -l` prints, a pattern file, a message or its template
// (`git commit -F ~/.ssh/id_rsa` puts the key in the commit). A --blob's REV:PATH is the
// path's content in the repository, as gitReads' object names are.
var gitFileOpts = func() map[string][]string {
	m := map[string][]string{
		"config":   {"-f", "--file", "--blob"},
		"ls-files": {"-X", "--exclude-from"},
		"blame":    {"-S", "--ignore-revs-file", "--contents"},
		"annotate": {"-S", "--ignore-revs-file", "--contents"},
		"commit":   {"-F", "--file", "-t", "--template", "--pathspec-from-file"},
		"tag":      {"-F", "--file"},
		// The pathspecs read from a file are printed back in git's errors.
		"add": {"--pathspec-from-file"}, "reset": {"--pathspec-from-file"}, "stash": {"--pathspec-from-file"},
		"restore": {"--pathspec-from-file"}, "checkout": {"--pathspec-from-file"}, "rm": {"--pathspec-from-file"},
		"merge":         {"-F", "--file"},
		"notes":         {"-F", "--file"},
		"fmt-merge-msg": {"-F", "--file"},
		"archive":       {"--add-file"},
	}
	// The order file of a diff (-O FILE): its lines are patterns, read though not printed.
	for _, sub := range []string{"log", "show", "diff", "diff-tree", "diff-index", "diff-files", "whatchanged", "format-patch"} {
		m[sub] = []string{"-O", "--orderfile"}
	}
	// A patch's signature and cover letter text.
	m["format-patch"] = append(m["format-patch"], "--signature-file", "--description-file")
	return m
}()

// gitOutputOpts are the options of git subcommands whose value is a file (or, for
// format-patch's -o, a directory) git writes: `git log --format=… --output=~/.bashrc` writes
// what its format says there.
var gitOutputOpts = func() map[string][]string {
	m := map[string][]string{
		"archive":      {"-o", "--output"},
		"format-patch": {"-o", "--output-directory", "--output"},
	}
	for _, sub := range []string{"log", "show", "diff", "diff-tree", "diff-index", "diff-files", "whatchanged", "range-diff", "shortlog"} {
		m[sub] = []string{"--output"}
	}
	return m
}()

// gitFileOpts records the file values of a git subcommand's options (gitFileOpts): -f F, -fF,
// --file F, --file=F, and long abbreviations.
func (pc *pathCollector) gitFileOpts(sb *sub, opts []string, ws []word, access string) {
	for i := 0; i < len(ws); i++ {
		a := ws[i]
		if !a.static {
			pc.unknown()
			continue
		}
		if a.val == "--" {
			return
		}
		// nextWord takes the next word as the value.
		nextWord := func() (string, bool) {
			if i+1 >= len(ws) {
				return "", false
			}
			i++
			if !ws[i].static {
				pc.unknown()
				return "", false
			}
			return ws[i].val, true
		}
		for _, o := range opts {
			v, ok := "", false
			switch {
			case len(o) > 2 && (a.val == o || len(a.val) > 3 && strings.HasPrefix(o, a.val)):
				v, ok = nextWord()
			case len(o) == 2 && shortInCluster(a.val, o[1]) >= 0:
				// git's parse-options: in a cluster (-f FILE, -lf FILE, -lfFILE), the letter
				// takes the rest, or the next word when it ends the cluster.
				if v, ok = a.val[shortInCluster(a.val, o[1])+1:], true; v == "" {
					v, ok = nextWord()
				}
			case len(o) > 2 && strings.HasPrefix(a.val, "--") && strings.Contains(a.val, "="):
				name, val, _ := strings.Cut(a.val, "=")
				if len(name) > 3 && strings.HasPrefix(o, name) {
					v, ok = val, true
				}
			}
			if !ok {
				continue
			}
			if o == "--blob" {
				if p, isObj := objectPath(v); isObj {
					pc.add(p, AccessRead, "git", sb.dirs, sb.dirsUnknown)
					pc.objectAbove(p, sb)
				}
				break
			}
			pc.add(v, access, "git", sb.dirs, sb.dirsUnknown)
			break
		}
	}
}

// shortInCluster is the index in v, a cluster of short options (-lf), of letter, or -1. An
// earlier letter that takes a value would take it as its value: erring toward the letter.
func shortInCluster(v string, letter byte) int {
	if len(v) < 2 || v[0] != '-' || v[1] == '-' {
		return -1
	}
	if i := strings.IndexByte(v[1:], letter); i >= 0 {
		return i + 1
	}
	return -1
}

// objectPath returns PATH of a REV:PATH or :[N:]PATH object name (or -L's RANGE:PATH); false
// for a word without one (HEAD, HEAD: is the top tree).
func objectPath(v string) (string, bool) {
	i := strings.IndexByte(v, ':')
	if i < 0 {
		return "", false
	}
	rest := v[i+1:]
	if i == 0 && len(rest) >= 2 && rest[0] >= '0' && rest[0] <= '3' && rest[1] == ':' {
		rest = rest[2:] // :N:PATH, the index's stage N
	}
	return rest, rest != ""
}

// operands applies spec to a recognised command's arguments.
func (pc *pathCollector) operands(sb *sub, name string, spec pathSpec, ws []word) {
	switch name {
	case "jq":
		ws = pc.jqFiles(sb, ws)
	case "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum":
		// -c reads the files its list (or stdin) names, and prints each one's name with OK or
		// FAILED, and a line of it that is not a checksum line in a warning. A word known only
		// when the line runs (a glob too: a file may be named -c) may be -c.
		for _, a := range ws {
			if !a.static || a.glob || hasFlag([]string{a.val}, "c", "check") {
				pc.unknown()
			}
		}
	case "strings":
		// binutils reads the options and file names of @FILE from FILE (and prints each one
		// that names no file), and expands an @OTHER there in turn: the files it reads are
		// named in files, not words.
		for _, a := range ws {
			if f, ok := strings.CutPrefix(a.val, "@"); ok && a.static && f != "" {
				pc.addVal(a, f, AccessRead, name, sb)
				pc.unknown()
			}
		}
	}
	vals := pc.vals[:0]
	for i, a := range ws {
		vals = append(vals, a.val)
		if a.procSubst {
			vals[i] = "\x00" // a pipe (/dev/fd/N), never an option; its command's paths are its own
			continue
		}
		if !a.static {
			// A non-static word may be an option or an operand: nothing after the
			// options can be placed for sure.
			pc.runtimeWord(a, sb)
			vals[i] = "\x00" // an operand no path check matches
		}
	}
	switch spec.kind {
	case pkFind:
		start := findRootsStart(vals)
		// What find removes, its roots included, is written: `find .git -delete` is a write
		// of .git, as `rm -rf .git` is.
		removes := findRemoves(vals) || findExecWrites(vals)
		for _, v := range vals {
			if v == "-exec" || v == "-execdir" || v == "-ok" || v == "-okdir" {
				// The command gets every file found below the roots: `find ~/.ssh -exec cat
				// {} +` reads what is there.
				pc.tree = true
				defer func() { pc.tree = false }()
				break
			}
		}
		end := findRootsEnd(vals, start)
		roots := end - start
		for i := start; i < end; i++ {
			if vals[i] == "\x00" {
				continue
			}
			pc.word(ws[i], AccessRead, name, sb)
			if removes {
				pc.writingTrees(true, func() { pc.word(ws[i], AccessWrite, name, sb) })
			}
		}
		filesFrom := false
		for i, v := range vals {
			// -files0-from FILE: the roots are the names in FILE (each bad one printed).
			if v == "-files0-from" && i+1 < len(vals) {
				filesFrom = true
				pc.word(ws[i+1], AccessRead, name, sb)
			}
			// -fprint F, -fprint0 F, -fprintf F FMT, -fls F write F (created or truncated).
			if (strings.HasPrefix(v, "-fprint") || v == "-fls") && i+1 < len(vals) {
				tree, treeWrite := pc.tree, pc.treeWrite
				pc.tree, pc.treeWrite = false, false
				pc.word(ws[i+1], AccessWrite, name, sb)
				pc.tree, pc.treeWrite = tree, treeWrite
			}
			// A test against another file stats it (-newer F, -samefile F): what it says of F
			// (its times, its inode) is read as stat would read it.
			if (v == "-anewer" || v == "-cnewer" || v == "-samefile" || strings.HasPrefix(v, "-newer") && !strings.HasSuffix(v, "t")) && i+1 < len(vals) {
				tree := pc.tree
				pc.tree = false
				pc.word(ws[i+1], AccessRead, name, sb)
				pc.tree = tree
			}
		}
		if filesFrom {
			pc.unknown() // the roots FILE names
		} else if slices.ContainsFunc(vals[:max(start, 0)], func(v string) bool { return v == "-L" }) || slices.Contains(vals, "-follow") {
			// find -L . follows the links it meets below its roots (up -> ~): what it lists
			// and stats is wherever they lead.
			pc.unknown()
		}
		if !filesFrom && roots == 0 {
			pc.add(".", AccessRead, name, sb.dirs, sb.dirsUnknown) // find with no root walks .
			if removes {
				pc.add(".", AccessWrite, name, sb.dirs, sb.dirsUnknown)
			}
		}
		return
	case pkDD:
		for i, v := range vals {
			if f, ok := strings.CutPrefix(v, "if="); ok {
				pc.addVal(ws[i], f, AccessRead, name, sb)
			}
			if f, ok := strings.CutPrefix(v, "of="); ok {
				pc.addVal(ws[i], f, AccessWrite, name, sb)
			}
		}
		return
	}
	opts, operands := parseOpts(vals, spec.opts)
	// operands are a suffix-free subset of vals in order; find their words.
	opWords := operandWords(pc.ws[:0], ws, vals, operands)
	pc.vals, pc.ws = vals, opWords
	target, patGiven, inPlace, backup, followLinks, treeHTML := "", false, false, "", false, false
	var fetch fetchState
	// diff reads the files in a directory operand even without -r, and `diff DIR FILE` reads
	// DIR/FILE's base name (`diff ~/.ssh ./id_rsa` prints ~/.ssh/id_rsa): each of its operands,
	// --from-file's and --to-file's too, may be read below.
	pc.tree = name == "diff"
	defer func() { pc.tree = false }()
	for _, o := range opts {
		short := !o.long && len(o.name) == 1
		if short && strings.Contains(spec.patOpts, o.name) || o.long && anyLong(o.name, spec.patLong) {
			patGiven = true
		}
		if o.hasVal && (short && strings.Contains(spec.fileOpts, o.name) || o.long && anyLong(o.name, spec.fileLong)) {
			pc.optVal(ws, vals, o.val, AccessRead, name, sb)
		}
		if o.long && longIs(o.name, "files0-from") && anyLong(o.name, spec.fileLong) {
			// sort, wc and du read the files the list names (from stdin for -), which no word
			// shows: `printf '/home/u/.ssh/id_rsa\0' | sort --files0-from=-` prints it.
			pc.unknown()
		}
		switch {
		case (spec.kind == pkCopy || spec.kind == pkMove || spec.kind == pkLink) && o.hasVal && (o.name == "t" || o.long && longIs(o.name, "target-directory")):
			target = o.val
		case (spec.kind == pkCopy || spec.kind == pkMove || spec.kind == pkLink) &&
			(o.name == "b" || o.name == "S" || o.long && (longIs(o.name, "backup") || longIs(o.name, "suffix"))):
			// A backup of each file it replaces, named by a suffix the line may not show
			// (SIMPLE_BACKUP_SUFFIX, inherited): cp -b -S .json x .mcp makes .mcp.json.
			pc.unknown()
		case (name == "sort" || name == "tree") && o.hasVal && (o.name == "o" || o.long && longIs(o.name, "output")):
			pc.optVal(ws, vals, o.val, AccessWrite, name, sb)
		case name == "tree" && o.name == "R":
			// tree -R -H URL writes a 00Tree.html into each dir it lists, below each operand.
			treeHTML = true
		case name == "sed" && (o.name == "i" || o.long && longIs(o.name, "in-place")):
			inPlace = true
			if o.hasVal {
				backup = o.val
			}
		case name == "sed" && o.long && longIs(o.name, "follow-symlinks"):
			// The backup goes beside where a link leads, which no name on the line shows.
			followLinks = true
		case name == "install" && o.name == "d":
			spec.kind = pkWrite
		case spec.kind == pkFetch:
			pc.fetchOpt(name, o, ws, vals, sb, &fetch)
		case spec.kind == pkMode && o.long && longIs(o.name, "reference"):
			patGiven = true // no mode operand
		case name == "chmod" && !o.long && strings.Contains("rwxXstugoa,+=01234567", o.name):
			// chmod -w FILE: a word that starts as a mode is the mode, and every operand a file.
			patGiven = true
		case name == "rg" && o.long && (o.name == "files" || o.name == "type-list"):
			patGiven = true // no pattern: every operand is a path to list
		}
	}
	if spec.kind == pkFetch {
		pc.fetchDone(name, opWords, sb, &fetch)
	}
	if name == "sed" && sedOpensFiles(vals) {
		// w FILE, r FILE and s///w FILE in the script: files the operands do not show
		// (sed -n 'w ~/.bashrc' list, sed 'r ../other/id.key' list).
		pc.unknown()
	}
	// A recursive search, diff or copy reads every file below a directory operand.
	pc.tree = pc.tree || searchesTree(name, opts) ||
		spec.kind == pkCopy && recursiveCopy(opts)
	if pc.tree && followsLinks(name, opts) || listsThroughLinks(name, opts) {
		// A link below the dir leads wherever it leads (vendor -> ~/other): the files read
		// there are not below the dir the line names.
		pc.unknown()
	}
	switch spec.kind {
	case pkRead:
		pc.all(opWords, AccessRead, name, sb)
		if treeHTML {
			dirs := opWords
			if len(dirs) == 0 {
				dirs = []word{{val: ".", src: ".", static: true}}
			}
			pc.writingTrees(true, func() { pc.all(dirs, AccessWrite, name, sb) })
		}
	case pkWrite:
		// rm -r removes everything below its operands; setfacl -R changes who may read and
		// write it.
		pc.writingTrees(treeFlag(name, opts), func() { pc.all(opWords, AccessWrite, name, sb) })
	case pkPattern:
		if !patGiven && len(opWords) > 0 {
			opWords = opWords[1:]
		}
		if len(opWords) == 0 && searchesTree(name, opts) {
			// rg and grep -r with no path search the current directory.
			pc.add(".", AccessRead, name, sb.dirs, sb.dirsUnknown)
		}
		access := AccessRead
		if inPlace {
			access = AccessWrite
			if followLinks && backup != "" {
				pc.unknown()
			}
			pc.sedBackups(opWords, backup, name, sb)
		}
		pc.all(opWords, access, name, sb)
	case pkCopy, pkLink:
		// A recursive copy writes over what its copies meet below where they land (cp -r
		// new/. src/ replaces src/locked/f.txt).
		recursive := spec.kind == pkCopy && recursiveCopy(opts)
		// What each source holds lands below where it lands (PathUse.TreeOf); with --parents
		// at DEST/SOURCE, its whole name (cp --parents .git/hooks/x ../.. writes ../../.git/hooks/x).
		parents := slices.ContainsFunc(opts, func(o opt) bool { return o.long && longIs(o.name, "parents") })
		into := func(dest string, srcs []word) {
			for _, src := range srcs {
				pc.landing(recursive, src, sb, func() {
					pc.writingTrees(recursive, func() {
						pc.intoDir(dest, []word{src}, name, sb)
						if parents && src.static && !src.glob {
							pc.add(strings.TrimRight(dest, "/")+"/"+strings.TrimLeft(src.val, "/"), AccessWrite, name, sb.dirs, sb.dirsUnknown)
						}
					})
				})
			}
		}
		if target != "" {
			pc.optVal(ws, vals, target, AccessWrite, name, sb)
			into(target, opWords)
		} else if len(opWords) > 1 || spec.kind == pkCopy && len(opWords) == 1 {
			dest := opWords[len(opWords)-1]
			// cp -rT new src copies what new holds into src itself.
			intoItself := slices.ContainsFunc(opts, func(o opt) bool { return o.name == "T" || o.long && longIs(o.name, "no-target-directory") })
			// cp -r new dest, dest not there yet: what new holds lands in dest.
			pc.landing(recursive && len(opWords) == 2, opWords[0], sb, func() {
				pc.writingTrees(recursive && intoItself, func() { pc.word(dest, AccessWrite, name, sb) })
			})
			opWords = opWords[:len(opWords)-1]
			if dest.static && !dest.glob {
				into(dest.val, opWords)
			}
		}
		pc.symlinks = carriesLinks(name, opts)
		switch {
		case hardLinks(name, opts):
			// A hard link is the file under one more name, through which it is written:
			// `ln ~/.bashrc x` then a write of x changes ~/.bashrc, which the name x does not
			// show. So its sources are written, as far as the rules and protected paths go;
			// linked recursively (cp -al . copy), everything below them is, and read too, as
			// what it holds gets names no rule covers.
			pc.writingTrees(recursive, func() { pc.all(opWords, AccessWrite, name, sb) })
			if recursive {
				pc.all(opWords, AccessRead, name, sb)
			}
		case spec.kind == pkCopy:
			pc.all(opWords, AccessRead, name, sb)
		}
	case pkMove:
		// A link moved means something else where it lands (a relative one), and a dir moved
		// takes the links in it to a name no path here shows.
		pc.symlinks = true
		sources := opWords
		// A dir moved lands whole, where it lands: mv new .github/workflows, mv new .github/.
		into := func(dest string, srcs []word) {
			for _, src := range srcs {
				pc.landing(true, src, sb, func() { pc.intoDir(dest, []word{src}, name, sb) })
			}
		}
		if target != "" {
			pc.optVal(ws, vals, target, AccessWrite, name, sb)
			into(target, opWords)
		} else if len(opWords) > 1 {
			sources = opWords[:len(opWords)-1]
			dest := opWords[len(opWords)-1]
			if dest.static && !dest.glob {
				into(dest.val, sources)
			}
			pc.landing(len(sources) == 1, sources[0], sb, func() { pc.word(dest, AccessWrite, name, sb) })
		}
		// A dir moved takes everything below it to names no rule about them covers (mv
		// secret s2, mv src/locked x): its whole tree is written, and read.
		pc.treeWrite, pc.tree = true, true
		pc.all(sources, AccessWrite, name, sb)
		pc.all(sources, AccessRead, name, sb)
		pc.treeWrite, pc.tree = false, false
	case pkMode:
		if !patGiven && len(opWords) > 0 {
			opWords = opWords[1:]
		}
		// chmod -R a+rw . changes who may read or write every file below.
		pc.writingTrees(treeFlag(name, opts), func() { pc.all(opWords, AccessWrite, name, sb) })
	case pkXXD:
		// xxd's options are words of their own that take values as words too (-len 10,
		// -cols 8, -s +5), which getopt's reading pairs wrongly: every word that is no option
		// is taken as a file, the first read, each later one read and written.
		var files []word
		for _, a := range ws {
			if !a.static || !strings.HasPrefix(a.val, "-") || a.val == "-" {
				files = append(files, a)
			}
		}
		for i, a := range files {
			pc.word(a, AccessRead, name, sb)
			if i > 0 {
				pc.word(a, AccessWrite, name, sb)
			}
		}
	case pkUniq:
		if len(opWords) > 0 {
			pc.word(opWords[0], AccessRead, name, sb)
		}
		if len(opWords) > 1 {
			pc.word(opWords[1], AccessWrite, name, sb)
		}
	case pkInterp:
		switch {
		case patGiven: // -c CODE, -m MODULE
		case len(opWords) > 0 && !(opWords[0].static && opWords[0].val == "-"):
			pc.word(opWords[0], AccessRead, name, sb)
		case (pc.opts.MentionReads || pc.opts.Unconfined) && !stdinScriptSeen(sb):
			// The script comes on stdin from a pipe or a file (echo 'open("…")' | python3):
			// the paths it opens are in text the line does not show.
			pc.unknown()
		}
	}
}

// stdinScriptSeen reports a here-document or here-string on the command's stdin, whose text
// the mentions read as a script's.
func stdinScriptSeen(sb *sub) bool {
	for _, r := range sb.redirs {
		if r.Op == "<<" || r.Op == "<<-" || r.Op == "<<<" {
			return true
		}
	}
	return false
}

// hardLinks reports whether ln or cp makes hard links to its sources: ln without -s, cp with
// -l (--link).
func hardLinks(name string, opts []opt) bool {
	for _, o := range opts {
		switch {
		case name == "ln" && (!o.long && o.name == "s" || o.long && longIs(o.name, "symbolic")):
			return false
		case name == "cp" && (!o.long && o.name == "l" || o.long && longIs(o.name, "link")):
			return true
		}
	}
	return name == "ln"
}

// carriesLinks reports whether ln or cp may make a symbolic link: ln always (a hard link to a
// symbolic link is one), cp with -s, or when it copies links as links (-P, -d, -a, and -r
// without -L).
func carriesLinks(name string, opts []opt) bool {
	if name == "ln" {
		return true
	}
	copies := false
	for _, o := range opts {
		switch {
		case !o.long && o.name == "s" || o.long && longIs(o.name, "symbolic-link"):
			return true
		case !o.long && o.name == "L" || o.long && longIs(o.name, "dereference"):
			return false
		case !o.long && strings.Contains("PdarR", o.name) && len(o.name) == 1,
			o.long && (longIs(o.name, "no-dereference") || longIs(o.name, "archive") || longIs(o.name, "recursive")):
			copies = true
		}
	}
	return copies
}

// jqFiles records the files jq reads besides its inputs and returns ws without each option
// that takes two words (--arg NAME VALUE, --argjson NAME TEXT, and --rawfile, --slurpfile and
// --argfile NAME FILE), which optSpec cannot express: taken one word short, the second word
// passes for the program and the program for a file, or the option's words for another's
// (--arg --rawfile x PROG FILE is an --arg named --rawfile, and FILE is read). They are taken
// in order, as jq does, so that such a value is never read as an option. A program that
// imports or includes a module, or one read from a file (which may), reads a file found on a
// search path the words do not show: the list is then incomplete, and so for --run-tests,
// whose file of tests holds programs.
func (pc *pathCollector) jqFiles(sb *sub, ws []word) []word {
	out := make([]word, 0, len(ws))
	for i := 0; i < len(ws); i++ {
		a := ws[i]
		switch {
		case a.static && (a.val == "--arg" || a.val == "--argjson"):
			i += 2
			continue
		case a.static && (a.val == "--rawfile" || a.val == "--slurpfile" || a.val == "--argfile"):
			if i+2 < len(ws) {
				pc.word(ws[i+2], AccessRead, "jq", sb)
			}
			i += 2
			continue
		case a.static && a.val == "--run-tests":
			// jq reads the tests from the next word, whatever it is, or from stdin.
			if i+1 < len(ws) {
				pc.word(ws[i+1], AccessRead, "jq", sb)
			}
			pc.unknown()
		case !a.static || strings.Contains(a.val, "import") || strings.Contains(a.val, "include") ||
			a.val == "-f" || strings.HasPrefix(a.val, "--from-file") || a.val == "--library-path" ||
			strings.HasPrefix(a.val, "-") && !strings.HasPrefix(a.val, "--") && strings.ContainsAny(a.val, "fL"):
			pc.unknown()
		}
		out = append(out, a)
	}
	return out
}

// addVal records the file part of an option word (dd's if=FILE).
func (pc *pathCollector) addVal(a word, v, access, cmd string, sb *sub) {
	if !a.static || a.glob {
		pc.unknown()
		return
	}
	pc.add(v, access, cmd, sb.dirs, sb.dirsUnknown)
}

// sedBackups adds the backups sed -iSUFFIX writes, as GNU sed names them: each * in the
// suffix is the file's name as given (-i'bak/*' puts them in bak/), and a suffix with none
// follows the name (-i.json makes .mcp's backup .mcp.json, a file other programs run).
func (pc *pathCollector) sedBackups(files []word, suffix, cmd string, sb *sub) {
	if suffix == "" || suffix == "*" {
		return
	}
	for _, f := range files {
		name := f.val
		if !strings.Contains(suffix, "*") {
			pc.addVal(f, name+suffix, AccessWrite, cmd, sb)
		} else {
			pc.addVal(f, strings.ReplaceAll(suffix, "*", name), AccessWrite, cmd, sb)
		}
	}
}

// optVal adds the path an option's value names, from the word that holds it (the value, or
// the end of -oVALUE or --opt=VALUE): a glob or an expansion there is known only at run time
// (cp -t .claud? is .claude). Every word that could hold it must be a literal, so a quoted
// 'x.claud?' beside it cannot pass for it; a value no word shows is unknown.
func (pc *pathCollector) optVal(ws []word, vals []string, v, access, cmd string, sb *sub) {
	if pc.optStatic(ws, vals, v) {
		pc.add(v, access, cmd, sb.dirs, sb.dirsUnknown)
	}
}

// optStatic reports whether every word that could hold the option value v is a literal, and
// some word does; if not, the list is marked unknown.
func (pc *pathCollector) optStatic(ws []word, vals []string, v string) bool {
	found := false
	for i, x := range vals {
		if v != "" && i < len(ws) && strings.HasSuffix(x, v) {
			if !ws[i].static || ws[i].glob {
				pc.unknown()
				return false
			}
			found = true
		}
	}
	if !found {
		pc.unknown()
	}
	return found
}

// intoDir adds the names cp, mv and ln give their sources when dest is a directory, which it
// may be whatever its spelling: DIR/BASE for each source. `cp tmpl/.envrc sub/` writes
// sub/.envrc, a protected name the word sub/ does not show. What a recursive copy writes
// below that name is not listed.
func (pc *pathCollector) intoDir(dest string, sources []word, cmd string, sb *sub) {
	if dest == "" || dest == "-" || strings.ContainsAny(dest, "*?[") {
		return // a glob: already a path known only at run time
	}
	for _, src := range sources {
		if !src.static || src.glob {
			// Already a path known only at run time; one that may pick a dot dir or its
			// contents (.git/*, .g*, .[g]it/.) may make a repository at dest as .git/. does.
			if hiddenSegment(src.src) {
				pc.add(strings.TrimRight(dest, "/")+"/HEAD", AccessWrite, cmd, sb.dirs, sb.dirsUnknown)
			}
			continue
		}
		if gitDirCopy(src.val) {
			// A repository's git dir, or its contents (.git/.), put at or under dest: dest
			// may become a bare repository, whose config git trusts there (HEAD marks it).
			pc.add(strings.TrimRight(dest, "/")+"/HEAD", AccessWrite, cmd, sb.dirs, sb.dirsUnknown)
		}
		base := path.Base(strings.TrimRight(src.val, "/"))
		if base == "." && pc.treeWrite {
			// cp -r new/. dest: what new holds lands in dest itself.
			pc.add(dest, AccessWrite, cmd, sb.dirs, sb.dirsUnknown)
		}
		if base == "." || base == ".." || base == "/" {
			continue
		}
		pc.add(strings.TrimRight(dest, "/")+"/"+base, AccessWrite, cmd, sb.dirs, sb.dirsUnknown)
	}
}

// landing runs put with its writes marked as landings of src (PathUse.TreeOf) when on and src
// names one path before the line runs; one it cannot name makes them whole-tree writes.
func (pc *pathCollector) landing(on bool, src word, sb *sub, put func()) {
	if !on {
		put()
		return
	}
	p, ok := pc.onePath(src, sb)
	if !ok {
		pc.writingTrees(true, put)
		return
	}
	pc.treeOf = p
	put()
	pc.treeOf = ""
}

// onePath is the one absolute path a word names where the line is, if it names one.
func (pc *pathCollector) onePath(a word, sb *sub) (string, bool) {
	if !a.static || a.glob || sb.dirsUnknown || len(sb.dirs) > 1 {
		return "", false
	}
	p := a.val
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if pc.opts.Home == "" || pc.cdVars {
			return "", false
		}
		p = pc.opts.Home + p[1:]
	case strings.HasPrefix(p, "~"):
		return "", false
	case !path.IsAbs(p):
		dir := pc.opts.Cwd
		if len(sb.dirs) == 1 {
			dir = sb.dirs[0]
		}
		if dir == "" || hasDotDot(p) {
			return "", false
		}
		p = dir + "/" + p
	}
	return path.Clean(p), true
}

// hiddenSegment reports a word (as written) with a segment that starts with a dot other
// than . and .. (a glob or brace that may name a dot dir: .g*, .git/*, .[g]it).
func hiddenSegment(w string) bool {
	for seg := range strings.SplitSeq(w, "/") {
		seg = strings.Trim(seg, `'"`)
		if len(seg) > 1 && seg[0] == '.' && seg != ".." {
			return true
		}
	}
	return false
}

// gitDirCopy reports a source that is a git dir or its contents: .git, .git/, .git/., or a
// dir named like one (x.git).
func gitDirCopy(src string) bool {
	c := path.Clean(src)
	return path.Base(c) == ".git" || strings.HasSuffix(c, ".git")
}

func (pc *pathCollector) all(ws []word, access, cmd string, sb *sub) {
	for _, a := range ws {
		pc.word(a, access, cmd, sb)
	}
}

// operandWords maps parseOpts' operands (values, in order) back to their words.
func operandWords(out, ws []word, vals, operands []string) []word {
	j := len(vals) - 1
	// operands are the last matching values in order; walk back from the end.
	for i := len(operands) - 1; i >= 0; i-- {
		for j >= 0 && vals[j] != operands[i] {
			j--
		}
		if j < 0 {
			break
		}
		out = append(out, ws[j])
		j--
	}
	for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
		out[a], out[b] = out[b], out[a]
	}
	return out
}

// recursive reports grep's -r/-R/--recursive/--dereference-recursive.
// treeSearchers search every file below their operands, or below the cwd when given none,
// whatever their options: grep -r under another name, and grep's kin (ag, ack, ugrep, …).
var treeSearchers = map[string]bool{"rgrep": true, "ag": true, "ack": true, "ack-grep": true, "ugrep": true,
	"ug": true, "pt": true, "sift": true}

// searchesTree reports a search of every file below its operands (the cwd without any).
func searchesTree(name string, opts []opt) bool {
	return name == "rg" || treeSearchers[name] || strings.HasSuffix(name, "grep") && recursive(opts)
}

func recursive(opts []opt) bool {
	for _, o := range opts {
		if o.name == "r" || o.name == "R" || o.long && (longIs(o.name, "recursive") || longIs(o.name, "dereference-recursive")) ||
			(o.name == "d" || o.long && longIs(o.name, "directories")) && o.val == "recurse" {
			return true
		}
	}
	return false
}

// followsLinks reports the options with which a recursive read follows the symlinks it meets
// below its dirs: grep -R, rg -L, cp -L, and diff -r unless --no-dereference.
func followsLinks(name string, opts []opt) bool {
	if name == "diff" && recursive(opts) {
		return !slices.ContainsFunc(opts, func(o opt) bool { return o.long && longIs(o.name, "no-dereference") && len(o.name) > 2 })
	}
	for _, o := range opts {
		switch {
		case strings.HasSuffix(name, "grep") && (o.name == "R" || o.long && longIs(o.name, "dereference-recursive")),
			name == "rg" && (o.name == "L" || o.long && o.name == "follow"),
			name == "cp" && (o.name == "L" || o.long && longIs(o.name, "dereference")):
			return true
		}
	}
	return false
}

// listsThroughLinks reports a listing that walks a tree following the links it meets, so
// names and metadata of what they lead to: ls -LR, du -L (du walks the tree anyway), tree -l.
func listsThroughLinks(name string, opts []opt) bool {
	has := func(short, long string) bool {
		return slices.ContainsFunc(opts, func(o opt) bool { return !o.long && o.name == short || o.long && longIs(o.name, long) })
	}
	switch name {
	case "ls":
		return has("L", "dereference") && has("R", "recursive")
	case "du":
		return has("L", "dereference")
	case "tree":
		return slices.ContainsFunc(opts, func(o opt) bool { return !o.long && o.name == "l" })
	}
	return false
}

// recursiveCopy reports cp's and install's options that copy a directory whole.
func recursiveCopy(opts []opt) bool {
	for _, o := range opts {
		if !o.long && (o.name == "r" || o.name == "R" || o.name == "a") ||
			o.long && (longIs(o.name, "recursive") || longIs(o.name, "archive")) {
			return true
		}
	}
	return false
}

func anyLong(name string, longs []string) bool {
	for _, l := range longs {
		if longIs(name, l) {
			return true
		}
	}
	return false
}

// cdTarget is the directory a cd or pushd goes to: "~" for none, ok false when it is not
// static (or cd -, pushd +N, zsh's cd -N: a directory from the stack), or when there is more
// than one operand: zsh's `cd old new` goes to $PWD with old replaced by new.
func cdTarget(ws []word) (string, bool) {
	i := 1
	for i < len(ws) && ws[i].static && len(ws[i].val) > 1 && ws[i].val[0] == '-' {
		if ws[i].val == "--" {
			i++
			break
		}
		if strings.Trim(ws[i].val[1:], "0123456789") == "" {
			return "", false
		}
		i++
	}
	if i >= len(ws) {
		if baseName(ws[0].val) == "pushd" {
			// pushd alone swaps the top two entries of the stack (which zsh's dirs ARGS and
			// bash's pushd -n DIR fill without a cd): it goes to a directory from the stack.
			return "", false
		}
		return "~", true
	}
	a := ws[i]
	if !a.static || a.glob || a.val == "-" || strings.HasPrefix(a.val, "+") || i+1 < len(ws) {
		return "", false
	}
	return a.val, true
}

// trackCd updates the walker's directories after a cd/pushd/popd command: relative paths
// after a static cd are joined both to its target and to the directories before it (the cd
// may fail), a non-static one makes them unknown.
func (w *walker) trackCd(sb *sub) {
	if len(sb.args) == 0 || !sb.args[0].static {
		return
	}
	ws := shellPrecommands(sb.args)
	if len(ws) == 0 {
		w.dirsUnknown = true
		return
	}
	switch ws[0].val {
	// Scripts run in this shell, now or later (a DEBUG trap before each command): a cd in one
	// moves every command after it somewhere the line does not say.
	case "eval", "trap", "alias":
		if sb.opaque || sb.nested != nil && slices.ContainsFunc(sb.nested.Subcommands, changesDir) {
			w.dirsUnknown = true
		}
		return
	case "source", ".":
		w.dirsUnknown = true // a file's script, which the line does not show
		return
	case "mapfile", "readarray":
		// -C's callback is a script too (`mapfile -tC 'cd ..' a`).
		if slices.ContainsFunc(ws[1:], func(a word) bool {
			return !a.static || len(a.val) > 1 && a.val[0] == '-' && a.val[1] != '-' && strings.ContainsRune(a.val, 'C')
		}) {
			w.dirsUnknown = true
		}
		return
	case "cd", "pushd":
	case "popd":
		w.dirsUnknown = true
		return
	default:
		return
	}
	t, ok := cdTarget(ws)
	if !ok || !cdPathFree(t) && (cdVarNamed(w.src) || w.opts.Unconfined && !strings.HasPrefix(t, "~")) {
		// The line may set CDPATH, cdable_vars or HOME, which move a cd to a bare name or ~;
		// outside a sandbox the agent's environment may hold CDPATH too.
		w.dirsUnknown = true
		return
	}
	if strings.HasPrefix(t, "~") {
		if w.opts.Home == "" || !(t == "~" || strings.HasPrefix(t, "~/")) {
			w.dirsUnknown = true
			return
		}
		t = w.opts.Home + t[1:]
	}
	old := w.dirs
	if len(old) == 0 {
		if w.opts.Cwd == "" {
			w.dirsUnknown = true
			return
		}
		old = []string{path.Clean(w.opts.Cwd)}
	}
	next := make([]string, 0, 2*len(old))
	if path.IsAbs(t) {
		next = append(next, path.Clean(t))
	} else {
		for _, d := range old {
			next = append(next, path.Join(d, t))
		}
	}
	// Outside a sandbox the agent's environment may set CDPATH, which moves a cd to a bare
	// name (cd proj) but not one to a path (/x, ./x, ../x).
	if !w.opts.Unconfined || cdPathFree(t) {
		raw := ws[len(ws)-1].val
		plain := len(ws) == 2 && !strings.HasPrefix(raw, "-") && !strings.HasPrefix(raw, "~") &&
			!slices.Contains(strings.Split(raw, "/"), "..")
		w.cd = lastCd{pos: sb.pos, targets: slices.Clone(next), plain: plain}
	}
	for _, d := range old {
		if len(next) >= maxDirs {
			w.dirsUnknown = true
			break
		}
		if !containsStr(next, d) {
			next = append(next, d)
		}
	}
	w.dirs = next
}

// shellPrecommands returns ws without the words that run the command after them in the shell
// itself, as a cd there changes the shell's directory: builtin and command (bash's; -p and --
// with them), noglob and nocorrect (zsh's), one inside another (`command builtin cd DIR`). It
// returns nil when such a word is not static. command -v and -V only look the name up.
// changesDir reports whether a command may change the shell's directory: a cd, pushd or
// popd past builtin and command, or a command known only at run time.
func changesDir(s Subcommand) bool {
	argv := s.Argv
	for len(argv) > 1 && (argv[0] == "builtin" || argv[0] == "command" || argv[0] == "noglob" || argv[0] == "nocorrect" || argv[0] == "--" || argv[0] == "-p") {
		argv = argv[1:]
	}
	if len(argv) == 0 || s.Opaque {
		return s.Opaque
	}
	switch argv[0] {
	case "cd", "pushd", "popd", "":
		return true
	}
	return false
}

func shellPrecommands(ws []word) []word {
	for len(ws) > 1 {
		if !ws[0].static {
			return ws
		}
		switch ws[0].val {
		case "builtin", "command", "noglob", "nocorrect":
		default:
			return ws
		}
		cmd := ws[0].val == "command"
		ws = ws[1:]
		for len(ws) > 1 && ws[0].static && (ws[0].val == "--" || cmd && ws[0].val == "-p") {
			ws = ws[1:]
		}
		if !ws[0].static {
			return nil
		}
	}
	return ws
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
