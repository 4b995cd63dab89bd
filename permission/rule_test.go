package permission

import (
	"errors"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/classifier"
)

func TestParseRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text    string
		b       Behavior
		kind    Kind
		pattern string
		anchor  Anchor
		errLike string // non-empty: must fail with a message containing it
	}{
		{text: "Bash", b: Allow, kind: KindAll},
		{text: "bash", b: Deny, errLike: "case-sensitive; write Bash"},
		{text: "BASH(rm *)", b: Deny, errLike: "case-sensitive; write Bash"},
		{text: "Webfetch(domain:evil.example)", b: Deny, errLike: "case-sensitive; write WebFetch"},
		{text: "read(~/.ssh/**)", b: Deny, errLike: "case-sensitive; write Read"},
		{text: "websearch", b: Ask, errLike: "case-sensitive; write WebSearch"},
		{text: "enterplanmode", b: Deny, errLike: "case-sensitive; write EnterPlanMode"},
		{text: "MCP__github__create_issue", b: Deny, errLike: "lowercase"},
		{text: "Mcp__github", b: Deny, errLike: "lowercase"},
		{text: "WebSearch", b: Deny, kind: KindAll},
		{text: "Bash(*)", b: Allow, kind: KindAll},
		{text: "Bash(npm run test:*)", b: Allow, kind: KindBash, pattern: "npm run test *"},
		{text: "Bash(git   *  main)", b: Allow, kind: KindBash, pattern: "git * main"},
		{text: "Bash(git:* push)", b: Allow, kind: KindBash, pattern: "git:* push"},
		{text: "Bash(timeout:*)", b: Allow, kind: KindBash, pattern: "timeout *"},
		{text: "Bash(timeout:*)", b: Deny, kind: KindBash, pattern: "timeout *"},
		{text: "Bash(run_in_background:*)", b: Deny, kind: KindParam, pattern: "*"},
		{text: "Bash(dangerouslyDisableSandbox:*)", b: Ask, kind: KindParam, pattern: "*"},
		{text: "Bash(description:*)", b: Deny, kind: KindParam, pattern: "*"},
		{text: "Bash(run_in_background:*)", b: Allow, errLike: "deny/ask only"},
		{text: "Bash(run_in_background:true)", b: Deny, kind: KindParam, pattern: "true"},
		{text: "Bash(run_in_background : true)", b: Ask, kind: KindParam, pattern: "true"},
		{text: "Bash(run_in_background:true)", b: Allow, errLike: "deny/ask only"},
		{text: "Bash(command:rm)", b: Deny, errLike: "ignored by clients"},
		{text: "Read(~/.ssh/**)", b: Deny, kind: KindPath, pattern: ".ssh/**", anchor: AnchorHome},
		{text: "Read(//etc/passwd)", b: Deny, kind: KindPath, pattern: "/etc/passwd", anchor: AnchorRoot},
		{text: "Edit(/src/**)", b: Allow, kind: KindPath, pattern: "src/**", anchor: AnchorFile},
		{text: "Edit(./src/**)", b: Allow, kind: KindPath, pattern: "src/**", anchor: AnchorCwd},
		{text: "Edit(src/**)", b: Allow, kind: KindPath, pattern: "src/**", anchor: AnchorCwd},
		{text: "Edit(src/**)", b: Deny, kind: KindPath, pattern: "src/**", anchor: AnchorAnywhere},
		{text: "Read(.env)", b: Deny, kind: KindPath, pattern: ".env", anchor: AnchorAnywhere},
		{text: "Read(**/.env)", b: Deny, kind: KindPath, pattern: ".env", anchor: AnchorAnywhere},
		{text: "Read(../x)", b: Deny, errLike: "'..'"},
		{text: "Read(~bob/x)", b: Deny, errLike: "~user"},
		// Nothing expands a variable: each would name a directory called $HOME under the cwd.
		{text: "Read($HOME/top.txt)", b: Deny, errLike: `names $HOME, which is not expanded in a path pattern; write ~/… or an absolute path`},
		{text: "Read(${HOME}/**)", b: Deny, errLike: "names ${HOME}, which is not expanded"},
		{text: "Edit(//home/u/$USER_DIR/x)", b: Allow, errLike: "names $USER_DIR,"},
		{text: "Write(./$(pwd)/x)", b: Ask, errLike: "names $(pwd),"},
		{text: "Read(~/$XDG_CONFIG_HOME/**)", b: Deny, errLike: "not expanded"},
		{text: "Read(**/$recycle.bin)", b: Deny, errLike: "not expanded"},
		// Written as something other than a path: each would match nothing.
		{text: `Read("//etc/hostname")`, b: Deny, errLike: "is quoted"},
		{text: `Edit('./x/**')`, b: Deny, errLike: "is quoted"},
		{text: "Read(file:///etc/hostname)", b: Deny, errLike: "is a URL"},
		{text: "Read(//etc/hostname:*)", b: Deny, errLike: "ends in :*"},
		// A $ that starts no variable, or an escaped one, is a name's own.
		{text: `Read(./\$HOME/x)`, b: Deny, kind: KindPath, pattern: `\$HOME/x`, anchor: AnchorCwd},
		{text: "Read(/price$/x$1)", b: Deny, kind: KindPath, pattern: "price$/x$1", anchor: AnchorFile},
		// Bash patterns are words of a command line, where $ is the shell's: not path rules.
		{text: "Bash(echo $HOME)", b: Deny, kind: KindBash, pattern: "echo $HOME"},
		{text: "Read([x)", b: Deny, errLike: "bad glob"},
		{text: "Read(pages:1-5)", b: Ask, kind: KindParam, pattern: "1-5"},
		{text: "WebFetch(domain:Example.COM.)", b: Allow, kind: KindDomain, pattern: "example.com"},
		{text: "WebFetch(domain:*.example.com)", b: Allow, kind: KindDomain, pattern: "*.example.com"},
		{text: "WebFetch(domain:https://x.com/)", b: Allow, errLike: "not a URL"},
		{text: "WebFetch(example.com)", b: Allow, errLike: "domain:<host>"},
		{text: "WebFetch(domain:)", b: Allow, errLike: "empty domain"},
		{text: "WebFetch(domain:*.)", b: Deny, errLike: "write * for every name"},
		{text: "WebFetch(GET *./x)", b: Deny, errLike: "write * for every name"},
		{text: "WebFetch(domain:*)", b: Deny, kind: KindDomain, pattern: "*"},
		{text: "WebFetch(POST paste.example/**)", b: Deny, kind: KindWeb, pattern: "paste.example"},
		{text: "WebFetch(GET  Registry.NPMjs.org./**)", b: Allow, kind: KindWeb, pattern: "registry.npmjs.org"},
		{text: "WebFetch(* *.example.com/api/*/x)", b: Ask, kind: KindWeb, pattern: "*.example.com"},
		{text: "WebFetch(POST git.example/**/git-receive-pack)", b: Deny, kind: KindWeb, pattern: "git.example"},
		{text: "WebFetch(M-SEARCH h.example/)", b: Deny, kind: KindWeb, pattern: "h.example"},
		{text: "WebFetch(post x.com/**)", b: Deny, errLike: "uppercase"},
		{text: "WebFetch(GET x.com)", b: Deny, errLike: "path glob must follow"},
		{text: "WebFetch(GET https://x.com/**)", b: Deny, errLike: "without the scheme"},
		{text: "WebFetch(GET x.com:8080/**)", b: Deny, errLike: "not ports"},
		{text: "WebFetch(GET x.com/a?b=1)", b: Deny, errLike: "query"},
		{text: "WebFetch(GET x.com/a%2Fb)", b: Deny, errLike: "decoded"},
		{text: "WebFetch(GET x.com/[ab])", b: Deny, errLike: "decoded"},
		{text: "WebFetch(GET x.com/a/../b)", b: Deny, errLike: "segments are resolved"},
		{text: "WebFetch(GET x.com/a//b)", b: Deny, errLike: "empty segment"},
		{text: "WebFetch(GET x.com/a b)", b: Deny, errLike: "METHOD host/path-glob"},
		{text: "WebFetch(G@T x.com/a)", b: Deny, errLike: "not an HTTP method"},
		{text: "WebFetch(GET x..com/a)", b: Deny, errLike: "empty label"},
		{text: "WebFetch(*)", b: Deny, errLike: "METHOD host/path-glob"},
		{text: "mcp__github", b: Allow, kind: KindTool, pattern: "mcp__github__*"},
		{text: "mcp__github__*", b: Allow, kind: KindTool, pattern: "mcp__github__*"},
		{text: "mcp__github__get_issue", b: Allow, kind: KindAll},
		{text: "mcp__*", b: Deny, kind: KindTool, pattern: "mcp__*"},
		{text: "mcp__*", b: Allow, errLike: "only after a literal"},
		{text: "*", b: Deny, kind: KindTool, pattern: "*"},
		{text: "*", b: Allow, errLike: "only after a literal"},
		{text: "mcp__db__query(readonly:false)", b: Deny, kind: KindParam, pattern: "false"},
		{text: "mcp__db__query(select 1)", b: Deny, errLike: "takes no content"},
		{text: "Task(foo)", b: Allow, errLike: "takes no content"},
		{text: "", b: Allow, errLike: "empty rule"},
		{text: "Bash()", b: Allow, errLike: "empty parentheses"},
		{text: "Bash(ls", b: Allow, errLike: "must end with ')'"},
		{text: "Bash)", b: Allow, errLike: "unbalanced"},
		{text: "Ba sh", b: Allow, errLike: "tool names"},
		{text: "Bash(ls\n)", b: Allow, errLike: "control character"},
		{text: "Bash(:*)", b: Allow, errLike: "empty prefix"},
		{text: "Read(./secrets/**),Edit(x)", b: Deny, errLike: "two rules run together"},
		{text: "Read(a) Edit(b)", b: Ask, errLike: "two rules run together"},
		{text: "Read(src/(x)/y)", b: Deny, kind: KindPath, pattern: "src/(x)/y", anchor: AnchorAnywhere},
		{text: strings.Repeat("a", 5000), b: Allow, errLike: "longer than"},
	}
	for _, tc := range cases {
		t.Run(string(tc.b)+"/"+tc.text, func(t *testing.T) {
			r, err := ParseRuleFor(tc.text, tc.b)
			if tc.errLike != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errLike) || !errors.Is(err, ErrMalformedRule) {
					t.Fatalf("err = %v, want one containing %q wrapping ErrMalformedRule", err, tc.errLike)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if r.Kind != tc.kind || r.Pattern != tc.pattern || r.Anchor != tc.anchor {
				t.Errorf("got kind=%s pattern=%q anchor=%s, want kind=%s pattern=%q anchor=%s", r.Kind, r.Pattern, r.Anchor, tc.kind, tc.pattern, tc.anchor)
			}
		})
	}
}

// TestLiteralPathRule: the rule suggested for a file is that file's alone and loads, whatever
// its name holds: glob characters, or a $ that would otherwise read as a variable.
func TestLiteralPathRule(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/w/$HOME/x", "/w/${X}", "/w/a[1]*?.txt", `/w/back\slash`, "/w/$(id)"} {
		r, err := ParseRuleFor("Edit(/"+LiteralPath(p)+")", Allow)
		if err != nil {
			t.Errorf("%s: the suggested rule does not load: %v", p, err)
			continue
		}
		if !MatchPath("/"+r.Pattern, p) || MatchPath("/"+r.Pattern, p+"x") {
			t.Errorf("%s: pattern %q does not match that file alone", p, r.Pattern)
		}
	}
}

func TestMatchBash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern string
		cmd     string
		exact   bool
		want    bool
	}{
		{"ls *", "ls", false, true},
		{"ls *", "ls -la", false, true},
		{"ls *", "lsof", false, false},
		{"ls*", "lsof", false, true},
		{"git * main", "git push origin main", false, true},
		{"git * main", "git main", false, false},
		{"* install", "npm install", false, true},
		{"* install", "npm install x", false, false},
		{"make test", "make test", false, true},
		{"make test", "make test x", false, false},
		{"watch *", "watch ls", true, false},
		{"watch ls", "watch ls", true, true},
		{"a.b *", "axb c", false, false}, // regexp metacharacters are literal
	}
	for _, tc := range cases {
		if got := MatchBash(tc.pattern, strings.Fields(tc.cmd), tc.exact); got != tc.want {
			t.Errorf("MatchBash(%q, %q, %v) = %v, want %v", tc.pattern, tc.cmd, tc.exact, got, tc.want)
		}
	}
}

// TestNameForms: each spelling a file system may hold of a name, for the kernel, which
// compares bytes.
func TestNameForms(t *testing.T) {
	t.Parallel()
	if got := NameForms("/w/a.txt"); len(got) != 1 {
		t.Errorf("an ASCII path: %q", got)
	}
	got := NameForms("/w/caf\u00e9/x")
	if len(got) != 2 || got[0] != "/w/caf\u00e9/x" || got[1] != "/w/cafe\u0301/x" {
		t.Errorf("NameForms(NFC) = %q", got)
	}
	if got := NameForms("/w/cafe\u0301"); len(got) != 2 || got[1] != "/w/caf\u00e9" {
		t.Errorf("NameForms(NFD) = %q", got)
	}
}

func TestMatchPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, p string
		want       bool
	}{
		{"/w/src/**", "/w/src/a/b.go", true},
		{"/w/src/**", "/w/src", true},
		// A name and its canonical equivalent are one name: é as one letter (NFC) or as e
		// and a combining accent (NFD, as macOS writes names), in the rule or the path.
		{"/w/caf\u00e9.txt", "/w/cafe\u0301.txt", true},
		{"/w/cafe\u0301.txt", "/w/caf\u00e9.txt", true},
		{"/w/caf\u00e9/**", "/w/cafe\u0301/x", true},
		{"/w/caf*.txt", "/w/cafe\u0301.txt", true},
		{"/w/caf\u00e9.txt", "/w/cafe.txt", false},
		{"/w/src/*", "/w/src/a/b.go", true}, // ancestor /w/src/a matches: gitignore directory semantics
		{"/w/src/*.go", "/w/src/a/b.go", false},
		{"/**/.env", "/x/y/.env", true},
		{"/**/.env", "/x/y/.envrc", false},
		{"/**/secrets", "/w/secrets/k", true},
		{"/home/u/.ssh/**", "/home/u/.ssh/id_rsa", true},
		{"/home/u/.ssh/**", "/home/u/.sshx", false},
		{"/w/a/**/z", "/w/a/b/c/d/z", true},
		{"/w/\\[x\\]/*", "/w/[x]/f", true},
		{"/w/\\$HOME/x", "/w/$HOME/x", true}, // how a rule names a file called $HOME
		{"/w/src/**", "relative/path", false},
		{"/w/src/**", "/w/src/../../etc/passwd", false}, // cleaned before matching
	}
	for _, tc := range cases {
		if got := MatchPath(tc.pattern, tc.p); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", tc.pattern, tc.p, got, tc.want)
		}
	}
}

func TestMatchDomain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, host string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "EXAMPLE.com.", true},
		{"example.com", "api.example.com", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"x.*", "x.com", true},
		{"x.*", "x.evil.com", false},
		{"*", "anything", true},
		{"example.com", "", false},
		// A wildcard after the leading "*.": rest's labels are globs, not a literal suffix.
		{"*.evil*.com", "x.evil1.com", true},
		{"*.evil*.com", "a.b.evil-cdn.com", true},
		{"*.evil*.com", "evil1.com", false},
		{"*.evil*.com", "x.good.com", false},
		{"*.0*", "a.0a", true},
		{"*.*.example.com", "a.b.example.com", true},
		{"*.*.example.com", "b.example.com", false},
		// Addresses by address: a rule naming one is met by its every spelling, and only by it.
		{"10.0.0.1", "::ffff:10.0.0.1", true},
		{"10.0.0.1", "[::ffff:a00:1]", true},
		{"2001:db8::1", "[2001:DB8:0::1]", true},
		{"2001:db8::1", "2001:db8::2", false},
		{"*", "::1", false},
		{"*", "10.0.0.1", false},
	}
	for _, tc := range cases {
		if got := MatchDomain(tc.pattern, tc.host); got != tc.want {
			t.Errorf("MatchDomain(%q, %q) = %v, want %v", tc.pattern, tc.host, got, tc.want)
		}
	}
}

// TestDomainPattern: the domain part of a rule, and the config's domain lists, normalized as
// MatchDomain expects, and refused when no host could match them.
func TestDomainPattern(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Example.COM.":     "example.com",
		"*.Npmjs.ORG":      "*.npmjs.org",
		"*":                "*",
		"api-*.x.com":      "api-*.x.com",
		"192.0.2.1":        "192.0.2.1",
		"[2001:DB8::1]":    "2001:db8::1",
		"2001:db8:0::1":    "2001:db8::1",
		"::ffff:10.0.0.1":  "10.0.0.1",
		"[::1":             "",
		"fe80::1%eth0":     "",
		"[10.0.0.1]":       "",
		"192.0.2.*":        "",
		"*.0.0.8":          "",
		"010.0.0.2":        "",
		"10.3":             "",
		"0xa.0.0.4":        "",
		"167772169":        "",
		"::a00:5":          "",
		"64:ff9b::a00:6":   "",
		"[2002:a00:1::]":   "",
		"123.example":      "123.example",
		"x.*":              "x.*",
		"::1":              "::1",
		"exa mple.com":     "",
		" example.com":     "",
		"*.":               "",
		"http://x":         "",
		"example.com:1":    "",
		"x.com/a":          "",
		"":                 "",
		".":                "",
		"a..b":             "",
		"ex\u00e4mple.com": "",
	} {
		got, err := DomainPattern(in)
		if want == "" && (err == nil || !errors.Is(err, ErrMalformedRule)) || want != "" && (err != nil || got != want) {
			t.Errorf("DomainPattern(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestMatchWeb(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rule         string
		method, host string
		path         string
		fold, want   bool
	}{
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/org/r.git/git-receive-pack", false, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/git-receive-pack", false, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r.git/git-upload-pack", false, false},
		{"WebFetch(POST git.example/**/git-receive-pack)", "GET", "git.example", "/r.git/git-receive-pack", false, false},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r/a/../git-receive-pack", false, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r/git-receive-pack/", false, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "post", "git.example", "/r/git-receive-pack", false, false},
		{"WebFetch(POST git.example/**/git-receive-pack)", "post", "git.example", "/r/git-receive-pack", true, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r/Git-Receive-Pack", true, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r/Git-Receive-Pack", false, false},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r/git-receive-pack;a=b", true, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "git.example", "/r/git-receive-pack;a=b", false, false},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "GIT.example.", "/git-receive-pack", false, true},
		{"WebFetch(POST git.example/**/git-receive-pack)", "POST", "sub.git.example", "/git-receive-pack", false, false},
		{"WebFetch(GET x.com/api/*)", "GET", "x.com", "/api/v1", false, true},
		{"WebFetch(GET x.com/api/*)", "GET", "x.com", "/api/v1/users", false, false}, // no ancestor match
		{"WebFetch(GET x.com/api/*)", "GET", "x.com", "/api", false, false},
		{"WebFetch(GET x.com/api/**)", "GET", "x.com", "/api", false, true},
		{"WebFetch(GET x.com/api/v*.json)", "GET", "x.com", "/api/v2.json", false, true},
		{"WebFetch(* *.x.com/**)", "DELETE", "a.b.x.com", "/", false, true},
		{"WebFetch(* *.x.com/**)", "DELETE", "x.com", "/", false, false},
		{"WebFetch(GET x.com/)", "GET", "x.com", "/", false, true},
		{"WebFetch(GET x.com/)", "GET", "x.com", "/a", false, false},
		{"WebFetch(GET x.com/**)", "", "x.com", "/", false, false}, // no method: a tunnel never matches
	}
	for _, tc := range cases {
		r, err := ParseRule(tc.rule)
		if err != nil {
			t.Fatal(err)
		}
		req := WebRequest{Method: tc.method, Host: tc.host, Path: tc.path}
		if got := MatchWeb(r.Pattern, r.Method, r.URLPath, req, tc.fold); got != tc.want {
			t.Errorf("%s vs %s %s%s (fold %v) = %v, want %v", tc.rule, tc.method, tc.host, tc.path, tc.fold, got, tc.want)
		}
	}
}

// TestMatchWebPathReadings: a path is matched as every server that may act on it reads it.
// A deny or ask rule (fold) matches when any reading is under it, so `..;`, `;params`, a
// second decoding and backslashes do not get past it; an allow matches only when every
// reading is under it, so none of them widens it.
func TestMatchWebPathReadings(t *testing.T) {
	t.Parallel()
	deny, err := ParseRuleFor("WebFetch(POST h.test/admin/**)", Deny)
	if err != nil {
		t.Fatal(err)
	}
	allow, err := ParseRuleFor("WebFetch(GET h.test/public/**)", Allow)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rule Rule
		path string // decoded, as URL.Path gives it
		want bool
	}{
		{"deny plain", deny, "/admin/users", true},
		{"deny params dropped, then dot segments", deny, "/x/..;/admin/users", true},
		{"deny params with a value", deny, "/x/..;a=b/admin", true},
		{"deny params on the named segment", deny, "/admin;x/users", true},
		{"deny params in a deeper segment", deny, "/x/y/..;/..;/admin", true},
		{"deny cleaning first would lose it", deny, "/a/..;/../admin/users", true},
		{"deny decoded again", deny, "/x/%2e%2e/admin", true},
		{"deny decoded again, uppercase escapes", deny, "/x/%2E%2E/ADMIN", true},
		{"deny decoded again, then params", deny, "/x/%2e%2e%3b/admin", true},
		{"deny decoded again despite a bad escape", deny, "/x/%2e%2e/admin/%zz", true},
		{"deny decoded slash", deny, "/x%2f..%2fadmin", true},
		{"deny backslashes", deny, `\admin\users`, true},
		{"deny backslash dot segments", deny, `/x\..\admin`, true},
		{"deny case folded", deny, "/x/..;/ADMIN/users", true},
		{"deny dotless i, which a folding server reads as i", deny, "/adm\u0131n/users", true},
		{"deny dotted capital I", deny, "/ADM\u0130N/users", true},
		{"deny dotless i decoded again", deny, "/adm%c4%b1n/users", true},
		{"deny relative", deny, "admin", true},
		{"deny not another path", deny, "/public/a", false},
		{"deny not a look-alike", deny, "/adminx/..;/users", false},
		{"deny not when the params hide nothing", deny, "/x/..;/public", false},
		{"deny not a semicolon name", deny, "/admin-x;/users", false},
		{"deny dot segments without merging slashes", deny, "/admin//../users", true},
		{"deny dot segments without merging slashes, after a dot", deny, "/admin/.//../users", true},
		{"deny dot segments without merging slashes, leading", deny, "//admin//../users", true},
		{"deny dot segments without merging slashes, deeper", deny, "/admin/a///../../users", true},
		{"deny dot segments without merging slashes, after params", deny, "/admin;x//../users", true},
		{"deny dot segments without merging slashes, decoded again", deny, "/admin%2f%2f%2e%2e/users", true},
		{"deny not where no server reads it under", deny, "/public//../x", false},
		{"deny cut at a NUL", deny, "/admin\x00/x", true},
		{"deny cut at a NUL, the rule's segment itself", deny, "/admin\x00.txt", true},
		{"deny trailing dot", deny, "/admin./users", true},
		{"deny trailing spaces and dots", deny, "/admin . /users", true},
		{"deny fullwidth slash", deny, "/x/..\uff0fadmin/users", true},
		{"deny fullwidth slash decoded again", deny, "/x/..%ef%bc%8fadmin", true},
		{"deny not a dotted name", deny, "/admin.old/users", false},
		{"deny small reverse solidus", deny, "/x/..\ufe68admin", true},
		{"deny two-dot leader", deny, "/x/\u2025/admin", true},
		{"deny fullwidth dots", deny, "/x/\uff0e\uff0e/admin", true},
		{"deny fullwidth letter", deny, "/\uff41dmin/users", true},
		{"deny ideographic space", deny, "/admin\u3000/users", true},
		{"deny overlong slash", deny, "/x/..\xc0\xafadmin", true},
		{"deny overlong slash, three bytes", deny, "/x/..\xe0\x80\xafadmin", true},
		{"deny NTFS stream", deny, "/admin::$INDEX_ALLOCATION/users", true},
		{"deny dot-dot and a space", deny, "/x/.. /admin", true},
		{"deny trailing tab", deny, "/admin\t/users", true},
		{"deny leading space", deny, "/ admin/users", true},
		{"deny leading tab", deny, "/\tadmin/users", true},
		{"deny trailing controls", deny, "/admin\v\f\r\x1f/users", true},
		{"deny a tab before the dot", deny, "/admin\t./users", true},
		{"deny dot-dot with a leading tab", deny, "/x/\t../admin", true},
		{"deny not a tab inside", deny, "/ad\tmin/users", false},
		{"allow plain", allow, "/public/a/b", true},
		{"allow the root", allow, "/public", true},
		{"allow params inside", allow, "/public/a;v=1", true},
		{"allow dot segments inside", allow, "/public/a/../b", true},
		{"allow params then dot segments inside", allow, "/public/a;v=1/../b", true},
		{"allow a percent that decodes to nothing", allow, "/public/100%", true},
		{"allow not params dot segments", allow, "/public/..;/admin/secret", false},
		{"allow not params dot segments, deeper", allow, "/public/a/..;/..;/admin", false},
		{"allow not cleaning first", allow, "/public/..;/../public/../admin", false},
		{"allow not decoded again", allow, "/public/%2e%2e/admin", false},
		{"allow not decoded again despite a bad escape", allow, "/public/%2e%2e/admin/%zz", false},
		{"allow not decoded slash", allow, "/public/..%2f..%2fadmin", false},
		{"allow not backslash", allow, `/public/..\admin`, false},
		{"allow not backslash only", allow, `/public\..\admin`, false},
		{"allow not dot segments", allow, "/public/../admin", false},
		{"allow not case folded", allow, "/Public/a", false},
		{"allow empty segments inside", allow, "/public//a", true},
		{"allow dot segments over an empty segment inside", allow, "/public/a//../b", true},
		{"allow not dot segments merging slashes", allow, "/x//../public/a", false},
		{"allow not dot segments without merging slashes", allow, "/public//../../admin", false},
		{"allow not a NUL's cut", allow, "/public/../admin\x00/../public", false},
		{"allow a trailing dot inside", allow, "/public/a./b", true},
		{"allow not a fullwidth slash out", allow, "/public/..\uff0f..\uff0fadmin", false},
		{"allow not dot-dot and a tab", allow, "/public/..\t/admin", false},
		{"allow not dot-dot after a space", allow, "/public/ ../admin", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rule
			req := WebRequest{Method: r.Method, Host: "h.test", Path: tc.path}
			if got := MatchWeb(r.Pattern, r.Method, r.URLPath, req, r.Behavior != Allow); got != tc.want {
				t.Errorf("%s vs %s %q = %v, want %v (readings %q)", r, r.Method, tc.path, got, tc.want, webPathReadings(tc.path, nil))
			}
		})
	}
}

// TestWebPathReadings pins the readings themselves: one for a path with nothing to read
// differently, each dot-segment-free, none twice.
func TestWebPathReadings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/a/b/", []string{"/a/b"}},
		{"", []string{"/"}},
		{"/a/./b/../c", []string{"/a/c"}},
		{"/x/..;/admin", []string{"/x/..;/admin", "/admin"}},
		{"/a/..;/../b", []string{"/a/b", "/b"}},
		{"/x/%2e%2e/admin", []string{"/x/%2e%2e/admin", "/admin"}},
		{"/x/%2e%2e;a/admin", []string{"/x/%2e%2e;a/admin", "/x/%2e%2e/admin", "/admin"}},
		{"/x/%zz/%2e%2e/y", []string{"/x/%zz/%2e%2e/y", "/x/y"}},
		{`/x\..\y`, []string{`/x\..\y`, "/y"}},
		{"/a;v=1", []string{"/a;v=1", "/a"}},
		{"/%41", []string{"/%41", "/A"}},
		{"/a//b", []string{"/a/b"}},
		{"/secret//../x", []string{"/x", "/secret/x"}},
		{"/secret/.//../x", []string{"/x", "/secret/x"}},
		{"//secret//../x", []string{"/x", "/secret/x"}},
		{"/a/;x/../b", []string{"/a/b", "/b"}},
		{"/a/;x//../b", []string{"/a/b", "/a/;x/b", "/b"}},
		{"/secret\x00/a", []string{"/secret\x00/a", "/secret"}},
		{"/secret./a", []string{"/secret./a", "/secret/a"}},
		{"/\tsecret\x0b/a", []string{"/\tsecret\x0b/a", "/secret/a"}},
		{"/a/../b", []string{"/b"}},
		{"/a/.../b", []string{"/a/.../b"}},
	} {
		if got := webPathReadings(tc.path, nil); !slices.Equal(got, tc.want) {
			t.Errorf("webPathReadings(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestAbsPattern(t *testing.T) {
	t.Parallel()
	a := Anchors{Home: "/home/u", Cwd: "/w/sub"}
	mk := func(text string, b Behavior, src Source, root string) Rule {
		r, err := ParseRuleFor(text, b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source, r.Root = src, root
		return r
	}
	cases := []struct {
		r    Rule
		want string
		ok   bool
	}{
		{mk("Read(//etc/**)", Deny, SourceProject, "/w"), "/etc/**", true},
		{mk("Read(~/x)", Deny, SourceProject, "/w"), "/home/u/x", true},
		{mk("Read(/x)", Deny, SourceProject, "/w"), "/w/x", true},
		{mk("Read(/x)", Deny, SourceCLI, "/ignored"), "/w/sub/x", true},
		{mk("Read(./x)", Deny, SourceProject, "/w"), "/w/sub/x", true},
		{mk("Read(x)", Deny, SourceProject, "/w"), "/**/x", true},
		{mk("Read(/x)", Deny, SourceProject, ""), "", false},
	}
	for _, tc := range cases {
		got, ok := tc.r.AbsPattern(a)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s from %s: got %q,%v want %q,%v", tc.r, tc.r.Source, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPathRuleEmptyAndDotSegments: `.` and empty segments in a path rule name the directory
// they are in, as in a path, so a rule spelled with them matches what the clean spelling does;
// `//` alone is the whole filesystem. Once they made a deny that matched nothing.
func TestPathRuleEmptyAndDotSegments(t *testing.T) {
	t.Parallel()
	a := Anchors{Home: "/home/u", Cwd: "/home/u/proj"}
	for _, tc := range []struct {
		rule string
		b    Behavior
		path string
	}{
		{"Read(sub//.env)", Deny, "/home/u/proj/sub/.env"},
		{"Read(sub/./.env)", Deny, "/x/sub/.env"},
		{"Read(**//.env)", Deny, "/a/b/.env"},
		{"Edit(./sub//x)", Deny, "/home/u/proj/sub/x"},
		{"Edit(sub/./x)", Allow, "/home/u/proj/sub/x"},
		{"Edit(./././sub/x)", Deny, "/home/u/proj/sub/x"},
		{"Edit(~/./proj/sub/x)", Deny, "/home/u/proj/sub/x"},
		{"Edit(/sub//x)", Deny, "/home/u/proj/sub/x"},
		{"Edit(//home/u/proj/./Makefile)", Deny, "/home/u/proj/Makefile"},
		{"Read(//)", Deny, "/etc/hostname"},
		{"Read(///)", Deny, "/etc/hostname"},
		{"Read(//etc//)", Deny, "/etc/hostname"},
		{`Read(sub/\./.env)`, Deny, "/home/u/proj/sub/.env"},
		{"Read(sub/[.]/.env)", Deny, "/home/u/proj/sub/.env"},
		{`Read(\./sub/.env)`, Deny, "/home/u/proj/sub/.env"},
		{"Read(~/proj/sub/[.]/.env)", Deny, "/home/u/proj/sub/.env"},
		{`Read(//home/u/proj/sub/\./.env)`, Deny, "/home/u/proj/sub/.env"},
	} {
		r, err := ParseRuleFor(tc.rule, tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		r.Source = SourceCLI
		abs, ok := r.AbsPattern(a)
		if !ok || !MatchPath(abs, tc.path) {
			t.Errorf("%s (%q) does not match %s", tc.rule, abs, tc.path)
		}
		if again, err := ParseRuleFor(r.String(), tc.b); err != nil || again.Pattern != r.Pattern || again.Anchor != r.Anchor {
			t.Errorf("%s renders as %s, which parses to %+v (%v)", tc.rule, r.String(), again, err)
		}
	}
	for _, text := range []string{"Read(sub/[.a]/x)", `Read(sub/\.\./x)`, "Read(sub/[.][.]/x)", "Read(sub/.[.]/x)"} {
		if r, err := ParseRuleFor(text, Deny); err == nil {
			t.Errorf("%s parsed to %q; want it refused (a segment that is or may be . or ..)", text, r.Pattern)
		}
	}
	for _, text := range []string{"Read(.)", "Read(./.)", "Read(**/)", "Read(**/.)"} {
		r, err := ParseRuleFor(text, Allow)
		if err == nil && r.Anchor == AnchorAnywhere {
			t.Errorf("%s parsed to a rule matching at any depth with pattern %q; want it refused", text, r.Pattern)
		}
	}
}

// FuzzParseRule: never panic; an accepted rule renders back to text that parses to the same
// rule (so `sbctl policy show` output can be pasted back), and bash patterns compile.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"Bash", "Bash(npm run test:*)", "Read(~/.ssh/**)", "Edit(/src/**)", "WebFetch(domain:*.x.com)",
		"mcp__srv__*", "Bash(run_in_background:true)", "Read(.env)", "Bash(git * main)", "*", "Read([a-)", "Bash(()", "Edit(//)",
		"WebFetch(POST git.example/**/git-receive-pack)", "WebFetch(GET *.x.com/a/*/b)", "WebFetch(* x/)", "WebFetch(get x/a)", "WebFetch(GET x:1/a)"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, text string, bsel uint8) {
		b := []Behavior{Allow, Deny, Ask}[int(bsel)%3]
		r, err := ParseRuleFor(text, b)
		if err != nil {
			if !errors.Is(err, ErrMalformedRule) {
				t.Fatalf("error %v does not wrap ErrMalformedRule", err)
			}
			return
		}
		if r.Tool == "" {
			t.Fatalf("accepted rule %q without tool", text)
		}
		if r.Kind == "" {
			t.Fatalf("accepted rule %q without kind", text)
		}
		if r.Kind != KindAll && r.Pattern == "" && r.Kind != KindPath {
			t.Fatalf("accepted rule %q (%s) with empty pattern", text, r.Kind)
		}
		r2, err := ParseRuleFor(r.String(), b)
		if err != nil {
			t.Fatalf("rendered %q of %q does not parse: %v", r.String(), text, err)
		}
		if r2.Kind != r.Kind || r2.Pattern != r.Pattern || r2.Tool != r.Tool || r2.Method != r.Method || r2.URLPath != r.URLPath {
			t.Fatalf("round trip of %q changed the rule: %+v vs %+v", text, r, r2)
		}
		if r.Kind == KindBash {
			// The literal-prefix shortcut must never change classifier.MatchRule's answer.
			for _, ws := range [][]string{{"a", "b"}, strings.Fields(strings.ReplaceAll(r.Pattern, "*", "x")), strings.Fields(strings.ReplaceAll(r.Pattern, " *", ""))} {
				if len(ws) == 0 {
					continue
				}
				if got, want := MatchBash(r.Pattern, ws, false), classifier.MatchRule(r.Pattern, ws); got != want {
					t.Fatalf("MatchBash(%q, %q) = %v, classifier.MatchRule = %v", r.Pattern, ws, got, want)
				}
			}
		}
		if r.Kind == KindPath {
			if slices.ContainsFunc(strings.Split(strings.TrimPrefix(r.Pattern, "/"), "/"), func(s string) bool { return s == "." }) ||
				strings.Contains(r.Pattern, "//") {
				t.Fatalf("rule %q kept a `.` or empty segment: %q", text, r.Pattern)
			}
			if abs, ok := r.AbsPattern(Anchors{Home: "/h", Cwd: "/c"}); ok {
				MatchPath(abs, "/c/a/b")
			}
		}
		if r.Kind == KindParam || r.Kind == KindTool {
			// The pattern with each * standing for some text, or none, is a value it covers.
			for _, v := range []string{strings.ReplaceAll(r.Pattern, "*", ""), strings.ReplaceAll(r.Pattern, "*", "*x\n")} {
				if !MatchGlob(r.Pattern, v) {
					t.Fatalf("MatchGlob(%q, %q) = false", r.Pattern, v)
				}
			}
		}
		if r.Kind == KindWeb {
			if r.Method == "" || !strings.HasPrefix(r.URLPath, "/") {
				t.Fatalf("accepted web rule %q without method or path: %+v", text, r)
			}
			// The rule's own path, with its wildcards taken literally, is a request it covers.
			host := strings.ReplaceAll(r.Pattern, "*", "a")
			req := WebRequest{Method: strings.ReplaceAll(r.Method, "*", "GET"), Host: host, Path: strings.ReplaceAll(r.URLPath, "**", "x")}
			// A deny or ask covers it; an allow too, unless servers read the path more than one
			// way (`/x.` is /x to some), where an allow covers only what every reading matches.
			single := len(webPathReadings(req.Path, nil)) == 1
			if single && !MatchWeb(r.Pattern, r.Method, r.URLPath, req, false) || !MatchWeb(r.Pattern, r.Method, r.URLPath, req, true) {
				t.Fatalf("web rule %q does not match %+v", text, req)
			}
		}
	})
}

// FuzzMatchWeb checks MatchWeb against the readings of a path worked out here on their own
// (url.PathUnescape for the second decoding, net/url's resolver for dot segments removed
// without merging slashes): an allow rule matches exactly when every
// reading is under it, a deny rule when any one is (folded), and a deny matches whatever the
// same allow matches. It must never panic.
func FuzzMatchWeb(f *testing.F) {
	for _, s := range [][2]string{
		{"/admin/**", "/x/..;/admin/users"}, {"/public/**", "/public/..;/admin"}, {"/public/**", "/public/%2e%2e/admin"},
		{"/public/**", `/public\..\admin`}, {"/a/*/b", "/a/..;x/b"}, {"/**/git-receive-pack", "/r/git-receive-pack;a=b"},
		{"/public/**", "/public/a;v=1"}, {"/x", "/a/..;/../x"}, {"/x/**", "/x/%zz/%2e%2e/y"}, {"/", ""},
		{"/secret/**", "/secret//../x"}, {"/secret/**", "//secret/.//../x"}, {"/public/**", "/x//../public/a"},
		{"/a/*", "/a/;x//../b"}, {"/a/b", "/a//b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, p string) {
		allow, err := ParseRuleFor("WebFetch(GET h.test"+glob+")", Allow)
		if err != nil || allow.Kind != KindWeb || allow.Pattern != "h.test" {
			return
		}
		segs := func(r string) []string { return splitPath(path.Clean("/" + r)) }
		// As RFC 3986 removes dot segments (net/url's resolver), no slashes merged first; the
		// empty segments left are folded, as in the Clean reading.
		root := &url.URL{Path: "/"}
		rfcSegs := func(r string) []string {
			return slices.DeleteFunc(splitPath(root.ResolveReference(&url.URL{Path: "/" + r}).Path), func(s string) bool { return s == "" })
		}
		params := func(r string) string {
			parts := strings.Split(r, "/")
			for i := range parts {
				parts[i], _, _ = strings.Cut(parts[i], ";")
			}
			return strings.Join(parts, "/")
		}
		readings := [][]string{segs(p), segs(params(p)), rfcSegs(p), rfcSegs(params(p))}
		decoded, derr := url.PathUnescape(p)
		if derr == nil {
			r := params(strings.ReplaceAll(decoded, `\`, "/"))
			readings = append(readings, segs(r), rfcSegs(r))
			if lenientlyRead(r) {
				l := lenientReading(r)
				readings = append(readings, segs(l), rfcSegs(l))
			}
		}
		pat := splitPath(allow.URLPath)
		every, any := true, false
		for _, r := range readings {
			ok := matchWhole(pat, r)
			every, any = every && ok, any || ok
		}
		req := WebRequest{Method: "GET", Host: "h.test", Path: p}
		got := MatchWeb(allow.Pattern, allow.Method, allow.URLPath, req, false)
		if got && !every {
			t.Fatalf("allow %s matches %q, which a server may read outside it", allow, p)
		}
		if derr == nil && got != every {
			t.Fatalf("allow %s vs %q = %v, every reading under it = %v", allow, p, got, every)
		}
		folded := MatchWeb(allow.Pattern, allow.Method, allow.URLPath, req, true)
		if utf8.ValidString(glob) && utf8.ValidString(p) && got && !folded {
			t.Fatalf("%q is under allow %s but not under the deny of the same text", p, allow)
		}
		lower := splitPath(strings.ToLower(allow.URLPath))
		foldedAny := false
		for _, r := range readings {
			foldedAny = foldedAny || matchWhole(lower, segs(strings.ToLower(strings.Join(r, "/"))))
		}
		if foldedAny && !folded {
			t.Fatalf("deny %s misses %q, which a server may read under it", allow, p)
		}
		if derr == nil && utf8.ValidString(p) && folded != foldedAny {
			t.Fatalf("deny %s vs %q = %v, any reading under it = %v", allow, p, folded, foldedAny)
		}
	})
}

// matchSegments decides each (pattern, path) position once; it must agree with the plain
// recursive definition of ** on every small pattern and path, whole or as an ancestor.
func TestMatchSegmentsAgainstDefinition(t *testing.T) {
	var def func(pat, segs []string, whole bool) bool
	def = func(pat, segs []string, whole bool) bool {
		switch {
		case len(pat) == 0:
			return !whole || len(segs) == 0
		case pat[0] == "**":
			return def(pat[1:], segs, whole) || len(segs) > 0 && def(pat, segs[1:], whole)
		default:
			ok, _ := path.Match(pat[0], firstOr(segs))
			return len(segs) > 0 && ok && def(pat[1:], segs[1:], whole)
		}
	}
	all := func(alphabet []string, max int) [][]string {
		out := [][]string{nil}
		for prev := [][]string{nil}; max > 0; max-- {
			var next [][]string
			for _, x := range prev {
				for _, c := range alphabet {
					next = append(next, append(slices.Clone(x), c))
				}
			}
			out, prev = append(out, next...), next
		}
		return out
	}
	paths := all([]string{"a", "b"}, 5)
	for _, pat := range all([]string{"a", "*", "**"}, 4) {
		for _, segs := range paths {
			for _, whole := range []bool{false, true} {
				if got, want := matchSegments(pat, segs, whole), def(pat, segs, whole); got != want {
					t.Fatalf("matchSegments(%q, %q, whole %v) = %v, want %v", pat, segs, whole, got, want)
				}
			}
		}
	}
	// The shape that once took 95 s: a thousand ** against a path two thousand deep.
	deep := "/" + strings.Repeat("a/", 2000)
	stars := "/" + strings.Repeat("**/", 1000) + "x"
	if MatchPath(stars, deep+"y") || !MatchPath(stars, deep+"x") || !MatchPath(stars, deep+"x/under") {
		t.Error("many ** against a deep path: wrong answer")
	}
	spread := "/" + strings.Repeat("**/a/", 300) + "x"
	if MatchPath(spread, deep+"y") || !MatchPath(spread, deep+"x") {
		t.Error("** between segments against a deep path: wrong answer")
	}
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
