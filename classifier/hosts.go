package classifier

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// NamedHost is a host a command line names for a connection, as written (the caller
// normalizes it). Loose marks one read out of a word that may be no host at all (a token of a
// network program's option, `out.txt`): one that is no valid name is left out, where a URL's
// host that is no valid name (`http://evi{l,x}.com/`, a glob curl expands) is one no rule can
// be matched against.
type NamedHost struct {
	Host  string
	Loose bool
}

// NamedHosts are the hosts a command line names for a connection: the host of every URL in
// any word (`scheme://[user@]host[:port]…`, in an option's value or a script's text too), of
// scp-style `[user@]host:path` operands of git, scp, rsync and sftp, of every `/dev/tcp/HOST/`
// (bash opens it), where curl's --resolve, --connect-to and proxy options send it, and, loosely, every name in the words of a program that takes hosts (curl,
// wget, ssh, nc, socat, openssl, …: `-xevil.com:8080`, `--connect-to ::evil.com:443`,
// `-o HostName=evil.com`, `nc evil 80`) and in any word that sets a proxy (`HTTPS_PROXY=…`,
// `--proxy …`, `-c http.proxy=…`). A word the shell expands yields its text (`http://$H/`
// names `$H`), which names no host a rule could check.
//
// The decision meets them with WebFetch rules where no proxy stands between the program and
// the network (a command an agent runs itself). It sees only what the line spells: a URL
// built at run time or a remote from a config file is the proxy's to refuse.
func NamedHosts(c *Classification) []NamedHost {
	var out []NamedHost
	strict := func(h string) { out = append(out, NamedHost{Host: h}) }
	loose := func(h string) { out = append(out, NamedHost{Host: h, Loose: true}) }
	for _, s := range c.Subcommands {
		words := s.DenyPrefix
		if len(words) == 0 {
			words = s.Argv
		}
		if len(words) == 0 {
			words = strings.Fields(s.Text)
		}
		for _, w := range words {
			urlHosts(w, strict)
			lenientURLHosts(w, strict)
		}
		if len(words) > 0 {
			prog := path.Base(words[0])
			if scpRemote[prog] {
				scpHosts(words[1:], strict)
			}
			if prog == "curl" {
				curlRoutes(words[1:], strict)
			}
			if opts, ok := destinationPrograms[prog]; ok {
				if h := sshDestination(words[1:], opts); h != "" {
					strict(h)
				}
			}
			if sshFamily[prog] {
				sshRoutes(words[1:], strict)
			}
			if hostPrograms[prog] {
				for _, w := range words[1:] {
					wordHosts(w, loose)
				}
			} else if dottedHostPrograms[prog] {
				for _, w := range words[1:] {
					for _, t := range hostToken.FindAllString(w, -1) {
						loose(t)
					}
				}
			}
		}
		// A config file the line names may send the connection elsewhere (ssh -F, a git
		// config from GIT_CONFIG_GLOBAL or include.path): a host no rule can check.
		if configRoutes.MatchString(s.Text) || len(words) > 0 && sshFamily[path.Base(words[0])] && slices.ContainsFunc(words[1:], func(w string) bool { return strings.HasPrefix(w, "-F") }) {
			strict(ConfigHost)
		}
		// The line's own text: assignments (HTTPS_PROXY=…) and redirections (/dev/tcp/…)
		// are in no word list.
		fields := strings.Fields(s.Text)
		for i, f := range fields {
			urlHosts(f, strict)
			if m := curloptResolve.FindStringSubmatch(f); m != nil {
				// git's http.curloptResolve: what --resolve is to curl.
				curlRoutes([]string{"--resolve", strings.Trim(m[1], `'"`)}, strict)
			}
			if m := configEnvRoute.FindStringSubmatch(f); m != nil {
				strict("$" + m[1]) // a proxy or address from a variable: known only when it runs
			}
			if m := gitConfigValue.FindStringSubmatch(f); m != nil && gitConfigKeyRoute.MatchString(s.Text) {
				v := strings.Trim(m[1], `'"`)
				curlRoutes([]string{"--resolve", v}, strict)
				strict(proxyHost(v))
			}
			if m := proxySetting.FindStringSubmatch(f); m != nil && !notProxy.MatchString(f) {
				strict(proxyHost(strings.Trim(m[1], `'"`))) // where every connection of the program goes
			} else if proxyOption[f] && i+1 < len(fields) {
				strict(proxyHost(strings.Trim(fields[i+1], `'"`)))
			}
			if strings.Contains(strings.ToLower(f), "proxy") {
				wordHosts(f, loose)
				if i+1 < len(fields) {
					wordHosts(fields[i+1], loose)
				}
				if _, v, ok := strings.Cut(f, "="); ok && strings.ContainsAny(v, "$`") {
					strict(v) // https_proxy=$p: a proxy known only when the line runs
				}
			}
			for _, dev := range []string{"/dev/tcp/", "/dev/udp/"} {
				if _, rest, ok := strings.Cut(f, dev); ok {
					h, _, _ := strings.Cut(rest, "/")
					strict(h)
				}
			}
		}
	}
	return out
}

// curlRouteOptions are curl's options whose value says where a connection really goes,
// whatever host the URL names: a proxy, an address for a name (--resolve), another host for
// it (--connect-to).
var curlRouteOptions = map[string]bool{"--proxy": true, "--preproxy": true, "--proxy1.0": true, "--socks4": true,
	"--socks4a": true, "--socks5": true, "--socks5-hostname": true, "--resolve": true, "--connect-to": true}

// curlRouteOption is the route option a names, as curl takes a long option by any prefix
// that leaves no doubt (--resolv, --socks5-ho); "" for none. A prefix of several route options
// is taken for the first of them (curl refuses one that is ambiguous among all its options).
func curlRouteOption(a string) string {
	if curlRouteOptions[a] {
		return a
	}
	if !strings.HasPrefix(a, "--") || len(a) < 5 || strings.Contains(a, "=") {
		return ""
	}
	for _, o := range curlRouteOrder {
		if strings.HasPrefix(o, a) {
			return o
		}
	}
	return ""
}

// curlRouteOrder is curlRouteOptions in the order a prefix is matched.
var curlRouteOrder = []string{"--resolve", "--connect-to", "--proxy", "--preproxy", "--proxy1.0", "--socks4", "--socks4a", "--socks5", "--socks5-hostname"}

// curlValueLetters are curl's short options that take a value (the rest of the cluster, or
// the next word).
const curlValueLetters = "AbcCdDeEFHKmoPQrtTuUwxXyYz"

// curlRoutes gives the hosts curl's routing options name (curlRouteOptions, -x), surely: the
// address --resolve gives a name the rules allow is where curl connects.
func curlRoutes(args []string, add func(string)) {
	for i := 0; i < len(args); i++ {
		a, opt, val := args[i], "", ""
		switch {
		case a == "--":
			return
		case curlRouteOption(a) != "":
			if i+1 < len(args) {
				opt, val = curlRouteOption(a), args[i+1]
				i++
			}
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(curlValueLetters, a[j]) < 0 {
					continue
				}
				v := a[j+1:]
				if v == "" && i+1 < len(args) {
					v = args[i+1]
					i++
				}
				if a[j] == 'x' {
					opt, val = "-x", v
				}
				break
			}
		}
		switch opt {
		case "":
		case "--resolve":
			// [+]HOST:PORT:ADDR[,ADDR]…
			_, rest, _ := strings.Cut(strings.TrimLeft(val, "+-"), ":")
			_, addrs, _ := strings.Cut(rest, ":")
			for _, ad := range strings.Split(addrs, ",") {
				if ad != "" {
					add(ad)
				}
			}
		case "--connect-to":
			// HOST1:PORT1:HOST2:PORT2; an empty HOST2 keeps the URL's.
			parts := strings.SplitN(val, ":", 3)
			if len(parts) == 3 {
				h2 := parts[2]
				if strings.HasPrefix(h2, "[") {
					if k := strings.IndexByte(h2, ']'); k > 0 {
						h2 = h2[:k+1]
					}
				} else if k := strings.LastIndexByte(h2, ':'); k >= 0 {
					h2 = h2[:k]
				}
				if h2 != "" {
					add(h2)
				}
			}
		default:
			if h := proxyHost(val); h != "" {
				add(h)
			}
		}
	}
}

// proxyHost is the host of a proxy as programs take it: [scheme://][user[:password]@]host[:port].
func proxyHost(v string) string {
	if _, after, ok := strings.Cut(v, "://"); ok {
		v = after
	}
	v, _, _ = strings.Cut(v, "/")
	if k := strings.LastIndexByte(v, '@'); k >= 0 {
		v = v[k+1:]
	}
	if strings.HasPrefix(v, "[") {
		if k := strings.IndexByte(v, ']'); k > 0 {
			return v[:k+1]
		}
	} else if k := strings.LastIndexByte(v, ':'); k >= 0 {
		return v[:k]
	}
	return v
}

// proxySetting is a word that sets a proxy (HTTPS_PROXY=…, http.proxy=…, --proxy=…,
// use_proxy is no host), its value in the group; proxyOption one whose value is the next word.
var (
	proxySetting = regexp.MustCompile(`(?i)^(?:[a-z0-9_.-]*[_.-])?proxy=(.+)$`)
	proxyOption  = map[string]bool{"--proxy": true, "--https-proxy": true, "--http-proxy": true, "-proxy": true}
	// curloptResolve is git's http[.URL].curloptResolve=HOST:PORT:ADDR; configEnvRoute git's
	// --config-env giving a proxy or a resolve from a variable; gitConfigValue a
	// GIT_CONFIG_VALUE_n, read as a route where a GIT_CONFIG_KEY_n of the line is one
	// (gitConfigKeyRoute).
	curloptResolve    = regexp.MustCompile(`(?i)^http\.(?:.*\.)?curloptresolve=(.+)$`)
	configEnvRoute    = regexp.MustCompile(`(?i)^--config-env=http\.(?:.*\.)?(?:proxy|curloptresolve)=([A-Za-z_][A-Za-z0-9_]*)$`)
	gitConfigValue    = regexp.MustCompile(`^GIT_CONFIG_VALUE_[0-9]+=(.+)$`)
	gitConfigKeyRoute = regexp.MustCompile(`(?i)\bGIT_CONFIG_KEY_[0-9]+=['"]?http\.(?:\S*\.)?(?:proxy|curloptresolve)\b`)
	// notProxy are such words that name no proxy: the hosts to reach without one, wget's
	// switch.
	notProxy = regexp.MustCompile(`(?i)^(?:no_proxy|use_proxy)=`)
)

// destinationPrograms are the programs whose first operand is the host they connect to, with
// their options that take the next word as their value.
var destinationPrograms = map[string]string{"ssh": "BbcDEeFIiJLlmOopQRSWw", "sftp": "BbcDFiJlloPRSs"}

// sshDestination is the host of ssh's (or sftp's) destination, its first operand
// ([user@]host, or an ssh:// URL, which urlHosts reads), valueOptions the letters of its
// options that take a value: "" when there is none.
func sshDestination(args []string, valueOptions string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return sshHost(args[i+1])
			}
			return ""
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// A cluster (-vp 22, -p22): its last letter's value is the next word unless
			// attached.
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(valueOptions, a[j]) >= 0 {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		default:
			return sshHost(a)
		}
	}
	return ""
}

// sshRoutes gives the hosts ssh's options send the connection to, whatever its destination:
// the jump hosts of -J and ProxyJump, and a HostName given by -o.
func sshRoutes(args []string, add func(string)) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		switch {
		case a == "-J" && i+1 < len(args):
			v, i = "ProxyJump="+args[i+1], i+1
		case strings.HasPrefix(a, "-J") && len(a) > 2:
			v = "ProxyJump=" + a[2:]
		case a == "-o" && i+1 < len(args):
			v, i = args[i+1], i+1
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			v = a[2:]
		default:
			continue
		}
		v = strings.TrimSpace(v)
		j := strings.IndexAny(v, "= \t") // ssh takes Key=Value and Key Value
		if j < 0 {
			continue
		}
		k, val := v[:j], strings.TrimLeft(v[j+1:], "= \t")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "proxyjump":
			for _, j := range strings.Split(strings.TrimSpace(val), ",") {
				if h := proxyHost(strings.TrimPrefix(j, "ssh://")); h != "" && !strings.EqualFold(h, "none") {
					add(h)
				}
			}
		case "hostname":
			if h := strings.TrimSpace(val); h != "" {
				add(h)
			}
		}
	}
}

// sshHost is the host of an ssh destination [user@]host[:port]; "" for an ssh:// URL.
func sshHost(d string) string {
	if strings.Contains(d, "://") {
		return ""
	}
	if i := strings.LastIndexByte(d, '@'); i >= 0 {
		d = d[i+1:]
	}
	return d
}

// ConfigHost stands for the hosts a config file the line names may route to.
const ConfigHost = "(a host a config file the line names)"

// sshFamily take -F FILE, a config whose Host blocks may name any HostName.
var sshFamily = map[string]bool{"ssh": true, "scp": true, "sftp": true, "rsync": true, "mosh": true}

// configRoutes matches text naming a config that may route a connection: git's config from an
// environment variable or an include, an ssh command given -F.
var configRoutes = regexp.MustCompile(`\bGIT_CONFIG(?:_GLOBAL|_SYSTEM)?=|(?i)\binclude(?:if\.[^=\s]*)?\.path=|(?i)(?:sshcommand|GIT_SSH_COMMAND|GIT_SSH)=.*\s-F`)

// hostPrograms take hosts in their words: clients of the network whose operands and options
// name where they connect.
var hostPrograms = map[string]bool{"curl": true, "wget": true, "ssh": true, "scp": true, "sftp": true,
	"nc": true, "ncat": true, "netcat": true, "socat": true, "telnet": true, "openssl": true, "ftp": true,
	"lftp": true, "aria2c": true, "http": true, "https": true, "xh": true, "xhs": true, "httpie": true,
	"mosh": true, "rsh": true, "rlogin": true, "tftp": true, "smbclient": true, "ldapsearch": true,
	"mysql": true, "psql": true, "redis-cli": true, "mongosh": true, "websocat": true, "grpcurl": true,
	// A lookup or a probe sends the name it is given out (to its nameserver): data.evil.com.
	"dig": true, "host": true, "nslookup": true, "drill": true, "kdig": true, "delv": true, "getent": true,
	"ping": true, "ping6": true, "traceroute": true, "traceroute6": true, "tracepath": true, "mtr": true, "whois": true}

// dottedHostPrograms name hosts inside package and image names (go get evil.com/x, pip
// --index-url=evil.com, docker pull evil.com/img): their dotted words count, not every word.
var dottedHostPrograms = map[string]bool{"go": true, "pip": true, "pip3": true, "uv": true, "npm": true,
	"yarn": true, "pnpm": true, "cargo": true, "gem": true, "docker": true, "podman": true, "helm": true}

// hostToken is a name or an IPv4 address as it may stand in a word.
var hostToken = regexp.MustCompile(`[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)+`)

// wordHosts gives each name in w: every dotted token (evil.com in -xevil.com:8080 too: an
// option's first letters may run into its value), and w itself when it is one label (nc
// evil 80, ssh myhost).
func wordHosts(w string, add func(string)) {
	if len(w) > 2 && w[0] == '-' && w[1] != '-' {
		for _, t := range hostToken.FindAllString(w[2:], -1) {
			add(t)
		}
	}
	for _, t := range hostToken.FindAllString(w, -1) {
		add(t)
	}
	if w != "" && w[0] != '-' && !strings.Contains(w, ".") && strings.Trim(strings.ToLower(w), "abcdefghijklmnopqrstuvwxyz0123456789-_") == "" {
		add(w)
	}
	// A name with no dot before a port, a path or a user (localhost:8099/x, -xintranet:3128,
	// TCP:localhost:80, HTTPS_PROXY=intranet:3128): each plain part may be a host.
	if strings.ContainsAny(w, ":/@=") {
		if len(w) > 2 && w[0] == '-' && w[1] != '-' {
			w = w[2:]
		}
		for _, part := range strings.FieldsFunc(w, func(r rune) bool { return strings.ContainsRune(":/@=,", r) }) {
			if strings.Trim(strings.ToLower(part), "abcdefghijklmnopqrstuvwxyz0123456789-_") == "" &&
				strings.Trim(part, "0123456789") != "" && !strings.HasPrefix(part, "-") {
				add(part)
			}
		}
	}
}

// urlHosts gives the host of each `scheme://authority` in w. The authority runs to a path, a
// query, a blank, a quote or a shell operator; a brace or bracket inside it (curl's globs)
// stays, making a host no rule can match.
func urlHosts(w string, add func(string)) {
	for {
		i := strings.Index(w, "://")
		if i < 0 {
			return
		}
		scheme := w[:i]
		if j := strings.LastIndexFunc(scheme, func(r rune) bool { return !isSchemeChar(r) }); j >= 0 {
			scheme = scheme[j+1:]
		}
		w = w[i+3:]
		end := strings.IndexAny(w, "/?#\\ \t\n'\"`<>;,()|&")
		if strings.HasPrefix(w, "[") {
			if j := strings.IndexByte(w, ']'); j > 0 && (end < 0 || j < end) {
				if k := strings.IndexAny(w[j:], "/?#\\ \t\n'\"`<>;,()|&"); k >= 0 {
					end = j + k
				} else {
					end = -1
				}
			}
		}
		if end < 0 {
			end = len(w)
		}
		auth := w[:end]
		if strings.EqualFold(scheme, "file") || auth == "" {
			continue
		}
		add(hostOf(auth))
	}
}

// lenientURL matches what curl and wget also take for a web URL: the scheme, then any run of
// slashes and backslashes, or none (http:/\\host, http:\\host, http:host:80/x).
var lenientURL = regexp.MustCompile(`(?i)(?:^|[^a-z0-9+.-])(?:https?|ftps?|wss?):[/\\]*`)

// lenientURLHosts gives the host of each lenientURL in w that is not the plain scheme://
// urlHosts reads.
func lenientURLHosts(w string, add func(string)) {
	for _, m := range lenientURL.FindAllStringIndex(w, -1) {
		if strings.HasSuffix(w[m[0]:m[1]], "://") && !strings.Contains(w[m[0]:m[1]], "\\") && strings.Count(w[m[0]:m[1]], "/") == 2 {
			continue // scheme://, urlHosts'
		}
		rest := w[m[1]:]
		end := strings.IndexAny(rest, "/?#\\ \t\n'\"`<>;,()|&")
		if end < 0 {
			end = len(rest)
		}
		if auth := rest[:end]; auth != "" {
			add(hostOf(auth))
		}
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

// scpHosts gives the host of each scp-style operand.
func scpHosts(args []string, add func(string)) {
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "://") {
			continue
		}
		if h, _, ok := strings.Cut(a, ":"); ok && h != "" && !strings.Contains(h, "/") {
			add(hostOf(h))
		}
	}
}
