package classifier

import (
	"path"
	"strings"
)

// NamedHosts are the hosts a command line names for a connection, as written (the caller
// normalizes them): the host of every URL in any word (`scheme://[user@]host[:port]…`, in an
// option's value or a script's text too), of scp-style `[user@]host:path` operands of git,
// scp, rsync and sftp, of curl's and wget's URLs given without a scheme, and of ssh's
// destination and jump hosts. A word the shell expands
// yields its text (`http://$H/` names `$H`), which names no host a rule could check.
//
// The decision meets them with WebFetch rules where no proxy stands between the program and
// the network (a command an agent runs itself). It sees only what the line spells: a URL
// built at run time or a remote from a config file is the proxy's to refuse.
func NamedHosts(c *Classification) []string {
	var out []string
	for _, s := range c.Subcommands {
		words := s.DenyPrefix
		if len(words) == 0 {
			words = s.Argv
		}
		if len(words) == 0 {
			words = strings.Fields(s.Text)
		}
		for _, w := range words {
			out = urlHosts(w, out)
		}
		if len(words) > 0 {
			out = remoteHosts(path.Base(words[0]), words[1:], out)
		}
	}
	return out
}

// urlHosts appends the host of each `scheme://authority` in w.
func urlHosts(w string, out []string) []string {
	for {
		i := strings.Index(w, "://")
		if i < 0 {
			return out
		}
		scheme := w[:i]
		if j := strings.LastIndexFunc(scheme, func(r rune) bool { return !isSchemeChar(r) }); j >= 0 {
			scheme = scheme[j+1:]
		}
		w = w[i+3:]
		end := strings.IndexAny(w, "/?#\\ \t\n'\"`<>;,()[]{}|&")
		if strings.HasPrefix(w, "[") {
			end = strings.IndexAny(w, "]/?#\\ \t\n'\"`<>;,(){}|&")
			if end >= 0 && w[end] == ']' {
				end++
			}
		}
		if end < 0 {
			end = len(w)
		}
		auth := w[:end]
		if strings.EqualFold(scheme, "file") || auth == "" {
			continue
		}
		out = append(out, hostOf(auth))
	}
}

// isSchemeChar reports whether r may be in a URL scheme.
func isSchemeChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'
}

// hostOf is the host of an authority `[user@]host[:port]`.
func hostOf(auth string) string {
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	if strings.HasPrefix(auth, "[") {
		if j := strings.IndexByte(auth, ']'); j > 0 {
			return auth[:j+1]
		}
		return auth
	}
	if j := strings.LastIndexByte(auth, ':'); j >= 0 {
		return auth[:j]
	}
	return auth
}

// scpRemote are the programs that take `[user@]host:path` for a remote (rsync's `host::module`
// too).
var scpRemote = map[string]bool{"git": true, "scp": true, "rsync": true, "sftp": true}

// sshArgOptions are ssh's options that take an argument.
const sshArgOptions = "BbcDEeFIiJLlmOoPpQRSWw"

// remoteHosts appends the hosts of prog's remote operands: scp-style words of git, scp, rsync
// and sftp, curl's and wget's URLs without a scheme, and ssh's (and sftp's) destination and
// jump hosts.
func remoteHosts(prog string, args []string, out []string) []string {
	if scpRemote[prog] {
		for _, a := range args {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "://") {
				continue
			}
			if h, _, ok := strings.Cut(a, ":"); ok && h != "" && !strings.Contains(h, "/") {
				out = append(out, hostOf(h))
			}
		}
	}
	if prog == "curl" || prog == "wget" {
		// Both take a URL without its scheme: any operand that reads as host[:port][/path]
		// (an option's value like out.txt too, which only a rule naming it would meet).
		for _, a := range args {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "://") {
				continue
			}
			h, _, _ := strings.Cut(a, "/")
			if h = hostOf(h); strings.Contains(h, ".") && strings.Trim(strings.ToLower(h), "abcdefghijklmnopqrstuvwxyz0123456789.-_") == "" {
				out = append(out, h)
			}
		}
	}
	if prog != "ssh" && prog != "sftp" {
		return out
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				out = append(out, hostOf(args[i+1]))
			}
			return out
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return append(out, hostOf(a))
		}
		// A cluster of flags, the last of which may take the rest or the next word.
		for j := 1; j < len(a); j++ {
			if !strings.ContainsRune(sshArgOptions, rune(a[j])) {
				continue
			}
			val := a[j+1:]
			if val == "" && i+1 < len(args) {
				i++
				val = args[i]
			}
			if a[j] == 'o' {
				// -o HostName=h and -o ProxyJump=h name hosts too.
				key, v, _ := strings.Cut(strings.TrimSpace(val), "=")
				if _, v2, ok := strings.Cut(key, " "); ok && v == "" {
					key, v = key[:len(key)-len(v2)-1], v2
				}
				switch strings.ToLower(strings.TrimSpace(key)) {
				case "hostname":
					out = append(out, strings.TrimSpace(v))
				case "proxyjump":
					out = jumpHosts(v, out)
				}
			}
			if a[j] == 'J' {
				out = jumpHosts(val, out)
			}
			break
		}
	}
	return out
}

// jumpHosts appends the hosts of an ssh jump list, `[user@]host[:port]` or ssh:// URLs,
// comma-separated.
func jumpHosts(list string, out []string) []string {
	for _, h := range strings.Split(strings.TrimSpace(list), ",") {
		if strings.Contains(h, "://") {
			out = urlHosts(h, out)
		} else {
			out = append(out, hostOf(h))
		}
	}
	return out
}
