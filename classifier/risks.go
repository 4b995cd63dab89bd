package classifier

import (
	"maps"
	"math/bits"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/sandboxd/sandboxd/internal/globwalk"
)

// Risk names reported in Classification.Risks.
const (
	RiskDestructive           = "destructive"
	RiskNetwork               = "network"
	RiskExfiltration          = "exfiltration"
	RiskPrivilege             = "privilege"
	RiskPackageInstall        = "package_install"
	RiskOutsideWorkspaceWrite = "outside_workspace_write"
	RiskCriticalPathRm        = "critical_path_rm"
)

var networkCmds = map[string]bool{
	"curl": true, "wget": true, "ssh": true, "scp": true, "sftp": true, "rsync": true, "nc": true,
	"ncat": true, "netcat": true, "telnet": true, "ftp": true, "socat": true, "ping": true,
	"dig": true, "nslookup": true, "host": true, "http": true, "https": true, "aria2c": true,
	"lftp": true, "mosh": true, "gh": true, "xh": true, "websocat": true, "tftp": true,
}

var privilegeCmds = map[string]bool{
	"sudo": true, "su": true, "doas": true, "pkexec": true, "runuser": true, "setcap": true,
	"chown": true, "chgrp": true, "visudo": true, "passwd": true, "usermod": true, "useradd": true,
	"groupadd": true, "chroot": true, "mount": true, "umount": true, "insmod": true, "modprobe": true,
	"setfacl": true, "nsenter": true, "unshare": true, "capsh": true,
}

var destructiveCmds = map[string]bool{
	"dd": true, "shred": true, "wipefs": true, "fdisk": true, "sfdisk": true, "parted": true,
	"shutdown": true, "reboot": true, "halt": true, "poweroff": true, "truncate": true,
	"mkswap": true, "killall": true, "pkill": true,
}

// secretMarkers are path fragments that name credentials.
var secretMarkers = []string{
	".ssh/", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", ".aws/credentials", ".netrc",
	"/etc/shadow", ".git-credentials", ".npmrc", ".pypirc", ".docker/config.json", ".kube/config",
	".gnupg", ".pgpass", "credentials.json", ".vault-token", "/proc/self/environ",
}

// secretByFirst groups secretMarkers by their first byte, so isSecret tries
// only the markers that can start at each position; secretClass marks the
// bytes that start a marker (secretStart) and the bytes one of which every
// marker holds (secretSep: . / _).
var (
	secretByFirst [256][]string
	secretClass   [256]uint8
)

const (
	secretStart uint8 = 1 << iota
	secretSep
)

func init() {
	secretClass['.'] |= secretSep
	secretClass['/'] |= secretSep
	secretClass['_'] |= secretSep
	for _, m := range secretMarkers {
		if !strings.ContainsAny(m, "./_") {
			panic("classifier: secret marker without . / or _: " + m)
		}
		secretByFirst[m[0]] = append(secretByFirst[m[0]], m)
		secretClass[m[0]] |= secretStart
	}
}

func isSecret(s string) bool {
	// Every marker holds one of . / _; most words do not, and this runs on
	// every word of every command.
	i := 0
	for i < len(s) && secretClass[s[i]]&secretSep == 0 {
		i++
	}
	if i == len(s) {
		return false
	}
	// One pass tries the markers that start at each byte: the same as
	// strings.Contains of each marker.
	for i := 0; i < len(s); i++ {
		if secretClass[s[i]]&secretStart == 0 {
			continue
		}
		for _, m := range secretByFirst[s[i]] {
			if strings.HasPrefix(s[i:], m) {
				return true
			}
		}
	}
	// curl -F f=@.env and -d @.env name the file after = or @.
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '=' || s[i] == '@' {
			s = s[i+1:]
			break
		}
	}
	b := path.Base(s)
	return b == ".env" || strings.HasPrefix(b, ".env.")
}

// riskSet is a set of risks, one bit each, in the sorted order of their
// names so that listing the bits lists the names sorted.
type riskSet uint8

const (
	bitCriticalPathRm riskSet = 1 << iota
	bitDestructive
	bitExfiltration
	bitNetwork
	bitOutsideWorkspaceWrite
	bitPackageInstall
	bitPrivilege
)

var riskNames = [...]string{RiskCriticalPathRm, RiskDestructive, RiskExfiltration, RiskNetwork,
	RiskOutsideWorkspaceWrite, RiskPackageInstall, RiskPrivilege}

func init() {
	if !sort.StringsAreSorted(riskNames[:]) {
		panic("classifier: riskNames not sorted")
	}
}

// list returns the names of the risks in s, sorted; never nil.
func (s riskSet) list() []string {
	out := make([]string, 0, bits.OnesCount8(uint8(s)))
	for i, n := range riskNames {
		if s&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// risks computes the auto-mode risk signals of a line.
func risks(subs []*sub, out []Subcommand, opts Options) []string {
	var set riskSet
	var vars map[string]string // shellVars, made for the first rm that needs them
	varsOf := func() map[string]string {
		if vars == nil {
			vars = shellVars(subs, opts)
		}
		return vars
	}
	network, envDump := false, false
	for i, sb := range subs {
		words := out[i].DenyPrefix
		for _, r := range sb.redirs {
			if strings.HasPrefix(r.Target, "/dev/tcp/") || strings.HasPrefix(r.Target, "/dev/udp/") || r.mayBeNet {
				network = true
			}
			if r.Write {
				if strings.HasPrefix(r.Target, "/dev/sd") || strings.HasPrefix(r.Target, "/dev/nvme") {
					set |= bitDestructive
				}
				if !writeInside(r.Target, opts) {
					set |= bitOutsideWorkspaceWrite
				}
			}
		}
		for _, a := range sb.args {
			if strings.IndexByte(a.src, '/') >= 0 && strings.Contains(a.src, "/dev/") && (strings.Contains(a.src, "/dev/tcp/") || strings.Contains(a.src, "/dev/udp/")) {
				network = true
			}
		}
		if len(sb.args) > 0 {
			switch first := sb.args[0].val; first {
			case "sudo", "su", "doas", "pkexec", "runuser":
				set |= bitPrivilege
			}
		}
		if len(words) == 0 || len(sb.args) == 0 {
			continue
		}
		name := path.Base(words[0])
		args := words[1:]
		cr := lookupCmd(name).risk
		if cr&cmdNetwork != 0 {
			network = true
		}
		if cr&cmdPrivilege != 0 {
			set |= bitPrivilege
		}
		if cr&cmdDestructive != 0 || strings.HasPrefix(name, "mkfs") {
			set |= bitDestructive
		}
		if name == "env" || name == "printenv" {
			envDump = true
		}
		if out[i].Opaque && strings.ContainsAny(words[0], "$`*?[") && criticalRm(sb, opts, varsOf()) {
			// x=rm; $x -rf *, /bin/r[m] -rf ~: a command known only when it runs may be rm.
			set |= bitCriticalPathRm | bitDestructive
		}
		switch name {
		case "rm", "rmdir", "unlink":
			if name == "rm" && hasFlag(args, "rRf", "recursive", "force") {
				set |= bitDestructive
			}
			if criticalRm(sb, opts, varsOf()) {
				set |= bitCriticalPathRm
				set |= bitDestructive
			}
		case "chmod", "chown", "chgrp":
			if hasFlag(args, "R", "recursive") {
				set |= bitDestructive
			}
			if name == "chmod" {
				for _, a := range args {
					if strings.Contains(a, "+s") || len(a) == 4 && strings.ContainsAny(a[:1], "2467") && strings.Trim(a, "01234567") == "" {
						set |= bitPrivilege
					}
				}
			}
		case "find":
			if hasWord(args, "-delete") {
				set |= bitDestructive
			}
			if criticalFind(sb, opts) {
				set |= bitCriticalPathRm | bitDestructive
			}
		case "git":
			gitRisks(args, &set, &network)
		case "kill":
			if hasWord(args, "-9") || hasWord(args, "-KILL") {
				set |= bitDestructive
			}
		}
		if isPackageInstall(name, args) {
			set |= bitPackageInstall
			network = true
		}
		if isWriteCmd(name) && writesOutside(name, args, opts) {
			set |= bitOutsideWorkspaceWrite
		}
	}
	if network {
		set |= bitNetwork
		// Secrets matter only with the network, so they are looked for only then.
		if envDump || namesSecret(subs) {
			set |= bitExfiltration
		}
	}
	return set.list()
}

// namesSecret reports whether a redirection target or a word of any command
// names a credential file.
func namesSecret(subs []*sub) bool {
	for _, sb := range subs {
		for _, r := range sb.redirs {
			if isSecret(r.Target) {
				return true
			}
		}
		for _, a := range sb.args {
			if isSecret(a.val) || !a.static && isSecret(a.src) {
				return true
			}
		}
	}
	return false
}

func hasWord(args []string, w string) bool {
	for _, a := range args {
		if a == w {
			return true
		}
	}
	return false
}

// gitRisks flags history-destroying and network git commands.
func gitRisks(args []string, set *riskSet, network *bool) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-C" || args[i] == "-c" {
			i++
		}
		i++
	}
	if i >= len(args) {
		return
	}
	sub, rest := args[i], args[i+1:]
	switch sub {
	case "push":
		*network = true
		for _, a := range rest {
			if a == "-f" || strings.HasPrefix(a, "--force") || strings.HasPrefix(a, "+") || a == "--delete" || a == "-d" || a == "--mirror" {
				*set |= bitDestructive
			}
		}
	case "fetch", "pull", "clone", "ls-remote", "submodule":
		*network = true
	case "remote":
		if len(rest) > 0 && (rest[0] == "update" || rest[0] == "show" || rest[0] == "prune") {
			*network = true
		}
	case "reset":
		if hasWord(rest, "--hard") || hasWord(rest, "--merge") || hasWord(rest, "--keep") {
			*set |= bitDestructive
		}
	case "clean":
		if hasFlag(rest, "f", "force") {
			*set |= bitDestructive
		}
	case "checkout", "restore", "switch":
		if hasFlag(rest, "f", "force", "discard-changes") || hasWord(rest, "--") || hasWord(rest, ".") {
			*set |= bitDestructive
		}
	case "branch":
		if hasFlag(rest, "D", "delete") || hasWord(rest, "-d") {
			*set |= bitDestructive
		}
	case "stash":
		if len(rest) > 0 && (rest[0] == "drop" || rest[0] == "clear") {
			*set |= bitDestructive
		}
	case "filter-branch", "filter-repo", "gc", "prune", "update-ref", "reflog":
		if sub != "reflog" || len(rest) > 0 && (rest[0] == "expire" || rest[0] == "delete") {
			*set |= bitDestructive
		}
	}
}

// isPackageInstall recognises package manager installs.
func isPackageInstall(name string, args []string) bool {
	switch name {
	case "apt", "apt-get", "aptitude", "yum", "dnf", "zypper", "brew", "port", "snap", "flatpak",
		"pip", "pip3", "pipx", "gem", "cargo", "conda", "mamba", "composer", "dpkg", "rpm",
		"apk", "pacman", "npm", "pnpm", "yarn", "bun", "go", "uv", "python", "python3":
	default:
		return false // the names the switch below knows
	}
	first := ""
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			first = a
			break
		}
	}
	switch name {
	case "apt", "apt-get", "aptitude", "yum", "dnf", "zypper", "brew", "port", "snap", "flatpak",
		"pip", "pip3", "pipx", "gem", "cargo", "conda", "mamba", "composer", "dpkg", "rpm":
		switch first {
		case "install", "reinstall", "add", "require", "upgrade", "update":
			return true
		}
		return (name == "dpkg" && hasFlag(args, "i", "install")) || (name == "rpm" && hasFlag(args, "iU", "install", "upgrade"))
	case "apk":
		return first == "add"
	case "pacman":
		return hasFlag(args, "S", "sync") || hasFlag(args, "U", "upgrade")
	case "npm", "pnpm", "yarn", "bun":
		switch first {
		case "install", "i", "add", "ci", "update", "upgrade", "in", "isntall":
			return true
		}
		return name == "yarn" && len(args) == 0
	case "go":
		return first == "install" || first == "get"
	case "uv":
		return first == "pip" && len(args) > 1 || first == "add" || first == "tool"
	case "python", "python3":
		return len(args) >= 3 && args[0] == "-m" && args[1] == "pip" && args[2] == "install"
	}
	return false
}

func isWriteCmd(name string) bool {
	switch name {
	case "rm", "rmdir", "mv", "cp", "touch", "mkdir", "ln", "tee", "install", "chmod", "chown",
		"chgrp", "truncate", "shred", "unlink", "rsync":
		return true
	}
	return false
}

// writesOutside reports whether a writing command names a path outside the
// session's directories. For cp, ln, install and rsync only the destination
// (last operand) is written.
func writesOutside(name string, args []string, opts Options) bool {
	var operands []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			operands = append(operands, a)
		}
	}
	switch name {
	case "cp", "ln", "install", "rsync":
		if len(operands) > 0 {
			operands = operands[len(operands)-1:]
		}
	case "chmod", "chown", "chgrp":
		if len(operands) > 0 {
			operands = operands[1:]
		}
	}
	for _, o := range operands {
		if !writeInside(o, opts) {
			return true
		}
	}
	return false
}

// writeInside reports whether a write to target stays in the workspace. A
// target we cannot resolve (not static, ~user) counts as outside. /tmp is
// private to the sandbox, so writes there stay in.
func writeInside(target string, opts Options) bool {
	if harmlessTargets[target] {
		return true
	}
	if target == "" || strings.ContainsAny(target, "$`") {
		return false
	}
	p := target
	if strings.HasPrefix(p, "~") {
		if opts.Home == "" || !(p == "~" || strings.HasPrefix(p, "~/")) {
			return false
		}
		p = opts.Home + p[1:]
	}
	if !path.IsAbs(p) {
		if opts.Cwd == "" {
			c := path.Clean(p)
			return c != ".." && !strings.HasPrefix(c, "../")
		}
		p = path.Join(opts.Cwd, p)
	}
	p = path.Clean(p)
	if p == "/tmp" || strings.HasPrefix(p, "/tmp/") {
		return true
	}
	if opts.Cwd == "" && len(opts.WorkDirs) == 0 {
		return false
	}
	return inDirs(p, opts)
}

// criticalRm implements COMPAT's critical-path rm: rm or rmdir of /, a
// top-level directory, $HOME, the cwd or one of its ancestors, or a glob
// under a variable (rm -rf "$DIR"/*).
func criticalRm(sb *sub, opts Options, vars map[string]string) bool {
	start := 1
	for i, a := range sb.args {
		if a.static && (a.val == "rm" || a.val == "rmdir" || a.val == "unlink" || strings.HasSuffix(a.val, "/rm")) {
			start = i + 1
			break
		}
	}
	if sb.listedIn != "" && xargsIn(sb.args[:max(0, start-1)]) && slices.ContainsFunc(sb.args[start:], rmFlags) {
		// ls | xargs rm -rf: every entry of the dir listed, which is that dir emptied.
		listed := word{val: strings.TrimSuffix(sb.listedIn, "/") + "/*", static: true, glob: true}
		if staticTargetCritical(listed, sb.dirs, opts, sb.dirsUnknown) {
			return true
		}
	}
	dirs, chdir := wrapperDirs(sb.args[:max(0, start-1)], sb.dirs, opts.Cwd)
	// env -C DIR: DIR may be a link to the cwd or above (env -C me rm -rf *), which no name
	// shows, and the shell expands a glob where the line is, not in DIR.
	dirUnknown := sb.dirsUnknown || chdir || wrapperChdir(sb.args[:max(0, start-1)])
	for _, a := range sb.args[start:] {
		if a.static && strings.HasPrefix(a.val, "-") {
			continue
		}
		if !a.static && procAlias(dropQuoteBraces(a.src)) {
			return true // /proc/$$/cwd/, "/proc/$PPID/root/home": a critical dir by another name
		}
		if rest, ok := strings.CutPrefix(strings.ReplaceAll(dropQuoteBraces(a.src), "$(pwd)", "$PWD"), "$PWD/"); ok && dirUnknown && mayNameCritical(rest, opts) {
			return true // cd "$X" && rm -rf "$PWD/proj": $PWD may be the cwd's parent
		}
		if a.param {
			s := dropQuoteBraces(a.src)
			s = strings.TrimRight(s, "/*")
			if a.glob || s == "$HOME" || s == "$PWD" || s == "" {
				return true
			}
			if withPWD(sb, opts, vars, func(vars map[string]string) bool { return readingCritical(a, dirs, opts, dirUnknown, vars) }) {
				return true
			}
			continue
		}
		if !a.static && !a.extGlob && withPWD(sb, opts, vars, func(vars map[string]string) bool { return readingCritical(a, dirs, opts, dirUnknown, vars) }) {
			return true // ../$(echo proj): ../ with the substitution empty
		}
		if a.extGlob {
			a.val, a.static, a.glob = a.src, true, true // @(*), +(?): a glob of its text
		}
		if a.static && staticTargetCritical(a, dirs, opts, dirUnknown) {
			return true
		}
	}
	return false
}

// withPWD reports whether f holds with vars giving $PWD (and $(pwd)) each value it may have
// where sb runs: each of the line's dirs there (the session's cwd without a cd), or, after a
// cd the line cannot follow, none. A value the line gives PWD itself stands.
func withPWD(sb *sub, opts Options, vars map[string]string, f func(map[string]string) bool) bool {
	if _, set := vars["PWD"]; set || opts.Cwd == "" {
		return f(vars)
	}
	if sb.dirsUnknown {
		return f(vars)
	}
	for _, d := range lineDirs(sb.dirs, opts) {
		with := maps.Clone(vars)
		with["PWD"] = d
		if f(with) {
			return true
		}
	}
	return false
}

// readingCritical judges a target known only when it runs as each value it takes with its
// expansions empty, at their defaults, or at the values the line gives them
// (expansionReadings): ~/pro${x:-j} is ~/proj, ../$x is ../proj after x=proj.
func readingCritical(a word, dirs []string, opts Options, dirUnknown bool, vars map[string]string) bool {
	readings := expansionReadings(a.node, vars)
	if varsOverflowed(vars) {
		return true // a value past the bound: the target may be any path
	}
	for _, r := range readings {
		if path.Clean(r) == "." {
			continue // ./$f: rm refuses ".", and a loop's ./$f is common
		}
		rw := word{val: r, src: r, static: true, glob: strings.ContainsAny(r, "*?["), tilde: r == "~" || strings.HasPrefix(r, "~/")}
		if staticTargetCritical(rw, dirs, opts, dirUnknown) {
			return true
		}
	}
	return false
}

// expansionReadings are the values w takes with every expansion empty but those with a
// default (${x:-d}, ${x-d}, ${x:=d}), taken (for ${x-d} also not, x being set and empty), and
// those vars holds (the line's own values). Nil for a word that starts with an expansion and
// has neither, or with parts it does not follow (an extended glob).
func expansionReadings(w *syntax.Word, vars map[string]string) []string {
	if w == nil {
		return nil
	}
	empty, defaults, known, ok := wordReadings(w, vars)
	// A word that starts with its own text (../$x, /home/u$x) is read with its expansions
	// empty too; one that starts with an expansion ("$dir"/x.o, "$f") only where a default
	// or a value of the line's is known.
	if !ok || !known && !(len(w.Parts) > 0 && startsLiteral(w.Parts[0])) {
		return nil
	}
	if empty == defaults {
		return []string{empty}
	}
	return []string{empty, defaults}
}

// wordReadings are w's two readings (expansionReadings): every expansion empty but the ones
// with a default set (${x:-d}) or a value in vars, and every default taken. known says some
// default or value was used; ok false, a part it does not follow (an extended glob).
//
// Past maxVarsLen bytes of the line's values in one word ($x$x$x…) it stops, not ok, and
// marks vars overflowed (varsOverflowed): what the word holds is not told.
func wordReadings(w *syntax.Word, vars map[string]string) (empty, defaults string, known, ok bool) {
	var e, d strings.Builder
	given := 0 // bytes of vars' values written, against maxVarsLen
	value := func(v string) bool {
		if given += len(v); given > maxVarsLen {
			vars[varsOverflow] = ""
			return false
		}
		e.WriteString(v)
		d.WriteString(v)
		return true
	}
	var walk func(parts []syntax.WordPart) bool
	walk = func(parts []syntax.WordPart) bool {
		for _, p := range parts {
			switch p := p.(type) {
			case *syntax.Lit:
				e.WriteString(p.Value)
				d.WriteString(p.Value)
			case *syntax.SglQuoted:
				v := p.Value
				if p.Dollar {
					// $'../\x70roj': its escapes decoded, as bash does.
					lit, err := literal(&syntax.Word{Parts: []syntax.WordPart{p}})
					if err != nil {
						return false
					}
					v = lit
				}
				e.WriteString(v)
				d.WriteString(v)
			case *syntax.DblQuoted:
				if !walk(p.Parts) {
					return false
				}
			case *syntax.ParamExp:
				if v, set := vars[p.Param.Value]; set && p.Exp == nil && p.Slice == nil && p.Repl == nil && !p.Length && !p.Excl && p.Index == nil {
					known = true
					if !value(v) {
						return false
					}
					continue
				}
				if p.Exp == nil || p.Exp.Word == nil || p.Slice != nil || p.Repl != nil || p.Length || p.Excl {
					continue
				}
				switch p.Exp.Op {
				case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
					known = true
					_, def, _, dok := wordReadings(p.Exp.Word, vars)
					if !dok {
						return false
					}
					if given += len(def); given > maxVarsLen {
						vars[varsOverflow] = ""
						return false
					}
					d.WriteString(def)
					if p.Exp.Op == syntax.DefaultUnsetOrNull || p.Exp.Op == syntax.AssignUnsetOrNull {
						e.WriteString(def)
					}
				}
			case *syntax.CmdSubst:
				if v, ok := substReading(p, vars); ok {
					known = true
					if !value(v) {
						return false
					}
				}
			case *syntax.ArithmExp, *syntax.ProcSubst:
			default:
				return false
			}
		}
		return true
	}
	ok = walk(w.Parts)
	return e.String(), d.String(), known, ok
}

// startsLiteral reports a word part that is text of its own: a literal, or quotes that open
// with one.
func startsLiteral(p syntax.WordPart) bool {
	switch p := p.(type) {
	case *syntax.Lit, *syntax.SglQuoted:
		return true
	case *syntax.DblQuoted:
		return len(p.Parts) > 0 && startsLiteral(p.Parts[0])
	}
	return false
}

// shellVars are the values the line's plain assignments give (x=proj; rm -rf ../$x), the
// last one of each name, beside the shell's own names for the dirs the critical-path check is
// about (x="rm -rf $PWD"; $x), PWD and HOME, unless the line sets them. A value with
// expansions is kept when it has one reading (x=$(dirname "$PWD")); any other is left out.
//
// A value past maxVarLen, or one that would take the values held past maxVarsLen, is left
// out too, and vars marked overflowed (varsOverflowed): x=$x$x$x$x, ten times over, is a
// megabyte, and the checks that read it (the critical-path rm, opaqueCritical) take such a
// line as one that may remove anything, not as one whose value is empty.
func shellVars(subs []*sub, opts Options) map[string]string {
	vars := map[string]string{}
	held := 0 // bytes of the values kept, against maxVarsLen
	keep := func(name, v string) {
		if name == varsOverflow {
			return
		}
		if len(v) > maxVarLen || held+len(v) > maxVarsLen {
			delete(vars, name)
			vars[varsOverflow] = ""
			return
		}
		held += len(v)
		vars[name] = v
	}
	forget := func(name string) {
		if name != varsOverflow {
			delete(vars, name)
		}
	}
	for name, v := range map[string]string{"PWD": opts.Cwd, "HOME": opts.Home} {
		if v != "" {
			vars[name] = v
		}
	}
	// After a cd, $PWD and $(pwd) are where it went, not the session's cwd: each command's
	// values are read with its own ($PWD unknown where it may be in more than one dir), and
	// the line's, for the checks that read them, have none (withPWD gives each command its).
	moved := slices.ContainsFunc(subs, func(sb *sub) bool { return len(sb.dirs) > 0 || sb.dirsUnknown })
	pwdSet := false
	for _, sb := range subs {
		if moved && !pwdSet {
			switch {
			case len(sb.dirs) == 1 && !sb.dirsUnknown:
				vars["PWD"] = sb.dirs[0]
			case len(sb.dirs) == 0 && !sb.dirsUnknown && opts.Cwd != "":
				vars["PWD"] = opts.Cwd
			default:
				delete(vars, "PWD")
			}
		}
		pwdSet = pwdSet || slices.ContainsFunc(sb.assigns, func(a assign) bool { return a.name == "PWD" })
		if len(sb.args) > 1 && sb.args[0].static && declarers[sb.args[0].val] {
			// export p=$(dirname "$PWD"), local d=..: the values the declaration gives.
			for _, a := range sb.args[1:] {
				name, v, ok := strings.Cut(a.val, "=")
				if !ok || name == "" || strings.ContainsAny(name, "[-$") {
					continue
				}
				if !a.static {
					// The parser gives a declaration's NAME=VALUE as an assignment: the node is
					// the value's.
					if v, ok = fullReading(a.node, vars); !ok {
						forget(name)
						continue
					}
				}
				keep(name, v)
				pwdSet = pwdSet || name == "PWD"
			}
		}
		for _, a := range sb.assigns {
			if strings.ContainsAny(a.name, "[") || a.name == "" {
				continue
			}
			switch _, v, _ := strings.Cut(a.word.val, "="); {
			case a.static:
				keep(a.name, v)
			case a.word.node != nil:
				if v, ok := fullReading(a.word.node, vars); ok {
					keep(a.name, v)
					continue
				}
				fallthrough
			default:
				forget(a.name) // set to what the line does not show
			}
		}
	}
	if moved && !pwdSet {
		delete(vars, "PWD")
	}
	return vars
}

const (
	// maxVarLen bounds one value shellVars holds, and maxVarsLen all of them, and the bytes
	// of values one word's readings hold (wordReadings). Paths and the commands a value holds
	// are far shorter; past them the value is not told.
	maxVarLen  = 4096
	maxVarsLen = 16 * maxVarLen
	// varsOverflow is the key vars holds when a value went past the bounds: no variable is
	// named with a $.
	varsOverflow = "$overflow"
)

// varsOverflowed reports whether a value the line gives went past maxVarLen or maxVarsLen:
// what its variable holds is not told, and may be anything.
func varsOverflowed(vars map[string]string) bool {
	_, over := vars[varsOverflow]
	return over
}

// fullReading is the one value w has when each of its expansions is known: a variable vars
// holds, a substitution substReading reads. ok is false for any other.
func fullReading(w *syntax.Word, vars map[string]string) (string, bool) {
	if w == nil {
		return "", false
	}
	known := true
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp:
			_, set := vars[n.Param.Value]
			known = known && set && n.Exp == nil && n.Slice == nil && n.Repl == nil && !n.Length && !n.Excl && n.Index == nil
			return false
		case *syntax.CmdSubst:
			_, ok := substReading(n, vars)
			known = known && ok
			return false
		case *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob, *syntax.BraceExp:
			known = false
		}
		return known
	})
	if !known {
		return "", false
	}
	e, d, _, ok := wordReadings(w, vars)
	return e, ok && e == d
}

// declarers are the builtins that give variables the values their NAME=VALUE operands hold.
var declarers = map[string]bool{"export": true, "local": true, "declare": true, "typeset": true, "readonly": true}

// substReading is the one value a command substitution of a line gives when the command is
// one whose output follows from its words (pwd, dirname, basename, realpath, cd DIR && pwd):
// $(dirname "$PWD") is the cwd's parent. ok is false for any other.
func substReading(cs *syntax.CmdSubst, vars map[string]string) (string, bool) {
	pwd, ok := vars["PWD"]
	if !ok {
		return "", false
	}
	stmts := cs.Stmts
	if len(stmts) == 1 {
		if b, isAnd := stmts[0].Cmd.(*syntax.BinaryCmd); isAnd && b.Op == syntax.AndStmt {
			stmts = []*syntax.Stmt{b.X, b.Y} // cd .. && pwd
		}
	}
	var args [][]string
	for i, st := range stmts {
		c, isCall := st.Cmd.(*syntax.CallExpr)
		// A redirection of the cd's output (cd .. >/dev/null) leaves pwd's; of the last's, none.
		if !isCall || len(c.Args) == 0 || len(c.Assigns) > 0 || len(st.Redirs) > 0 && i == len(stmts)-1 || st.Negated || st.Background {
			return "", false
		}
		ws := make([]string, 0, len(c.Args))
		for k, a := range c.Args {
			if k == 1 && len(stmts) == 2 && i == 1 && isPWD(a) {
				ws = append(ws, "$PWD") // cd .. && echo "$PWD": where the cd went
				continue
			}
			e, d, _, ok := wordReadings(a, vars)
			if !ok || e != d || strings.ContainsAny(e, "*?[") {
				return "", false
			}
			if lit := len(a.Parts) > 0 && isLit(a.Parts[0]); lit && (e == "~" || strings.HasPrefix(e, "~/")) {
				home, ok := vars["HOME"]
				if !ok {
					return "", false
				}
				e = home + e[1:]
			} else if lit && strings.HasPrefix(e, "~") {
				return "", false // ~user, ~+
			}
			ws = append(ws, e)
		}
		if ws[0] == "builtin" || ws[0] == "command" {
			ws = ws[1:]
		}
		if len(ws) == 0 {
			return "", false
		}
		args = append(args, ws)
	}
	abs := func(p string) string {
		if !path.IsAbs(p) {
			p = path.Join(pwd, p)
		}
		return path.Clean(p)
	}
	// operand is the one operand of a command whose options are among opts (-P, -fn, --).
	operand := func(ws []string, opts string) (string, bool) {
		var ops []string
		dashes := false
		for _, w := range ws[1:] {
			switch {
			case dashes || !strings.HasPrefix(w, "-") || w == "-":
				ops = append(ops, w)
			case w == "--":
				dashes = true
			case len(w) > 1 && w[1] != '-' && strings.Trim(w[1:], opts) == "":
			default:
				return "", false
			}
		}
		if len(ops) != 1 {
			return "", false
		}
		return ops[0], true
	}
	isPwd := func(ws []string) bool {
		_, onlyOptions := operand(slices.Concat(ws, []string{"."}), "LP") // pwd, pwd -P
		return (ws[0] == "pwd" || ws[0] == "/bin/pwd" || ws[0] == "/usr/bin/pwd") && onlyOptions
	}
	switch {
	case len(args) == 2 && args[0][0] == "cd":
		dir, ok := operand(args[0], "LPe@")
		if !ok || !(isPwd(args[1]) || slices.Equal(args[1], []string{"echo", "$PWD"})) {
			return "", false
		}
		return abs(dir), true
	case len(args) != 1:
		return "", false
	}
	ws := args[0]
	if isPwd(ws) {
		return pwd, true
	}
	switch ws[0] {
	case "dirname":
		if p, ok := operand(ws, ""); ok {
			return path.Dir(strings.TrimRight(p, "/")), true
		}
	case "basename":
		if p, ok := operand(ws, ""); ok {
			return path.Base(p), true
		}
	case "realpath", "readlink":
		opts := "sLPqemez"
		if ws[0] == "readlink" {
			opts = "femnqsvz"
			if !slices.ContainsFunc(ws[1:], func(w string) bool { return len(w) > 1 && w[1] != '-' && strings.ContainsAny(w, "fem") }) {
				return "", false // readlink alone prints a link's target, not a path
			}
		}
		if p, ok := operand(ws, opts); ok {
			return abs(p), true
		}
	}
	return "", false
}

// isPWD reports a word that is $PWD alone ($PWD, "$PWD", ${PWD}).
func isPWD(w *syntax.Word) bool {
	parts := w.Parts
	if len(parts) == 1 {
		if dq, ok := parts[0].(*syntax.DblQuoted); ok {
			parts = dq.Parts
		}
	}
	if len(parts) != 1 {
		return false
	}
	p, ok := parts[0].(*syntax.ParamExp)
	return ok && p.Param.Value == "PWD" && p.Exp == nil && p.Slice == nil && p.Repl == nil && !p.Length && !p.Excl && p.Index == nil
}

// relativeProcAlias is procAlias of a relative target (or ~'s) from where it is taken: from a
// cwd the line knows (the session's, or a cd's), */x can no more be /proc than any */x; from
// one it cannot follow (or none known), it is judged as written, as if from /.
func relativeProcAlias(a word, dirs []string, opts Options, dirUnknown bool) bool {
	if path.IsAbs(a.val) {
		return false
	}
	if a.tilde || dirUnknown || opts.Cwd == "" {
		return procAlias(a.val) || procAlias(path.Clean(a.val))
	}
	if len(dirs) == 0 {
		dirs = []string{opts.Cwd}
	}
	for _, d := range dirs {
		if p := strings.TrimSuffix(d, "/") + "/" + a.val; procAlias(p) || procAlias(path.Clean(p)) {
			return true
		}
	}
	return false
}

// procAlias reports a path that may lead under /proc or through one of /dev's links into it
// (/dev/fd, /dev/stdin, …), where a process's cwd, root and open dirs are other names for any
// directory: a segment that is, or as a glob may be, proc (or dev followed by fd or std*) at
// the root, after only ..s (../../proc), or after an expansion ($x/proc). The kernel follows
// the dots after it (/dev/fd/.. is /proc/self), so those are not cleaned away.
func procAlias(p string) bool {
	var segs []string
	for _, seg := range strings.Split(p, "/") {
		if seg != "" && seg != "." {
			segs = append(segs, seg) // /dev/./fd and //dev//fd are /dev/fd
		}
	}
	may := func(seg, name string) bool {
		ok, err := path.Match(strings.ReplaceAll(seg, "[!", "[^"), name)
		return seg == name || ok || err != nil && strings.ContainsAny(seg, "*?[")
	}
	for i, seg := range segs {
		if i > 0 && segs[i-1] != ".." && !strings.ContainsAny(segs[i-1], "$`") {
			return false // below a named dir; a cleaned path is judged as well
		}
		if may(seg, "proc") {
			return true
		}
		if may(seg, "dev") && i+1 < len(segs) {
			for _, n := range []string{"fd", "stdin", "stdout", "stderr"} {
				if may(segs[i+1], n) {
					return true
				}
			}
		}
	}
	return false
}

// matchAll reports a glob path segment that may match every name of a directory: wildcards,
// bracket expressions and extended-glob operators only, with a * or a repetition among them
// (*, **, ?*, [!.]*, [[:alnum:]]*, +(?), @(*)), a negated extglob (!(x)), or an extglob one of
// whose alternatives does (@(x|*)). A literal character elsewhere (*.o, a*) picks names.
func matchAll(seg string) bool {
	if strings.Contains(seg, "!(") {
		return true
	}
	if i := strings.IndexByte(seg, '('); i >= 0 && strings.HasSuffix(seg, ")") {
		for _, alt := range strings.Split(seg[i+1:len(seg)-1], "|") {
			if matchAll(alt) || alt == "" && strings.ContainsAny(seg[:i], "*") {
				return true
			}
		}
	}
	star := strings.Contains(seg, "*") || strings.Contains(seg, "+(")
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; c {
		case '*', '?', '@', '+', '!', '(', ')', '|':
		case '[':
			j := globwalk.BracketEnd(seg, i)
			if j < 0 {
				return false
			}
			i = j
		default:
			return false
		}
	}
	return star
}

// splitGlob is path.Split for a glob: a / inside a bracket expression ([!/]) does not end a
// segment.
func splitGlob(p string) (dir, last string) {
	cut := -1
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '[':
			if j := globwalk.BracketEnd(p, i); j >= 0 {
				i = j
			}
		case '/':
			cut = i
		}
	}
	return p[:cut+1], p[cut+1:]
}

// removesFiles reports a line that may remove a directory: an rm -r or -d, an rmdir, or a
// find that deletes.
func removesFiles(subs []*sub) bool {
	for _, sb := range subs {
		vals := make([]string, len(sb.args))
		for i, b := range sb.args {
			vals[i] = b.val
		}
		for i, a := range sb.args {
			if !a.static {
				continue
			}
			switch baseName(a.val) {
			case "rmdir":
				return true
			case "rm":
				if hasFlag(vals[i+1:], "rRd", "recursive", "dir") {
					return true
				}
			case "find":
				if findRemoves(vals[i+1:]) {
					return true
				}
			}
		}
	}
	return false
}

// maxOpaqueTexts bounds the texts of an opaque line read as scripts (opaqueCritical); past it
// the line is taken as critical.
const maxOpaqueTexts = 32

// opaqueCritical judges a line that runs what no word of it shows (eval "$x", hash -p, a
// function that runs "$@", /proc/self/exe -c) for the critical-path rm: any command of it
// given rm's flags is judged as rm would be (hash -p /bin/rm r; r -rf *, f rm -rf ~), and
// any text it holds is judged as a script (x='rm -rf *'; eval "$x", bash -c "$(printf 'rm
// -rf *')").
func (w *walker) opaqueCritical() bool {
	texts := 0
	vars := shellVars(w.subs, w.opts)
	if varsOverflowed(vars) {
		return true // a value too long to hold: what it runs is not told
	}
	// IFS=,; x="rm,-rf,.."; $x: the line's own IFS splits its texts.
	split := strings.NewReplacer()
	if ifs, ok := vars["IFS"]; ok && ifs != "" {
		var pairs []string
		for _, c := range ifs {
			pairs = append(pairs, string(c), " ")
		}
		split = strings.NewReplacer(pairs...)
	}
	// Names the line gives another meaning: hash -p PATH NAME, alias NAME=…, functions.
	renamed := map[string]bool{}
	for _, sb := range w.subs {
		if len(sb.args) == 0 || !sb.args[0].static || sb.args[0].val != "hash" && sb.args[0].val != "alias" {
			continue
		}
		for _, a := range sb.args[1:] {
			name, _, _ := strings.Cut(a.val, "=")
			renamed[name] = true
		}
	}
	// a[0]=rm; a[1]=-rf; a+=(~): an array's words, given one by one, are a text too.
	arrays := arrayWords{}
	for _, sb := range w.subs {
		// A command whose name says what it is (grep -rn x ., cp -r . /tmp) is judged as
		// itself; one known only when it runs, or renamed by the line, as rm.
		runsUnknown := len(sb.args) > 0 && (sb.opaque || !sb.args[0].static || sb.args[0].glob ||
			w.funcs[sb.args[0].val] || renamed[sb.args[0].val])
		if runsUnknown && slices.ContainsFunc(sb.args, rmFlags) && criticalRm(sb, w.opts, vars) {
			return true
		}
		var vals []string
		for _, a := range sb.args {
			if a.static {
				vals = append(vals, a.val)
			} else {
				// x='rm -rf'; eval "$x ../proj": the text with the line's values in it.
				vals = append(vals, expansionReadings(a.node, vars)...)
			}
		}
		if len(sb.args) > 2 && sb.args[0].static && sb.args[0].val == "set" && sb.args[1].static && sb.args[1].val == "--" {
			// set -- rm -rf ../proj; "$@": the positional words, as an array's.
			var ws []string
			for _, a := range sb.args[2:] {
				ws = append(ws, a.val)
			}
			arrays.add("@", "@", strings.Join(ws, " "), true)
		}
		for _, a := range sb.assigns {
			lhs, v, _ := strings.Cut(a.word.src, "=")
			literal := strings.HasPrefix(v, "(")
			switch {
			case a.static:
				_, v, _ = strings.Cut(a.word.val, "=")
			case strings.HasPrefix(v, "("):
				v = strings.Trim(v, "()") // a=(rm -rf ..): the array's words
			case a.word.node != nil:
				vals = append(vals, expansionReadings(a.word.node, vars)...) // x="rm -rf $PWD"
			}
			vals = append(vals, v)
			arrays.add(a.name, lhs, v, literal)
		}
		for _, r := range sb.redirs {
			if r.Op == "<<<" || strings.HasPrefix(r.Op, "<<") {
				// read -ra a <<< "rm -rf ..", bash <<< $'\x72m -rf ..', mapfile -t a <<< $'rm\n-rf\n..'
				body := decodeDollarQuotes(r.body)
				vals = append(vals, strings.Trim(body, `"'`), strings.ReplaceAll(strings.Trim(body, `"'`), "\n", " "))
			}
		}
		if sb == w.subs[len(w.subs)-1] {
			vals = append(vals, arrays.texts()...)
		}
		if varsOverflowed(vars) {
			return true // a word whose values ran past the bound: its text is not told
		}
		for _, v := range vals {
			v = split.Replace(v)
			if !strings.ContainsAny(v, " \t\n;&|") {
				continue
			}
			if texts++; texts > maxOpaqueTexts || w.depth+1 >= maxNestDepth {
				return true
			}
			if slices.Contains(parseDepth(v, w.opts, w.depth+1, w.left).Risks, RiskCriticalPathRm) {
				return true
			}
		}
	}
	return false
}

// decodeDollarQuotes is s, a word as written, with its $'…' parts decoded as bash decodes
// them ($'\x72m' is rm); s itself when it has none or does not parse as a word.
func decodeDollarQuotes(s string) string {
	if !strings.Contains(s, "$'") {
		return s
	}
	w, ok := parseWord(s)
	if !ok {
		return s
	}
	lit, err := literal(w)
	if err != nil {
		return s
	}
	return lit
}

// arrayWords are the words the line assigns to each array, by name: a literal (a=(…))
// starts them, an element (a[i]=v) or an append (a+=…) adds to them.
type arrayWords map[string][]arrayWord

type arrayWord struct {
	index int
	val   string
}

// add records the assignment lhs=v to the variable name; literal says v is an array literal.
func (aw arrayWords) add(name, lhs, v string, literal bool) {
	appended := strings.HasSuffix(lhs, "+")
	open := strings.IndexByte(lhs, '[')
	if name == "" || !literal && !appended && open < 0 {
		return // x=v: a plain variable, a text of its own
	}
	ws := aw[name]
	if literal && !appended {
		ws = nil
	}
	next := 0
	for _, w := range ws {
		next = max(next, w.index+1)
	}
	if literal {
		// a=(rm -rf ~), a=([2]=~ [0]=rm [1]=-rf): each word, at its index when it names one.
		for _, f := range strings.Fields(v) {
			if m := literalIndex.FindStringSubmatch(f); m != nil {
				if i, err := strconv.Atoi(m[1]); err == nil && i >= 0 {
					next = i
				}
				f = m[2]
			}
			ws = append(ws, arrayWord{next, f})
			next++
		}
		aw[name] = ws
		return
	}
	// a[2]=~ before a[0]=rm: taken in the order of the indexes, when they are numbers.
	if i, err := strconv.Atoi(strings.TrimRight(lhs[open+1:], "]+")); open >= 0 && err == nil && i >= 0 {
		next = i
	}
	aw[name] = append(ws, arrayWord{next, v})
}

// literalIndex is an element of an array literal that names its index: [2]=~.
var literalIndex = regexp.MustCompile(`^\[([^]]*)\]=(.*)$`)

// texts are the arrays' words, each array's joined in the order of their indexes.
func (aw arrayWords) texts() []string {
	var out []string
	for _, ws := range aw {
		if len(ws) < 2 {
			continue
		}
		sorted := slices.Clone(ws)
		slices.SortStableFunc(sorted, func(a, b arrayWord) int { return a.index - b.index })
		vals := make([]string, len(sorted))
		for i, w := range sorted {
			vals[i] = w.val
		}
		out = append(out, strings.Join(vals, " "))
		// An index computed (a[1+1]=, a[i]=) or a slice taken ("${a[@]:2}") puts the words
		// in an order the line does not show: with an rm among them, each other word is
		// judged as its operand.
		if i := slices.IndexFunc(vals, func(v string) bool { return v == "rm" || v == "rmdir" || strings.HasSuffix(v, "/rm") }); i >= 0 {
			out = append(out, "rm -rf "+strings.Join(slices.Delete(slices.Clone(vals), i, i+1), " "))
		}
	}
	return out
}

// rmFlags reports a word that is an option rm takes to remove trees or refuse nothing: -r,
// -R, -f, -d, alone or in a cluster, or their long forms.
func rmFlags(a word) bool {
	v := a.val
	if !a.static || len(v) < 2 || v[0] != '-' {
		return false
	}
	if v[1] == '-' {
		return v == "--recursive" || v == "--force" || v == "--dir"
	}
	return strings.ContainsAny(v[1:], "rRfd")
}

// staticTargetCritical reports whether a, a static target of rm or a root of a find that
// removes, may be a critical path. dirUnknown says a cd or a wrapper's -C before the command
// left it in a directory the line cannot follow.
func staticTargetCritical(a word, dirs []string, opts Options, dirUnknown bool) bool {
	if a.glob && strings.Contains(a.src, "{") {
		// {*,.*}, ~/{*,.*}: each word the braces give is a target. A sequence ({a..z}*)
		// names every first letter, and one too many to list may be anything.
		words := expandBraces(a.src, opts)
		if words == nil || strings.Contains(a.src, "..") {
			return true
		}
		for _, e := range words {
			for i, v := range e.Words {
				w := word{val: v, src: v, static: e.Globs[i] != GlobAny, glob: e.Globs[i] == GlobPattern, tilde: strings.HasPrefix(v, "~")}
				if !w.static || !strings.Contains(v, "{") && staticTargetCritical(w, dirs, opts, dirUnknown) {
					return true
				}
			}
		}
		return false
	}
	if relativeProcAlias(a, dirs, opts, dirUnknown) || path.IsAbs(a.val) && (procAlias(a.val) || procAlias(path.Clean(a.val))) {
		return true // /proc/self/cwd/, /dev/fd/../cwd: a directory by another name
	}
	if a.tilde && !strings.HasPrefix(a.val, "~/") && a.val != "~" {
		// ~user/R, ~+/R, ~-/R: a home or a cwd known only when it runs, and R under it,
		// which may be this cwd or an ancestor (rm -rf ~alice/proj from inside proj).
		_, r, _ := strings.Cut(a.val, "/")
		return mayNameCritical(r, opts)
	}
	if g := a.val; a.glob {
		if a.tilde {
			if opts.Home == "" {
				return true // ~/pro[j]: under a home not known here
			}
			g = opts.Home + strings.TrimPrefix(g, "~")
		}
		if globMayBeCritical(g, lineDirs(dirs, opts), opts) {
			return true // rm -rf /home/u/cri? removes the cwd /home/u/crit
		}
	}
	if dirUnknown && !path.IsAbs(a.val) && !a.tilde && mayNameCritical(a.val, opts) {
		return true // cd "$HOME" && rm -rf proj, env -C .. rm -rf proj: proj's parent
	}
	// A relative target is judged from every directory a cd before it may have left the
	// line in: cd / && rm -rf usr removes /usr. Judged where it lands: cd build && rm -rf *
	// removes what build holds, which is no critical dir; cd ~ && rm -rf * empties the home.
	if !a.tilde && !path.IsAbs(a.val) && len(dirs) > 0 {
		return slices.ContainsFunc(dirs, func(d string) bool { return criticalPath(path.Join(d, a.val), false, opts) })
	}
	return criticalPath(a.val, a.tilde, opts)
}

// lineDirs are the dirs a command of the line may run in: dirs, the cwd when there are none.
func lineDirs(dirs []string, opts Options) []string {
	if len(dirs) > 0 {
		return dirs
	}
	return []string{opts.Cwd}
}

// wrapperDirs are the directories a command runs in after the wrappers before it: the
// line's (dirs), or each joined with the DIR of an env -C DIR (--chdir[=]DIR, sudo -D DIR).
// unknown says a wrapper changes it in a way not read here.
func wrapperDirs(ws []word, dirs []string, cwd string) (out []string, unknown bool) {
	if !wrapperChdir(ws) {
		return dirs, false
	}
	dir := ""
	for i, a := range ws {
		v := a.val
		switch {
		case (v == "-C" || v == "-D" || v == "--chdir") && i+1 < len(ws) && ws[i+1].static:
			dir = ws[i+1].val
		case strings.HasPrefix(v, "--chdir="):
			dir = strings.TrimPrefix(v, "--chdir=")
		case len(v) > 2 && (strings.HasPrefix(v, "-C") || strings.HasPrefix(v, "-D")) && !strings.HasPrefix(v, "--"):
			dir = v[2:]
		}
	}
	if dir == "" || strings.HasPrefix(dir, "~") {
		return dirs, true
	}
	if len(dirs) == 0 {
		dirs = []string{cwd}
	}
	for _, d := range dirs {
		out = append(out, path.Join(d, dir)) // an absolute DIR stays itself
		if path.IsAbs(dir) {
			out[len(out)-1] = path.Clean(dir)
		}
	}
	return out, false
}

// criticalFind is criticalRm for find: a find that removes everything it finds below a
// critical root (`find ~ -delete`, `find / -exec rm -rf {} +`, `find . -type f -delete` in the
// cwd, `find "$DIR" -delete`) is that rm -rf. One whose expression picks files by name, time,
// size or owner (`find . -name '*.pyc' -delete`) is not.
func criticalFind(sb *sub, opts Options) bool {
	k := -1
	for i, a := range sb.args {
		if a.static && baseName(a.val) == "find" {
			k = i
			break
		}
	}
	if k < 0 {
		return false
	}
	ws := sb.args[k+1:]
	vals := make([]string, len(ws))
	for i, a := range ws {
		vals[i] = a.val
		if !a.static {
			vals[i] = "\x00"
		}
	}
	if !findRemoves(vals) || findSelects(vals) {
		return false
	}
	start := findRootsStart(vals)
	end := findRootsEnd(vals, start)
	if start == end {
		return true // no root: the cwd
	}
	dirs, chdir := wrapperDirs(sb.args[:k], sb.dirs, opts.Cwd)
	dirUnknown := sb.dirsUnknown || chdir || wrapperChdir(sb.args[:k]) // as in criticalRm
	for _, a := range ws[start:end] {
		if !a.static || staticTargetCritical(a, dirs, opts, dirUnknown) {
			return true // one known only when it runs is judged as / or the home, as rm's is
		}
	}
	return false
}

// CriticalPath reports whether removing the absolute path p (or, for a last segment of
// wildcards alone, everything in its dir) removes /, a top-level dir, opts.Home, or opts.Cwd
// or one of its ancestors: the dirs an rm of is critical.
func CriticalPath(p string, opts Options) bool { return criticalPath(p, false, opts) }

func criticalPath(p string, tilde bool, opts Options) bool {
	if tilde {
		if p == "~" || p == "~/" || strings.HasPrefix(p, "~/*") {
			return true
		}
		if opts.Home == "" || !strings.HasPrefix(p, "~/") {
			return false
		}
		p = opts.Home + p[1:]
	}
	if dir, last := splitGlob(strings.TrimRight(p, "/")); p != "/" && matchAll(last) {
		p = strings.TrimSuffix(dir, "/") // everything in dir
		if p == "" && dir == "" || p == "." {
			return true // everything in the cwd
		}
		if p == "" {
			p = "/"
		}
	}
	if !path.IsAbs(p) {
		if opts.Cwd == "" {
			c := path.Clean(p)
			return c == "." || c == ".." || strings.HasPrefix(c, "../")
		}
		p = path.Join(opts.Cwd, p)
	}
	p = path.Clean(p)
	if p == "/" || strings.Count(p, "/") == 1 {
		return true
	}
	if opts.Home != "" && p == path.Clean(opts.Home) {
		return true
	}
	if opts.Cwd != "" {
		cwd := path.Clean(opts.Cwd)
		if p == cwd || strings.HasPrefix(cwd, p+"/") {
			return true
		}
	}
	return false
}

// criticalDirs are the directories an rm of one is critical for, the top-level ones aside:
// /, the home and the cwd with its ancestors.
func criticalDirs(opts Options) []string {
	dirs := []string{"/"}
	if opts.Home != "" {
		dirs = append(dirs, path.Clean(opts.Home))
	}
	if opts.Cwd != "" {
		for d := path.Clean(opts.Cwd); d != "/" && d != "."; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// mayNameCritical reports whether the relative path r, taken from a directory known only when
// the line runs, may name a critical directory: "" or dots (that directory or above it), or
// the last parts of one (proj, for a cwd of /home/u/proj).
func mayNameCritical(r string, opts Options) bool {
	c := path.Clean(r)
	if _, last := splitGlob(c); r == "" || c == "." || c == ".." || strings.HasPrefix(c, "../") || matchAll(last) {
		return true
	}
	for _, d := range criticalDirs(opts) {
		if strings.HasSuffix(d, "/"+c) {
			return true
		}
	}
	return false
}

// globMayBeCritical reports whether the pathname pattern g, taken from each of dirs when
// relative, may match a critical directory: one of criticalDirs, or a top-level one (any
// pattern of one component below /).
func globMayBeCritical(g string, dirs []string, opts Options) bool {
	g = strings.ReplaceAll(g, "[!", "[^")
	for _, base := range dirs {
		p := g
		if !path.IsAbs(p) {
			if base == "" {
				return true // no cwd to take it from: judged as one
			}
			p = path.Join(base, p)
		}
		p = path.Clean(p)
		// ~/pro[j]/*: everything in a dir the glob may name is that dir's removal.
		for dir, last := splitGlob(p); p != "/" && matchAll(last); dir, last = splitGlob(p) {
			if p = path.Clean(dir); p == "/" {
				return true
			}
		}
		if strings.Count(p, "/") == 1 {
			return true
		}
		for _, d := range criticalDirs(opts) {
			if ok, err := path.Match(p, d); ok || err != nil {
				return true
			}
		}
	}
	return false
}

// dropQuoteBraces removes every ", { and } from s.
func dropQuoteBraces(s string) string {
	if strings.IndexByte(s, '"') < 0 && strings.IndexByte(s, '{') < 0 && strings.IndexByte(s, '}') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '"' && c != '{' && c != '}' {
			b = append(b, c)
		}
	}
	return string(b)
}

// isLit reports a word part that is unquoted text.
func isLit(p syntax.WordPart) bool {
	_, ok := p.(*syntax.Lit)
	return ok
}

// literal is expand.Literal with a config of its own: given nil, the library fills in a
// config it shares between callers, and two classifications at once (the daemon's calls, the
// tests in parallel) wrote it together: a data race the race detector reports.
func literal(w *syntax.Word) (string, error) {
	return expand.Literal(&expand.Config{}, w)
}
