package permission

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/classifier"
)

// Source names where a rule came from, strongest first in Sources.
type Source string

// The rule sources of DESIGN.md.
const (
	SourcePolicy  Source = "policySettings"
	SourceCLI     Source = "cliArg"
	SourceSession Source = "session"
	SourceLocal   Source = "localSettings"
	SourceProject Source = "projectSettings"
	SourceUser    Source = "userSettings"
)

// Sources lists every source, strongest first; a RuleSet keeps rules in this order so the
// first hit reported is the strongest one.
var Sources = []Source{SourcePolicy, SourceCLI, SourceSession, SourceLocal, SourceProject, SourceUser}

// Rank orders sources: 0 is the strongest (policySettings); an unknown source ranks after every
// known one.
func (s Source) Rank() int {
	for i, x := range Sources {
		if x == s {
			return i
		}
	}
	return len(Sources)
}

// Kind says how a rule's content is matched.
type Kind string

// Rule kinds.
const (
	// KindAll is a bare tool name (or Tool(*)): every call of that tool.
	KindAll Kind = "all"
	// KindTool is a tool-name pattern: `*`, `mcp__*`, `mcp__srv` (whole server), `mcp__srv__*`.
	KindTool Kind = "tool"
	// KindBash is Bash(pattern): prefix, glob or exact command text.
	KindBash Kind = "bash"
	// KindPath is a gitignore-style path pattern of Read/Edit/Write/Glob/Grep/NotebookEdit/MultiEdit.
	KindPath Kind = "path"
	// KindDomain is WebFetch(domain:host).
	KindDomain Kind = "domain"
	// KindWeb is WebFetch(METHOD host/path-glob): one HTTP method ("*": any) on a host pattern
	// (as KindDomain's) and a path glob, for requests whose method and path can be seen.
	KindWeb Kind = "web"
	// KindParam is Tool(param:value), deny and ask only.
	KindParam Kind = "param"
)

// Anchor says what a path pattern is relative to.
type Anchor string

// Path anchors of the gitignore-style syntax.
const (
	AnchorRoot     Anchor = "root"     // //p: the filesystem root
	AnchorHome     Anchor = "home"     // ~/p: the session owner's home
	AnchorFile     Anchor = "file"     // /p: the settings file's root (see Rule.Root)
	AnchorCwd      Anchor = "cwd"      // ./p or p/q: the session's cwd
	AnchorAnywhere Anchor = "anywhere" // bare name: any depth
)

// Rule is one parsed, validated permission rule.
type Rule struct {
	// Tool is the tool name or tool-name pattern, e.g. "Bash", "mcp__github__*".
	Tool string `json:"tool"`
	// Content is the text inside the parentheses, "" for a bare tool rule.
	Content  string   `json:"content,omitempty"`
	Behavior Behavior `json:"behavior"`
	Source   Source   `json:"source"`
	// Origin is where the rule was written: "file:line", or "cli", "session".
	Origin string `json:"origin,omitempty"`
	// Root anchors /p path patterns: the project root for project and local files, the settings
	// directory for the user file, the cwd for cliArg and session rules, / for admin policy.
	Root string `json:"root,omitempty"`

	Kind Kind `json:"kind"`
	// Pattern is the matchable part: the Bash pattern, the path pattern after its anchor, the
	// domain, the tool-name glob, or the parameter value pattern.
	Pattern string `json:"pattern,omitempty"`
	// Param is the parameter name of a KindParam rule.
	Param string `json:"param,omitempty"`
	// Anchor applies to KindPath.
	Anchor Anchor `json:"anchor,omitempty"`
	// Method and URLPath apply to KindWeb (whose Pattern is the host pattern): the HTTP method,
	// "*" for any, and the path glob, starting with "/".
	Method  string `json:"method,omitempty"`
	URLPath string `json:"url_path,omitempty"`
}

// String renders the rule as written: Tool or Tool(content).
func (r Rule) String() string {
	if r.Content == "" {
		return r.Tool
	}
	return r.Tool + "(" + r.Content + ")"
}

// maxRuleLen bounds a rule so a settings file cannot make matching arbitrarily expensive.
const maxRuleLen = 4096

// Tools whose rule content is a gitignore-style path pattern.
var pathTools = map[string]bool{"Read": true, "Edit": true, "Write": true, "Glob": true, "Grep": true, "NotebookEdit": true, "MultiEdit": true}

// IsPathTool reports whether tool takes path-pattern rules.
func IsPathTool(tool string) bool { return pathTools[tool] }

// toolParams are the top-level parameters of the built-in tools (COMPAT section 5); a rule
// content `name:value` with one of these names is a parameter rule.
var toolParams = map[string][]string{
	"Bash":         {"command", "timeout", "description", "run_in_background", "dangerouslyDisableSandbox"},
	"Read":         {"file_path", "offset", "limit", "pages"},
	"Write":        {"file_path", "content"},
	"Edit":         {"file_path", "old_string", "new_string", "replace_all"},
	"MultiEdit":    {"file_path", "edits"},
	"Glob":         {"pattern", "path"},
	"Grep":         {"pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C", "context", "-o", "head_limit", "offset", "multiline"},
	"NotebookEdit": {"notebook_path", "new_source", "cell_id", "cell_type", "edit_mode"},
	"WebFetch":     {"url", "prompt"},
}

// ignoredParams are parameters clients ignore parameter rules on (the content syntax covers
// them). Ignoring a deny silently would fail open, so they are rejected instead.
var ignoredParams = map[string]bool{"command": true, "file_path": true, "path": true, "notebook_path": true, "url": true}

var (
	toolNameRe  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	toolGlobRe  = regexp.MustCompile(`^[A-Za-z0-9_*-]+$`)
	paramRuleRe = regexp.MustCompile(`^\s*(-?[A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*?)\s*$`)
	mcpAllowRe  = regexp.MustCompile(`^mcp__[A-Za-z0-9_-]+?__`)
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedRule, fmt.Sprintf(format, args...))
}

// ParseRule parses rule text for use as a deny rule (the most permissive syntax); use
// ParseRuleFor to validate it for a given behavior. Malformed text is an error saying why;
// a rule never silently matches nothing or everything.
func ParseRule(text string) (Rule, error) { return ParseRuleFor(text, Deny) }

// ParseRuleFor parses and validates rule text for behavior b. Some syntax is valid only for
// deny and ask (parameter rules, tool-name globs): an allow using it is an error, not dropped.
func ParseRuleFor(text string, b Behavior) (Rule, error) {
	switch b {
	case Allow, Deny, Ask:
	default:
		return Rule{}, malformed("unknown behavior %q", b)
	}
	if len(text) > maxRuleLen {
		return Rule{}, malformed("rule longer than %d bytes", maxRuleLen)
	}
	if !utf8.ValidString(text) {
		return Rule{}, malformed("rule is not valid UTF-8")
	}
	for _, c := range text {
		if unicode.IsControl(c) {
			return Rule{}, malformed("control character %U in rule", c)
		}
	}
	t := strings.TrimSpace(text)
	if t == "" {
		return Rule{}, malformed("empty rule")
	}
	r := Rule{Behavior: b}
	open := strings.IndexByte(t, '(')
	if open < 0 {
		if strings.ContainsRune(t, ')') {
			return Rule{}, malformed("%q: unbalanced ')'", t)
		}
		r.Tool = t
	} else {
		if !strings.HasSuffix(t, ")") {
			return Rule{}, malformed("%q: content must end with ')'", t)
		}
		r.Tool = strings.TrimSpace(t[:open])
		r.Content = strings.TrimSpace(t[open+1 : len(t)-1])
		if r.Content == "" {
			return Rule{}, malformed("%q: empty parentheses; write the bare tool name to match every call", t)
		}
	}
	if err := r.parseTool(); err != nil {
		return Rule{}, err
	}
	if r.Kind == KindTool {
		if r.Content != "" && r.Content != "*" {
			return Rule{}, malformed("%q: a tool-name pattern takes no content", t)
		}
		r.Content = ""
		return r, nil
	}
	if r.Content == "" || (r.Content == "*" && r.Tool != "WebFetch") {
		// Bash = Bash(*) = every call (COMPAT 1).
		r.Content = ""
		r.Kind = KindAll
		return r, nil
	}
	if err := r.parseContent(); err != nil {
		return Rule{}, fmt.Errorf("%q: %w", t, err)
	}
	return r, nil
}

func (r *Rule) parseTool() error {
	name := r.Tool
	if name == "" {
		return malformed("missing tool name")
	}
	if strings.HasPrefix(name, "mcp__") {
		rest := strings.TrimPrefix(name, "mcp__")
		if rest == "" {
			return malformed("%q: missing MCP server name", name)
		}
		if !toolGlobRe.MatchString(name) {
			return malformed("%q: tool names use letters, digits, '_', '-' and '*'", name)
		}
		if !strings.Contains(rest, "__") && !strings.Contains(rest, "*") {
			// mcp__srv is the whole server (COMPAT 1).
			r.Kind, r.Pattern = KindTool, name+"__*"
			return nil
		}
		if strings.Contains(name, "*") {
			if r.Behavior == Allow && !mcpAllowRe.MatchString(name) {
				return malformed("%q: an allow rule may glob a tool name only after a literal mcp__<server>__", name)
			}
			r.Kind, r.Pattern = KindTool, name
		}
		return nil
	}
	if strings.Contains(name, "*") {
		if !toolGlobRe.MatchString(name) {
			return malformed("%q: tool names use letters, digits, '_', '-' and '*'", name)
		}
		if r.Behavior == Allow {
			return malformed("%q: an allow rule may glob a tool name only after a literal mcp__<server>__", name)
		}
		r.Kind, r.Pattern = KindTool, name
		return nil
	}
	if !toolNameRe.MatchString(name) {
		return malformed("%q: tool names use letters, digits, '_' and '-'", name)
	}
	if err := checkToolCase(name); err != nil {
		return err
	}
	return nil
}

// canonicalTools are the agents' built-in tool names as calls carry them (COMPAT 1: canonical
// names only).
var canonicalTools = []string{
	"Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "NotebookEdit", "NotebookRead", "WebFetch",
	"WebSearch", "Task", "Agent", "TodoWrite", "AskUserQuestion", "ExitPlanMode", "LS", "BashOutput", "KillShell",
	"Skill", "SlashCommand", "ToolSearch", "EnterPlanMode",
}

// checkToolCase refuses a tool name that differs from a built-in one, or from the mcp__
// prefix, only in case. Tool names compare exactly, so deny Webfetch(domain:x) or bash was
// accepted and matched no call: a deny that silently held nothing.
func checkToolCase(name string) error {
	if strings.HasPrefix(strings.ToLower(name), "mcp__") {
		return malformed("%q: MCP tool names start with mcp__ in lowercase", name)
	}
	for _, t := range canonicalTools {
		if name != t && strings.EqualFold(name, t) {
			return malformed("%q: tool names are case-sensitive; write %s", name, t)
		}
	}
	return nil
}

func (r *Rule) parseContent() error {
	c := r.Content
	tool := r.Tool
	if tool == "WebFetch" && strings.HasPrefix(c, "domain:") {
		return r.parseDomain(strings.TrimSpace(strings.TrimPrefix(c, "domain:")))
	}
	if m := paramRuleRe.FindStringSubmatch(c); m != nil && r.isParam(m[1], m[2]) {
		name, val := m[1], m[2]
		if r.Behavior == Allow {
			return malformed("parameter rules are deny/ask only")
		}
		if ignoredParams[name] {
			return malformed("parameter rules on %q are ignored by clients; use the content syntax, e.g. %s(<pattern>)", name, tool)
		}
		if val == "" {
			return malformed("parameter %q has an empty value", name)
		}
		r.Kind, r.Param, r.Pattern = KindParam, name, val
		return nil
	}
	switch {
	case tool == "Bash":
		return r.parseBash()
	case pathTools[tool]:
		return r.parsePath()
	case tool == "WebFetch":
		return r.parseWeb()
	default:
		return malformed("tool %s takes no content other than param:value", tool)
	}
}

// isParam decides whether `name:value` is a parameter rule. For Bash a lone `timeout:*` is the
// legacy prefix syntax (`Bash(timeout:*)` is the timeout command), so it stays a command
// pattern; Bash's other parameters name no command, and as a prefix rule
// Bash(run_in_background:*) or Bash(dangerouslyDisableSandbox:*) denied nothing at all.
func (r *Rule) isParam(name, val string) bool {
	params, known := toolParams[r.Tool]
	if !known {
		return true // MCP and other tools: the content syntax is only param:value
	}
	if r.Tool == "Bash" && val == "*" && name == "timeout" {
		return false
	}
	for _, p := range params {
		if p == name {
			return true
		}
	}
	return false
}

func (r *Rule) parseBash() error {
	p := strings.Join(strings.Fields(r.Content), " ")
	if strings.HasSuffix(p, ":*") {
		// Legacy prefix form, only at the end (COMPAT 1): `ls:*` = `ls *`.
		p = strings.TrimSuffix(p, ":*")
		if p == "" {
			return malformed("empty prefix before :*")
		}
		p += " *"
	}
	if strings.Trim(p, "* ") == "" {
		r.Kind, r.Content = KindAll, ""
		return nil
	}
	if err := classifier.ValidateRulePattern(p); err != nil {
		return malformed("%v", err)
	}
	r.Kind, r.Pattern = KindBash, p
	return nil
}

// shellVariable returns the first shell expansion in a path pattern ($NAME, ${…} or $(…)
// where the $ is not escaped), or "": a rule writer's $HOME means their home, the rule's text
// a directory named $HOME.
func shellVariable(p string) string {
	for i := 0; i < len(p)-1; i++ {
		switch c := p[i]; {
		case c == '\\':
			i++ // an escaped character is itself
		case c == '$':
			if n := p[i+1]; n == '{' || n == '(' || n == '_' || 'A' <= n && n <= 'Z' || 'a' <= n && n <= 'z' {
				end := i + 2
				for end < len(p) && p[end] != '/' && p[end] != '}' && p[end] != ')' {
					end++
				}
				if end < len(p) && p[end] != '/' {
					end++
				}
				return p[i:end]
			}
		}
	}
	return ""
}

// pathPatternMistake says how p is written as something other than a path pattern, which
// would silently match nothing: quoted whole ("//etc/x"), a URL (file:///etc/x), or with a
// Bash rule's :* suffix.
func pathPatternMistake(p string) string {
	switch {
	case len(p) >= 2 && (p[0] == '"' || p[0] == '\'') && p[len(p)-1] == p[0]:
		return "is quoted: a path pattern is written bare, Read(//etc/x)"
	case strings.Contains(p, "://"):
		return "is a URL: a path pattern is a path, Read(//etc/x) (WebFetch rules take hosts and URLs)"
	case strings.HasSuffix(p, ":*"):
		return "ends in :*, a Bash rule's prefix form: a path pattern matches below a dir with /**"
	}
	return ""
}

// twoRules finds a rule's end and another's start inside a path pattern (`),Edit(`).
var twoRules = regexp.MustCompile(`\)\s*,?\s*[A-Z][A-Za-z]*\(`)

func (r *Rule) parsePath() error {
	p := r.Content
	if strings.ContainsRune(p, 0) {
		return malformed("NUL in path pattern")
	}
	if m := twoRules.FindString(p); m != "" {
		// `Read(./secrets/**),Edit(x)` is one rule naming a path no file has: two rules run
		// together, which would silently hold nothing.
		return malformed("%q holds %q: two rules run together; give each its own", r.String(), m)
	}
	if v := shellVariable(p); v != "" {
		// Nothing expands it: `$HOME/x` would name <cwd>/$HOME/x and protect nothing.
		return malformed("%q names %s, which is not expanded in a path pattern; write ~/… or an absolute path (\\$ for a name that holds a $)", r.String(), v)
	}
	if why := pathPatternMistake(p); why != "" {
		return malformed("%q %s", r.String(), why)
	}
	switch {
	case strings.HasPrefix(p, "//"):
		r.Anchor, p = AnchorRoot, "/"+strings.TrimLeft(p, "/")
	case p == "~" || strings.HasPrefix(p, "~/"):
		r.Anchor, p = AnchorHome, strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	case strings.HasPrefix(p, "~"):
		return malformed("~user paths are not supported; write //home/<user>/...")
	case strings.HasPrefix(p, "/"):
		r.Anchor, p = AnchorFile, strings.TrimPrefix(p, "/")
	case strings.HasPrefix(p, "./"):
		r.Anchor, p = AnchorCwd, strings.TrimPrefix(p, "./")
	case strings.HasPrefix(p, "**/"):
		r.Anchor = AnchorAnywhere
		p = strings.TrimPrefix(p, "**/")
	case !strings.Contains(strings.TrimSuffix(p, "/"), "/"):
		// A bare name matches at any depth (COMPAT 1: Read(.env) = Read(**/.env)).
		r.Anchor = AnchorAnywhere
	default:
		// src/**: as allow only <cwd>/src; as deny/ask any src dir at any depth (COMPAT 1).
		if r.Behavior == Allow {
			r.Anchor = AnchorCwd
		} else {
			r.Anchor = AnchorAnywhere
		}
	}
	// Empty and `.` segments name the directory they are in, as they do in a path: dropped,
	// so `sub//.env` and `sub/./.env` match the .env `sub/.env` does rather than nothing.
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	kept := segs[:0]
	for _, seg := range segs {
		switch seg {
		case "", ".":
			continue
		case "..":
			return malformed("'..' in a path pattern; patterns match resolved paths")
		}
		if _, err := path.Match(seg, ""); err != nil {
			return malformed("bad glob segment %q: %v", seg, err)
		}
		if !strings.ContainsAny(seg, "*?") {
			// A segment that matches only what `.` or `..` name matches no path (paths are
			// clean), however it is spelled: `\.` and `[.]` are `.`.
			dot, _ := path.Match(seg, ".")
			dotDot, _ := path.Match(seg, "..")
			switch {
			case dotDot:
				return malformed("%q in a path pattern is '..'; patterns match resolved paths", seg)
			case dot && (strings.ReplaceAll(seg, "\\", "") == "." || seg == "[.]"):
				continue
			case dot:
				return malformed("segment %q may be '.', the directory it is in; write a rule for each name it stands for", seg)
			}
		}
		kept = append(kept, seg)
	}
	p = strings.Join(kept, "/")
	switch {
	case r.Anchor == AnchorRoot:
		p = "/" + p // `//` alone is the whole filesystem
	case p == "" && r.Anchor == AnchorAnywhere:
		return malformed("the path pattern names no file or directory")
	}
	r.Kind, r.Pattern = KindPath, p
	return nil
}

func (r *Rule) parseDomain(d string) error {
	d, err := DomainPattern(d)
	if err != nil {
		return err
	}
	r.Kind, r.Pattern = KindDomain, d
	return nil
}

// DomainPattern checks and normalizes the host pattern of WebFetch(domain:…), the form
// MatchDomain expects: lowercase, one trailing dot dropped. Anything else that names a domain
// by this syntax (network.allowed_domains and denied_domains) goes through it too, so that no
// entry silently matches nothing.
func DomainPattern(d string) (string, error) {
	if a, err := netip.ParseAddr(unbracket(d)); err == nil && strings.Contains(d, ":") {
		// An IPv6 address, bare or in brackets, in its one spelling (the proxy's): an
		// IPv4-mapped one is the IPv4 address. A zone names an interface of the daemon's host.
		if a.Zone() != "" {
			return "", malformed("domain:%s: an address with a zone names none of the sandbox's", d)
		}
		a = a.Unmap()
		if v4, ok := CarriedIPv4(a); ok {
			// The proxy refuses such an address and asks for the IPv4 one it carries.
			return "", malformed("domain:%s carries the IPv4 address %s (NAT64, 6to4 or IPv4-compatible): name %s", d, v4, v4)
		}
		return a.String(), nil
	}
	if strings.ContainsAny(d, "/:") {
		return "", malformed("domain:%s: give a host name, not a URL", d)
	}
	n, err := hostPattern(d)
	if err != nil {
		return "", err
	}
	if looksNumeric(n) {
		// 10.3, 010.0.0.2, 0xa.0.0.4, 192.0.2.*: a request never names a host so (the proxy
		// refuses numeric names), and an address is matched only whole.
		return "", malformed("domain:%s looks like an IP address: name one whole, as a.b.c.d (a short, octal or hex form, or a wildcard over addresses, matches no request)", d)
	}
	return n, nil
}

// looksNumeric reports a normalized host pattern that is not a whole IPv4 address but reads
// as one: its last label a number (no top-level domain is), or * after numbers only.
func looksNumeric(n string) bool {
	if a, err := netip.ParseAddr(n); err == nil && a.Is4() {
		return false
	}
	labels := strings.Split(n, ".")
	number := func(l string) bool {
		if h, ok := strings.CutPrefix(l, "0x"); ok {
			l = h
			return l != "" && strings.Trim(l, "0123456789abcdef") == ""
		}
		return l != "" && strings.Trim(l, "0123456789") == ""
	}
	last := labels[len(labels)-1]
	if number(last) {
		return true
	}
	return last == "*" && len(labels) > 1 && !slices.ContainsFunc(labels[:len(labels)-1], func(l string) bool { return !number(l) && l != "*" })
}

// CarriedIPv4 is the IPv4 address an IPv6 one hands to a gateway or a stack that routes it:
// NAT64 (64:ff9b::/96), 6to4 (2002::/16) or IPv4-compatible (::/96 but :: and ::1). The proxy
// refuses such an address by the same test a rule naming one is refused by.
func CarriedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case netip.MustParsePrefix("2002::/16").Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case netip.MustParsePrefix("::/96").Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	}
	return netip.Addr{}, false
}

// unbracket strips the brackets around an IPv6 address ([::1]), when both are there.
func unbracket(d string) string {
	if len(d) > 1 && d[0] == '[' && d[len(d)-1] == ']' {
		return d[1 : len(d)-1]
	}
	return d
}

// hostPattern normalizes a host pattern of a domain or web rule (lowercase, one trailing dot
// dropped) and checks its characters.
func hostPattern(d string) (string, error) {
	lower := strings.ToLower(d)
	d = strings.TrimSuffix(lower, ".")
	if d == "" {
		return "", malformed("empty domain")
	}
	if d == "*" && lower != d {
		// `*.` is `*` (every name) with its dot dropped, or any single label if the dot is
		// the root's: refused rather than guessed.
		return "", malformed("domain %q: write * for every name", lower)
	}
	if d != "*" {
		for _, label := range strings.Split(d, ".") {
			if label == "" {
				return "", malformed("empty label in domain %q", d)
			}
			for _, c := range label {
				if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '*' || c == '_') {
					return "", malformed("domain %q: character %q not allowed", d, c)
				}
			}
		}
	}
	return d, nil
}

// webRuleHint is the shape a WebFetch rule must have, for errors.
const webRuleHint = "WebFetch content is domain:<host> or METHOD host/path-glob, e.g. WebFetch(GET registry.npmjs.org/**)"

// parseWeb parses `METHOD host/path-glob`. Anything that could be read two ways is refused:
// a rule that silently matched nothing would let a deny fail open.
func (r *Rule) parseWeb() error {
	f := strings.Fields(r.Content)
	if len(f) != 2 {
		return malformed("%s", webRuleHint)
	}
	method, target := f[0], f[1]
	if method != "*" {
		for i := 0; i < len(method); i++ {
			c := method[i]
			if c >= 'a' && c <= 'z' {
				return malformed("method %q: HTTP methods are case-sensitive and written in uppercase (GET, POST), or * for any", method)
			}
			if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return malformed("method %q: not an HTTP method; %s", method, webRuleHint)
			}
		}
	}
	if strings.Contains(target, "://") {
		return malformed("%q: give host/path without the scheme; the rule covers http and https alike", target)
	}
	host, rest, ok := strings.Cut(target, "/")
	if !ok {
		return malformed("%q: a path glob must follow the host (%s/** for every path); for the whole host use WebFetch(domain:%s)", target, target, target)
	}
	if strings.Contains(host, ":") {
		return malformed("%q: rules name hosts, not ports; drop the :port", host)
	}
	host, err := hostPattern(host)
	if err != nil {
		return err
	}
	p := "/" + rest
	if strings.ContainsAny(p, "?#") {
		return malformed("path %q: the query and fragment are not matched; give the path only", p)
	}
	if strings.ContainsAny(p, "%[]\\") {
		return malformed("path %q: write the path decoded, with * (one segment) and ** (any depth) as its only wildcards", p)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(rest, "/"), "/") {
		switch {
		case seg == "" && rest != "":
			return malformed("path %q has an empty segment", p)
		case seg == "." || seg == "..":
			return malformed("path %q: %q segments are resolved before matching; write the path without them", p, seg)
		}
	}
	r.Kind, r.Pattern, r.Method, r.URLPath = KindWeb, host, method, p
	return nil
}
