package classifier

import "strings"

// curl and wget read and write files of their own besides what they fetch: an upload, a body
// or a header from @FILE, a form field's file, cookies, certificates and keys, a config file,
// traces and logs. Each is a path the rules meet: `curl -d @../other/.env URL` reads .env as
// `cat` would, and sends it. A name the program makes up (curl -O, wget without -O: the URL's
// last segment, in the cwd or the output dir) is a write the line bounds to that dir but does
// not name.

// wgetShortArg are wget's short options that take a value.
const wgetShortArg = "aeilnotwABDIOPQRTUXY"

// fetchState is what a curl or wget line's options said so far, for what follows them.
type fetchState struct {
	urls      []string // curl --url values: operands too
	fileProto bool     // curl --proto-default names file: a URL without a scheme is a path
	named     bool     // an output file is named (-o, -O FILE)
	madeUp    bool     // a file named by the URL or the server is written (curl -O, -J)
	outputDir bool     // curl --output-dir, wget -P: the made-up name goes there
}

// fetchOpt records what curl's or wget's (name) option o reads or writes.
func (pc *pathCollector) fetchOpt(name string, o opt, ws []word, vals []string, sb *sub, st *fetchState) {
	is := func(short string, longs ...string) bool {
		if !o.long {
			return short != "" && o.name == short
		}
		for _, l := range longs {
			if longIs(o.name, l) {
				return true
			}
		}
		return false
	}
	// v is o.val or a part of it (@FILE's FILE): o.val's word must be static, and v is the path.
	file := func(v, access string) {
		if v != "" && pc.optStatic(ws, vals, o.val) {
			pc.add(v, access, name, sb.dirs, sb.dirsUnknown)
		}
	}
	if name == "wget" {
		pc.wgetOpt(o, is, file, st)
		return
	}
	switch {
	case is("O", "remote-name", "remote-name-all", "remote-header-name"), is("J"):
		st.madeUp = true
	case !o.hasVal:
	case is("", "url"):
		st.urls = append(st.urls, o.val)
	case is("", "proto-default"):
		st.fileProto = st.fileProto || strings.Contains(strings.ToLower(o.val), "file")
	case is("o", "output"):
		st.named = true
		if curlTemplate(o.val) {
			// #1 is what a glob in the URL matched (`-o '#1' 'http://h/{.bashrc,x}'`).
			st.madeUp = true
			return
		}
		file(o.val, AccessWrite)
	case is("", "output-dir"):
		st.outputDir = true
		file(o.val, AccessWrite)
	case is("c", "cookie-jar"), is("D", "dump-header"), is("", "trace", "trace-ascii", "stderr", "libcurl", "etag-save", "hsts", "alt-svc"):
		file(o.val, AccessWrite) // hsts and alt-svc are read first, then written
	case is("T", "upload-file"):
		if strings.ContainsAny(o.val, "[]{}") {
			pc.unknown() // curl's own globbing: `-T '{a,b}'` uploads both
			return
		}
		file(o.val, AccessRead)
	case is("K", "config"):
		// Its lines are options: an output, an upload, a @FILE, none of them on the line.
		file(o.val, AccessRead)
		pc.unknown()
	case is("E", "cert", "key", "cacert", "capath", "crlfile", "proxy-cacert", "proxy-capath", "proxy-cert", "proxy-key",
		"proxy-crlfile", "netrc-file", "etag-compare", "random-file", "egd-file"):
		file(o.val, AccessRead)
	case is("", "pinnedpubkey", "proxy-pinnedpubkey"):
		if !strings.HasPrefix(o.val, "sha256//") {
			file(o.val, AccessRead)
		}
	case is("b", "cookie"):
		if !strings.Contains(o.val, "=") {
			file(o.val, AccessRead) // no '=': a file of cookies
		}
	case is("d", "data", "data-ascii", "data-binary", "json"), is("H", "header", "proxy-header"), is("w", "write-out"):
		if f, ok := strings.CutPrefix(o.val, "@"); ok {
			file(f, AccessRead)
		}
	case is("", "data-urlencode", "url-query", "variable"):
		// name@FILE or @FILE; name=content and =content name none.
		if at := strings.IndexByte(o.val, '@'); at >= 0 && !strings.Contains(o.val[:at], "=") {
			file(o.val[at+1:], AccessRead)
		}
	case is("F", "form"):
		pc.curlForm(o.val, file)
	}
}

// curlForm records the files a -F value sends: name=@FILE (as a file) and name=<FILE (as the
// field's text), with ;type=, ;filename= after it. A quoted name, a list (@a,b) or a
// ;headers=@FILE is taken as naming files the line does not show.
func (pc *pathCollector) curlForm(v string, file func(v, access string)) {
	_, val, ok := strings.Cut(v, "=")
	if !ok {
		return
	}
	if val == "" || val[0] != '@' && val[0] != '<' {
		if strings.ContainsAny(val, "@<") && strings.Contains(val, ";") {
			pc.unknown() // value;headers=@FILE, ...
		}
		return
	}
	f, params, _ := strings.Cut(val[1:], ";")
	if strings.ContainsAny(f, `",`) || strings.ContainsAny(params, "@<") {
		pc.unknown()
		return
	}
	file(f, AccessRead)
}

// curlTemplate reports an output name with #N, which curl fills in from the URL's globs.
func curlTemplate(v string) bool {
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '#' && v[i+1] >= '0' && v[i+1] <= '9' {
			return true
		}
	}
	return false
}

// wgetOpt records what wget's option o reads or writes. Its config (--config, -e) can set any
// option, an output or a file to post: files the line does not show (and a program it runs,
// use_askpass, which wgetRunsProgram sees to).
func (pc *pathCollector) wgetOpt(o opt, is func(string, ...string) bool, file func(string, string), st *fetchState) {
	switch {
	case is("e", "execute"), is("", "config"):
		pc.unknown()
	case !o.hasVal:
	case is("O", "output-document"):
		st.named = true
		file(o.val, AccessWrite)
	case is("P", "directory-prefix"):
		st.outputDir = true
		file(o.val, AccessWrite)
	case is("o", "output-file"), is("a", "append-output"), is("", "save-cookies", "rejected-log", "warc-file", "hsts-file"):
		file(o.val, AccessWrite)
	case is("i", "input-file"):
		if !strings.Contains(o.val, "://") {
			file(o.val, AccessRead)
		}
	case is("", "post-file", "body-file", "load-cookies", "ca-certificate", "ca-directory", "certificate", "private-key",
		"crl-file", "warc-dedup"):
		file(o.val, AccessRead)
	case is("", "pinnedpubkey"):
		if !strings.HasPrefix(o.val, "sha256//") {
			file(o.val, AccessRead)
		}
	}
}

// wgetRunsProgram reports a wget option that runs a program the line does not show: -e and
// --config take wgetrc commands, use_askpass among them (a program wget runs for a password),
// as --use-askpass does directly. ws are wget's arguments.
func wgetRunsProgram(ws []word) bool {
	for _, a := range ws {
		if !a.static {
			return true
		}
		v := a.val
		if v == "--" {
			return false
		}
		if long, ok := strings.CutPrefix(v, "--"); ok {
			long, _, _ = strings.Cut(long, "=")
			if longIs(long, "execute") || longIs(long, "config") || longIs(long, "use-askpass") {
				return true
			}
			continue
		}
		// A bundle of short options: the first that takes a value takes the rest.
		for i := 1; i < len(v) && v[0] == '-'; i++ {
			if v[i] == 'e' {
				return true
			}
			if strings.IndexByte(wgetShortArg, v[i]) >= 0 {
				break
			}
		}
	}
	return false
}

// fetchDone records, after the options, what the URLs (operands) read and a file named by the
// URL or the server: curl -O and wget without -O write one (wget -r a tree) in the cwd or the
// output dir, a write the line bounds but does not name.
func (pc *pathCollector) fetchDone(name string, operands []word, sb *sub, st *fetchState) {
	if name == "curl" {
		if pc.curlrcVars || pc.cdVars {
			// A .curlrc the line points curl at (CURL_HOME=. curl URL) holds options: an
			// upload, a @FILE, an output, none of them on the line.
			pc.unknown()
		}
		for _, a := range operands {
			if !a.static || a.glob {
				continue // runtimeWord has marked it
			}
			pc.curlURL(a.val, sb, st)
		}
		for _, u := range st.urls {
			pc.curlURL(u, sb, st)
		}
	}
	if st.madeUp || name == "wget" && !st.named {
		if st.outputDir || sb.dirsUnknown || !pc.inSession(sb.dirs) {
			pc.unknown()
			return
		}
		pc.incomplete = true
	}
}

// curlURL records the file a curl URL reads: file:///PATH (file:/PATH, file://localhost/PATH,
// any case) prints PATH as cat would, and with --proto-default file a URL without a scheme is
// one. curl decodes %XX and expands {a,b} and [1-9] in it, so such a name is not known.
func (pc *pathCollector) curlURL(u string, sb *sub, st *fetchState) {
	scheme, rest, ok := strings.Cut(u, ":")
	switch {
	case ok && strings.EqualFold(scheme, "file"):
	case st.fileProto && (!ok || strings.ContainsAny(scheme, "/.")):
		rest = u // /PATH, or HOST/PATH as after file://
		if !strings.HasPrefix(rest, "/") {
			rest = "//" + rest
		}
	default:
		return
	}
	if strings.ContainsAny(rest, "%{}[]?#") {
		pc.unknown()
		return
	}
	if r, ok := strings.CutPrefix(rest, "//"); ok {
		// The path, whatever the host: curl reads it for file://localhost/ and
		// file://127.0.0.1/ alike, or refuses.
		_, p, _ := strings.Cut(r, "/")
		rest = "/" + p
	}
	pc.add(rest, AccessRead, "curl", sb.dirs, sb.dirsUnknown)
}

// curlrcVarNamed reports a line that names CURL_HOME or XDG_CONFIG_HOME, where curl looks for
// its .curlrc (HOME, the third, is cdVarNamed's).
func curlrcVarNamed(src string) bool {
	return strings.Contains(src, "CURL_HOME") || strings.Contains(src, "XDG_CONFIG_HOME")
}
