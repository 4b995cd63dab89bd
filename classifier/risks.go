package classifier

import (
	"path"
	"sort"
	"strings"
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

func isSecret(s string) bool {
	// Every marker holds one of these; most words do not, and this runs on
	// every word of every command.
	if !strings.ContainsAny(s, "./_") {
		return false
	}
	for _, m := range secretMarkers {
		if strings.Contains(s, m) {
			return true
		}
	}
	// curl -F f=@.env and -d @.env name the file after = or @.
	if i := strings.LastIndexAny(s, "=@"); i >= 0 {
		s = s[i+1:]
	}
	b := path.Base(s)
	return b == ".env" || strings.HasPrefix(b, ".env.")
}

// risks computes the auto-mode risk signals of a line.
func risks(subs []*sub, out []Subcommand, opts Options) []string {
	set := map[string]bool{}
	network, secret, envDump := false, false, false
	for i, sb := range subs {
		words := out[i].DenyPrefix
		for _, r := range sb.redirs {
			if strings.HasPrefix(r.Target, "/dev/tcp/") || strings.HasPrefix(r.Target, "/dev/udp/") {
				network = true
			}
			if isSecret(r.Target) {
				secret = true
			}
			if r.Write {
				if strings.HasPrefix(r.Target, "/dev/sd") || strings.HasPrefix(r.Target, "/dev/nvme") {
					set[RiskDestructive] = true
				}
				if !writeInside(r.Target, opts) {
					set[RiskOutsideWorkspaceWrite] = true
				}
			}
		}
		for _, a := range sb.args {
			if strings.Contains(a.src, "/dev/") && (strings.Contains(a.src, "/dev/tcp/") || strings.Contains(a.src, "/dev/udp/")) {
				network = true
			}
			if isSecret(a.val) || !a.static && isSecret(a.src) {
				secret = true
			}
		}
		if len(sb.args) > 0 {
			switch first := sb.args[0].val; first {
			case "sudo", "su", "doas", "pkexec", "runuser":
				set[RiskPrivilege] = true
			}
		}
		if len(words) == 0 || len(sb.args) == 0 {
			continue
		}
		name := path.Base(words[0])
		args := words[1:]
		if networkCmds[name] {
			network = true
		}
		if privilegeCmds[name] {
			set[RiskPrivilege] = true
		}
		if destructiveCmds[name] || strings.HasPrefix(name, "mkfs") {
			set[RiskDestructive] = true
		}
		if name == "env" || name == "printenv" {
			envDump = true
		}
		switch name {
		case "rm", "rmdir", "unlink":
			if name == "rm" && hasFlag(args, "rRf", "recursive", "force") {
				set[RiskDestructive] = true
			}
			if criticalRm(sb, opts) {
				set[RiskCriticalPathRm] = true
				set[RiskDestructive] = true
			}
		case "chmod", "chown", "chgrp":
			if hasFlag(args, "R", "recursive") {
				set[RiskDestructive] = true
			}
			if name == "chmod" {
				for _, a := range args {
					if strings.Contains(a, "+s") || len(a) == 4 && strings.ContainsAny(a[:1], "2467") && strings.Trim(a, "01234567") == "" {
						set[RiskPrivilege] = true
					}
				}
			}
		case "find":
			if hasWord(args, "-delete") {
				set[RiskDestructive] = true
			}
		case "git":
			gitRisks(args, set, &network)
		case "kill":
			if hasWord(args, "-9") || hasWord(args, "-KILL") {
				set[RiskDestructive] = true
			}
		}
		if isPackageInstall(name, args) {
			set[RiskPackageInstall] = true
			network = true
		}
		if isWriteCmd(name) && writesOutside(name, args, opts) {
			set[RiskOutsideWorkspaceWrite] = true
		}
	}
	if network {
		set[RiskNetwork] = true
		if secret || envDump {
			set[RiskExfiltration] = true
		}
	}
	outList := make([]string, 0, len(set))
	for k := range set {
		outList = append(outList, k)
	}
	sort.Strings(outList)
	return outList
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
func gitRisks(args []string, set map[string]bool, network *bool) {
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
				set[RiskDestructive] = true
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
			set[RiskDestructive] = true
		}
	case "clean":
		if hasFlag(rest, "f", "force") {
			set[RiskDestructive] = true
		}
	case "checkout", "restore", "switch":
		if hasFlag(rest, "f", "force", "discard-changes") || hasWord(rest, "--") || hasWord(rest, ".") {
			set[RiskDestructive] = true
		}
	case "branch":
		if hasFlag(rest, "D", "delete") || hasWord(rest, "-d") {
			set[RiskDestructive] = true
		}
	case "stash":
		if len(rest) > 0 && (rest[0] == "drop" || rest[0] == "clear") {
			set[RiskDestructive] = true
		}
	case "filter-branch", "filter-repo", "gc", "prune", "update-ref", "reflog":
		if sub != "reflog" || len(rest) > 0 && (rest[0] == "expire" || rest[0] == "delete") {
			set[RiskDestructive] = true
		}
	}
}

// isPackageInstall recognises package manager installs.
func isPackageInstall(name string, args []string) bool {
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
func criticalRm(sb *sub, opts Options) bool {
	start := 1
	for i, a := range sb.args {
		if a.static && (a.val == "rm" || a.val == "rmdir" || a.val == "unlink" || strings.HasSuffix(a.val, "/rm")) {
			start = i + 1
			break
		}
	}
	for _, a := range sb.args[start:] {
		if a.static && strings.HasPrefix(a.val, "-") {
			continue
		}
		if a.param {
			s := strings.NewReplacer(`"`, "", "{", "", "}", "").Replace(a.src)
			s = strings.TrimRight(s, "/*")
			if a.glob || s == "$HOME" || s == "$PWD" || s == "" {
				return true
			}
			continue
		}
		if !a.static {
			continue
		}
		if criticalPath(a.val, a.tilde, opts) {
			return true
		}
	}
	return false
}

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
	p = strings.TrimSuffix(p, "/*")
	if p == "*" || p == "" {
		return true // everything in the cwd
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
