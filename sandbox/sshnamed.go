package sandbox

import (
	"path/filepath"
	"strings"
)

// ~/.ssh is protected whole, but its config may name files elsewhere that ssh reads as its
// config or runs: Include (another config, or a glob of them), the shell lines of ProxyCommand,
// LocalCommand, KnownHostsCommand and Match exec, and the libraries PKCS11Provider and
// SecurityKeyProvider load. Such a file in a writable dir is as much ssh's as ~/.ssh/config
// is: every later ssh, and git over ssh, reads or runs it. It is protected like it; for a
// glob, the dir the glob lists.

// maxSSHConfigFiles bounds the config files read, included ones with them.
const maxSSHConfigFiles = 16

// sshConfigNames is what one ssh config file names: configs it includes (absolute; a glob
// stays a pattern) and what it runs or loads.
type sshConfigNames struct {
	includes, named []string
}

var sshConfigCache = newParsedFiles(func(n sshConfigNames) int { return stringsSize(n.includes) + stringsSize(n.named) })

// sshNamedPaths returns the files and dirs ~/.ssh/config, and what it includes, names as config
// or code (see above), absolute and clean. missing, when set, answers for a path known not to
// be there. Past maxNamedPaths it fails (errTooManyNamed), as the shells' do. Run as the
// caller, uid.
func sshNamedPaths(home string, uid uint32, missing func(string) bool) ([]string, error) {
	if home == "" || home == "/" {
		return nil, nil
	}
	return followNamed([]string{filepath.Join(home, ".ssh", "config")}, maxSSHConfigFiles, missing, func(p string, out *namedSet, read func(string)) bool {
		n, ok := sshConfigCache.get(p, home, uid, maxShellFileBytes, func(b []byte) sshConfigNames { return sshNames(b, home) })
		if !ok {
			return false
		}
		for _, p := range n.named {
			out.add(p)
		}
		for _, inc := range n.includes {
			if strings.ContainsAny(inc, "*?[") {
				// What the glob matches, now or once a call made it, is ssh's config: the dir
				// it lists is protected whole. What the files there name is not looked for (a
				// listing of a user's dir on every call has no bound).
				out.add(globDir(inc))
				continue
			}
			out.add(inc)
			read(inc)
		}
		return true
	})
}

// globDir is the dir a glob pattern lists: its part before the first segment with a wildcard.
func globDir(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if strings.ContainsAny(s, "*?[") {
			return filepath.Clean("/" + strings.Join(segs[:i], "/"))
		}
	}
	return filepath.Dir(pattern)
}

// sshNames parses one ssh config file (ssh_config(5): a keyword, then its arguments after
// white space or one =, double quotes grouping). A relative Include is the user's ~/.ssh's.
func sshNames(src []byte, home string) sshConfigNames {
	var n sshConfigNames
	expand := func(p string) string {
		for _, h := range []string{"~", "%d", "$HOME", "${HOME}"} {
			if p == h || strings.HasPrefix(p, h+"/") {
				return filepath.Join(home, p[len(h):])
			}
		}
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return ""
	}
	commandPaths := func(words []string) {
		// A shell line: each word that names a file by its path (the program, a script it
		// runs), split where the shell splits words and commands.
		line := strings.Join(words, " ")
		for _, w := range strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t;|&()<>`\"'", r) }) {
			if p := expand(w); p != "" {
				n.named = append(n.named, p)
			}
		}
	}
	for _, line := range strings.Split(string(src), "\n") {
		words := sshWords(line)
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		key, args := strings.ToLower(words[0]), words[1:]
		switch key {
		case "include":
			for _, a := range args {
				p := expand(a)
				if p == "" {
					p = filepath.Join(home, ".ssh", a)
				}
				n.includes = append(n.includes, p)
			}
		case "proxycommand", "localcommand", "knownhostscommand":
			commandPaths(args)
		case "match":
			for i, a := range args {
				if strings.EqualFold(strings.TrimPrefix(a, "!"), "exec") && i+1 < len(args) {
					commandPaths(args[i+1 : i+2]) // exec and !exec run it alike
				}
			}
		case "pkcs11provider", "securitykeyprovider", "userknownhostsfile", "certificatefile":
			// Libraries ssh loads; the host keys it trusts and the certificate it offers.
			for _, a := range args {
				if p := expand(a); p != "" {
					n.named = append(n.named, p)
				}
			}
		}
	}
	return n
}

// sshWords splits a config line into its keyword and arguments: white space separates, one =
// may stand between the keyword and the first argument, and double quotes group.
func sshWords(line string) []string {
	line = strings.TrimSpace(line)
	if k, rest, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(k, " \t\"") {
		line = k + " " + rest
	}
	var words []string
	var cur strings.Builder
	quoted, in := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}
