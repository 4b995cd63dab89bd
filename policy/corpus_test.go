package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
)

// call is one corpus case: the facts of a call, the rules, and the expected outcome written as
// "allow", "deny" or "ask:<route>".
type call struct {
	name   string
	mode   permission.Mode
	tool   string
	cmd    string
	bash   *classifier.Classification
	paths  []permission.PathFact
	domain string
	http   *permission.HTTPFact // a WebFetch request's method and path; nil: a tunnel
	input  map[string]any
	hook   *permission.HookVerdict
	ro     bool // the tool's own read-only claim
	rui    bool // requires user interaction
	dirs   []string
	src    permission.Source
	allow  []string
	deny   []string
	ask    []string
	eff    *permission.Effective
	want   string
	step   string // optional: expected deciding step
	rule   string // optional: expected rule text
}

func rd(p string) permission.PathFact {
	return permission.PathFact{Requested: p, Resolved: p, Access: permission.Read}
}
func wr(p string) permission.PathFact {
	return permission.PathFact{Requested: p, Resolved: p, Access: permission.Write}
}

// redir is a Bash redirect's target, as the Bash tool reports it.
func redir(p string) permission.PathFact {
	f := wr(p)
	f.Redirect = true
	return f
}
func link(req, res string, a permission.Access) permission.PathFact {
	return permission.PathFact{Requested: req, Resolved: res, Access: a}
}

func (c call) facts() *permission.Facts {
	in := c.input
	if in == nil {
		in = map[string]any{}
		if c.cmd != "" {
			in["command"] = c.cmd
		}
	}
	tool := c.tool
	if tool == "" {
		tool = "Bash"
	}
	mode := c.mode
	if mode == "" {
		mode = permission.ModeDefault
	}
	return &permission.Facts{
		Tool: tool, Input: in, Mode: mode, Cwd: "/w", Home: "/home/u", Dirs: c.dirs,
		Caller: permission.Caller{UID: 1000, GID: 1000, User: "u"}, ReadOnly: c.ro,
		ToolFacts: permission.ToolFacts{Paths: c.paths, Bash: c.bash, Domain: c.domain, HTTP: c.http},
		Hook:      c.hook, RequiresUserInteraction: c.rui,
	}
}

func (c call) ruleSet(t testing.TB) *permission.RuleSet {
	src := c.src
	if src == "" {
		src = permission.SourceProject
	}
	rs := ruleSet(t, src, c.allow, c.deny, c.ask)
	if c.eff != nil {
		rs = permission.NewRuleSet(rs.Rules(), *c.eff, permission.Anchors{Home: "/home/u", Cwd: "/w"})
	}
	return rs
}

func outcome(d permission.Decision) string {
	if d.Behavior == permission.Ask {
		return "ask:" + d.Route
	}
	return string(d.Behavior)
}

// modeOrder is the column order of matrix rows.
var modeOrder = []permission.Mode{
	permission.ModeDefault, permission.ModeAcceptEdits, permission.ModePlan, permission.ModeDontAsk,
	permission.ModeBypassPermissions, permission.ModeAuto, permission.ModeBubble,
}

// matrix expands one scenario over the seven modes; want lists outcomes in modeOrder.
func matrix(base call, want ...string) []call {
	if len(want) != len(modeOrder) {
		panic("matrix " + base.name + ": need one outcome per mode")
	}
	out := make([]call, len(modeOrder))
	for i, m := range modeOrder {
		c := base
		c.name = fmt.Sprintf("%s/%s", base.name, m)
		c.mode = m
		c.want = want[i]
		out[i] = c
	}
	return out
}

const (
	A  = "allow"
	D  = "deny"
	AU = "ask:user"
	AC = "ask:classifier"
	AP = "ask:parent"
)

func corpus() []call {
	var cs []call
	add := func(x ...call) { cs = append(cs, x...) }
	//             default acceptEdits plan dontAsk bypass auto bubble
	add(matrix(call{name: "ls read-only", cmd: "ls -la", bash: bash(sub(true, "ls", "-la"))}, A, A, A, A, A, A, A)...)
	add(matrix(call{name: "npm install", cmd: "npm install", bash: bash(sub(false, "npm", "install"))}, AU, AU, D, D, A, AC, AP)...)
	add(matrix(call{name: "edit inside", tool: "Edit", paths: []permission.PathFact{wr("/w/src/a.go")}}, AU, A, D, D, A, AC, AP)...)
	add(matrix(call{name: "edit outside", tool: "Edit", paths: []permission.PathFact{wr("/etc/hosts")}}, AU, AU, D, D, A, AC, AP)...)
	add(matrix(call{name: "edit extra dir", tool: "Write", dirs: []string{"/data"}, paths: []permission.PathFact{wr("/data/x.txt")}}, AU, A, D, D, A, AC, AP)...)
	add(matrix(call{name: "read inside", tool: "Read", ro: true, paths: []permission.PathFact{rd("/w/README.md")}}, A, A, A, A, A, A, A)...)
	add(matrix(call{name: "read outside", tool: "Read", ro: true, paths: []permission.PathFact{rd("/etc/passwd")}}, AU, AU, AU, D, A, AC, AP)...)
	add(matrix(call{name: "read dev zero", tool: "Read", ro: true, paths: []permission.PathFact{rd("/dev/zero")}, allow: []string{"Read"}}, D, D, D, D, D, D, D)...)
	add(matrix(call{name: "deny rule rm", cmd: "rm -rf build", bash: bash(sub(false, "rm", "-rf", "build")), deny: []string{"Bash(rm *)"}, allow: []string{"Bash"}}, D, D, D, D, D, D, D)...)
	add(matrix(call{name: "ask rule push", cmd: "git push origin main", bash: bash(sub(false, "git", "push", "origin", "main")), ask: []string{"Bash(git push *)"}, allow: []string{"Bash(git *)"}}, AU, AU, D, D, D, AU, AP)...)
	add(matrix(call{name: "allow rule npm test", cmd: "npm run test --watch", bash: bash(sub(false, "npm", "run", "test", "--watch")), allow: []string{"Bash(npm run test:*)"}}, A, A, D, A, A, A, A)...)
	add(matrix(call{name: "protected git config", tool: "Edit", paths: []permission.PathFact{wr("/w/.git/config")}, allow: []string{"Edit(//w/**)"}}, AU, AU, D, D, D, AC, AP)...)
	add(matrix(call{name: "critical rm root", cmd: "rm -rf /", bash: bash(sub(false, "rm", "-rf", "/")), allow: []string{"Bash"}}, AU, AU, D, D, D, AU, AP)...)
	add(matrix(call{name: "parse error", cmd: `echo "x`, bash: parseErr(), allow: []string{"Bash"}}, AU, AU, D, D, D, AU, AP)...)
	add(matrix(call{name: "hook deny", cmd: "ls", bash: bash(sub(true, "ls")), hook: &permission.HookVerdict{Decision: "deny", Reason: "no"}}, D, D, D, D, D, D, D)...)
	add(matrix(call{name: "hook allow", cmd: "npm install", bash: bash(sub(false, "npm", "install")), hook: &permission.HookVerdict{Decision: "allow"}}, A, A, D, A, A, A, A)...)
	// WebFetch writes nothing here, so plan mode leaves it to the rules and a person, as the others.
	add(matrix(call{name: "webfetch no rule", tool: "WebFetch", domain: "example.com", input: map[string]any{"url": "https://example.com/"}}, AU, AU, AU, D, A, AC, AP)...)
	add(matrix(call{name: "webfetch allowed", tool: "WebFetch", domain: "example.com", allow: []string{"WebFetch(domain:example.com)"}}, A, A, A, A, A, A, A)...)
	add(matrix(call{name: "webfetch denied", tool: "WebFetch", domain: "example.com", deny: []string{"WebFetch(domain:example.com)"}, allow: []string{"WebFetch"}}, D, D, D, D, D, D, D)...)
	add(matrix(call{name: "mcp server allow", tool: "mcp__github__create_issue", allow: []string{"mcp__github"}}, A, A, D, A, A, A, A)...)
	add(matrix(call{name: "mcp deny glob", tool: "mcp__github__create_issue", deny: []string{"mcp__*"}, allow: []string{"mcp__github"}}, D, D, D, D, D, D, D)...)
	add(matrix(call{name: "ask user question", tool: "AskUserQuestion", ro: true}, AU, AU, AU, D, D, AU, AP)...)
	add(matrix(call{name: "bypass disabled", cmd: "npm install", bash: bash(sub(false, "npm", "install")), eff: &permission.Effective{DisableBypass: true, DisableAuto: true}}, AU, AU, D, D, AU, AU, AP)...)

	// Bash syntax (COMPAT 1), default mode.
	add(
		call{name: "compound one sub unallowed", cmd: "git status && rm -rf x", bash: bash(sub(true, "git", "status"), sub(false, "rm", "-rf", "x")), allow: []string{"Bash(git *)"}, want: AU, step: "mode"},
		call{name: "compound all allowed", cmd: "git add . && git commit -m x", bash: bash(sub(false, "git", "add", "."), sub(false, "git", "commit", "-m", "x")), allow: []string{"Bash(git *)"}, want: A, step: "allow_rule"},
		call{name: "compound read-only part passes", cmd: "npm test | grep ok", bash: bash(sub(false, "npm", "test"), sub(true, "grep", "ok")), allow: []string{"Bash(npm test)"}, want: A},
		call{name: "compound one denied denies all", cmd: "ls && rm -rf x", bash: bash(sub(true, "ls"), sub(false, "rm", "-rf", "x")), allow: []string{"Bash"}, deny: []string{"Bash(rm *)"}, want: D, rule: "Bash(rm *)"},
		call{name: "word boundary ls * misses lsof", cmd: "lsof", bash: bash(sub(false, "lsof")), allow: []string{"Bash(ls *)"}, want: AU},
		call{name: "word boundary ls * hits bare ls", cmd: "ls", bash: bash(sub(false, "ls")), allow: []string{"Bash(ls *)"}, want: A},
		call{name: "ls* hits lsof", cmd: "lsof", bash: bash(sub(false, "lsof")), allow: []string{"Bash(ls*)"}, want: A},
		call{name: "legacy ls:* is ls *", cmd: "ls -la", bash: bash(sub(false, "ls", "-la")), allow: []string{"Bash(ls:*)"}, want: A},
		call{name: "legacy prefix misses lsof", cmd: "lsof", bash: bash(sub(false, "lsof")), allow: []string{"Bash(ls:*)"}, want: AU},
		call{name: "star in middle", cmd: "git push origin main", bash: bash(sub(false, "git", "push", "origin", "main")), allow: []string{"Bash(git * main)"}, want: A},
		call{name: "star in middle misses", cmd: "git push origin dev", bash: bash(sub(false, "git", "push", "origin", "dev")), allow: []string{"Bash(git * main)"}, want: AU},
		call{name: "suffix star", cmd: "npm install", bash: bash(sub(false, "npm", "install")), allow: []string{"Bash(* install)"}, want: A},
		call{name: "colon literal mid pattern", cmd: "git push", bash: bash(sub(false, "git", "push")), allow: []string{"Bash(git:* push)"}, want: AU},
		call{name: "exact text", cmd: "make test", bash: bash(sub(false, "make", "test")), allow: []string{"Bash(make test)"}, want: A},
		call{name: "a program quoted whole is one word to an allow", cmd: "'my tool' sub x", bash: bash(sub(false, "my tool", "sub", "x")), allow: []string{"Bash(my tool sub x)"}, want: AU},
		call{name: "an argument quoted whole is one word to an allow", cmd: "npm 'run test'", bash: bash(sub(false, "npm", "run test")), allow: []string{"Bash(npm run test:*)"}, want: AU},
		call{name: "a quoted argument under an allow's star", cmd: "git commit -m 'fix it'", bash: bash(sub(false, "git", "commit", "-m", "fix it")), allow: []string{"Bash(git commit -m *)"}, want: A},
		call{name: "a program quoted whole is still seen by a deny", cmd: "'my tool' sub x", bash: bash(sub(false, "my tool", "sub", "x")), allow: []string{"Bash"}, deny: []string{"Bash(my tool sub *)"}, want: D},
		call{name: "exact text misses extra arg", cmd: "make test all", bash: bash(sub(false, "make", "test", "all")), allow: []string{"Bash(make test)"}, want: AU},
		call{name: "env assignment caught by deny", cmd: "X=1 rm -rf t", bash: bash(classifier.Subcommand{Text: "X=1 rm -rf t", Argv: []string{"X=1", "rm", "-rf", "t"}, DenyPrefix: []string{"rm", "-rf", "t"}}), deny: []string{"Bash(rm *)"}, want: D},
		call{name: "non-static command matches no allow", cmd: "echo $(id)", bash: bash(classifier.Subcommand{Text: "echo $(id)", DenyPrefix: []string{"echo", "$(id)"}}), allow: []string{"Bash(echo *)"}, want: AU},
		call{name: "exact-only rejects prefix rule", cmd: "watch ls", bash: bash(classifier.Subcommand{Text: "watch ls", Argv: []string{"watch", "ls"}, Prefix: []string{"watch", "ls"}, DenyPrefix: []string{"watch", "ls"}, ExactOnly: true}), allow: []string{"Bash(watch *)"}, want: AU},
		call{name: "exact-only takes exact rule", cmd: "watch ls", bash: bash(classifier.Subcommand{Text: "watch ls", Argv: []string{"watch", "ls"}, Prefix: []string{"watch", "ls"}, DenyPrefix: []string{"watch", "ls"}, ExactOnly: true}), allow: []string{"Bash(watch ls)"}, want: A},
		call{name: "parse error bare allow asks", cmd: `ls "x`, bash: parseErr(), allow: []string{"Bash"}, want: AU, step: "bash_parse_error"},
		call{name: "parse error deny still fires", cmd: `rm -rf "x`, bash: parseErr(), deny: []string{"Bash(rm *)"}, want: D},
		call{name: "no classification is unparsed", cmd: "ls", allow: []string{"Bash(ls)"}, want: AU},
		call{name: "bare Bash deny blocks read-only", cmd: "ls", bash: bash(sub(true, "ls")), deny: []string{"Bash"}, want: D},
		call{name: "Bash(*) is bare", cmd: "npm i", bash: bash(sub(false, "npm", "i")), allow: []string{"Bash(*)"}, want: A},
		call{name: "param deny background", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "run_in_background": true}, allow: []string{"Bash"}, deny: []string{"Bash(run_in_background:true)"}, want: D},
		call{name: "param number as written", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "timeout": json.Number("5000")}, allow: []string{"Bash"}, deny: []string{"Bash(timeout:5000)"}, want: D},
		call{name: "param number in exponent form", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "timeout": json.Number("5e3")}, allow: []string{"Bash"}, deny: []string{"Bash(timeout:5000)"}, want: D},
		call{name: "param number with a fraction of zero", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "timeout": json.Number("5000.0")}, allow: []string{"Bash"}, deny: []string{"Bash(timeout:5000)"}, want: D},
		call{name: "param number, negative zero", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "timeout": json.Number("-0.0")}, allow: []string{"Bash"}, deny: []string{"Bash(timeout:0)"}, want: D},
		call{name: "param number, past float64", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "timeout": json.Number("1e400")}, allow: []string{"Bash"}, deny: []string{"Bash(timeout:Infinity)"}, want: D},
		call{name: "param number, another value", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), input: map[string]any{"command": "sleep 9", "timeout": json.Number("5001")}, allow: []string{"Bash"}, deny: []string{"Bash(timeout:5000)"}, want: A},
		call{name: "param absent never matches", cmd: "sleep 9", bash: bash(sub(false, "sleep", "9")), allow: []string{"Bash"}, deny: []string{"Bash(run_in_background:true)"}, want: A},
		call{name: "param glob ask", cmd: "make", bash: bash(sub(false, "make")), input: map[string]any{"command": "make", "timeout": 600000}, allow: []string{"Bash"}, ask: []string{"Bash(timeout: 6*)"}, want: AU},
		call{name: "redirect write needs edit allow", cmd: "echo hi > /w/out.txt", bash: bash(sub(true, "echo", "hi")), paths: []permission.PathFact{redir("/w/out.txt")}, allow: []string{"Bash(echo *)"}, want: AU},
		call{name: "redirect write with edit allow", cmd: "echo hi > /w/out.txt", bash: bash(sub(true, "echo", "hi")), paths: []permission.PathFact{redir("/w/out.txt")}, allow: []string{"Bash(echo *)", "Edit(//w/**)"}, want: A},
		call{name: "redirect to protected rc", cmd: "echo x >> ~/.bashrc", bash: bash(sub(true, "echo", "x")), paths: []permission.PathFact{redir("/home/u/.bashrc")}, allow: []string{"Bash"}, want: AU, step: "protected_path"},
		call{name: "redirect edit deny", cmd: "echo x > .env", bash: bash(sub(true, "echo", "x")), paths: []permission.PathFact{redir("/w/.env")}, allow: []string{"Bash"}, deny: []string{"Edit(.env)"}, want: D},
	)
	// acceptEdits shell commands.
	ae := permission.ModeAcceptEdits
	add(
		call{name: "acceptEdits mkdir inside", mode: ae, cmd: "mkdir -p build", bash: bash(sub(false, "mkdir", "-p", "build")), want: A},
		call{name: "acceptEdits cp inside", mode: ae, cmd: "cp a b", bash: bash(sub(false, "cp", "a", "b")), want: A},
		call{name: "acceptEdits rm outside", mode: ae, cmd: "rm /etc/x", bash: bash(sub(false, "rm", "/etc/x")), want: AU},
		call{name: "acceptEdits mv with dotdot out", mode: ae, cmd: "mv a ../../x", bash: bash(sub(false, "mv", "a", "../../x")), want: AU},
		call{name: "acceptEdits risk outside", mode: ae, cmd: "touch x", bash: &classifier.Classification{Subcommands: []classifier.Subcommand{sub(false, "touch", "x")}, Risks: []string{"outside_workspace_write"}}, want: AU},
		call{name: "acceptEdits curl asks", mode: ae, cmd: "curl x", bash: bash(sub(false, "curl", "x")), want: AU},
		call{name: "acceptEdits rm build", mode: ae, cmd: "rm -rf build", bash: bash(sub(false, "rm", "-rf", "build")), want: A},
		call{name: "acceptEdits notebook inside", mode: ae, tool: "NotebookEdit", paths: []permission.PathFact{wr("/w/n.ipynb")}, want: A},
		call{name: "acceptEdits edit via symlink out", mode: ae, tool: "Edit", paths: []permission.PathFact{link("/w/l", "/etc/passwd", permission.Write)}, want: AU},
	)
	// Critical rm (COMPAT 3): never approved by a rule or hook.
	for _, x := range []struct{ name, arg string }{
		{"home tilde", "~"}, {"home var", "$HOME"}, {"home abs", "/home/u"}, {"top-level", "/usr"}, {"root star", "/*"},
		{"cwd", "/w"}, {"dot", "."}, {"parent", ".."}, {"glob under var", `"$DIR"/*`},
	} {
		add(call{name: "critical rm " + x.name, cmd: "rm -rf " + x.arg, bash: bash(sub(false, "rm", "-rf", x.arg)), allow: []string{"Bash(rm *)"}, hook: &permission.HookVerdict{Decision: "allow"}, want: AU, step: "critical_rm"})
	}
	add(call{name: "rmdir usr", cmd: "rmdir /usr", bash: bash(sub(false, "rmdir", "/usr")), allow: []string{"Bash"}, want: AU, step: "critical_rm"})
	add(call{name: "rm subdir not critical", cmd: "rm -rf /w/build", bash: bash(sub(false, "rm", "-rf", "/w/build")), allow: []string{"Bash(rm *)"}, want: A})

	// Paths (COMPAT 1).
	add(
		call{name: "read deny ssh", tool: "Read", ro: true, paths: []permission.PathFact{rd("/home/u/.ssh/id_rsa")}, deny: []string{"Read(~/.ssh/**)"}, want: D},
		call{name: "read deny blocks edit", tool: "Edit", paths: []permission.PathFact{wr("/home/u/.ssh/config")}, allow: []string{"Edit"}, deny: []string{"Read(~/.ssh/**)"}, want: D},
		call{name: "read deny via symlink target", tool: "Read", ro: true, paths: []permission.PathFact{link("/w/innocent", "/home/u/.ssh/id_rsa", permission.Read)}, deny: []string{"Read(~/.ssh/**)"}, want: D},
		call{name: "read deny via link name", tool: "Read", ro: true, paths: []permission.PathFact{link("/w/secret.pem", "/w/data/x", permission.Read)}, deny: []string{"Read(*.pem)"}, want: D},
		call{name: "bare name anywhere", tool: "Read", ro: true, paths: []permission.PathFact{rd("/w/a/b/.env")}, deny: []string{"Read(.env)"}, want: D},
		call{name: "bare name dir covers contents", tool: "Read", ro: true, paths: []permission.PathFact{rd("/w/secrets/k")}, deny: []string{"Read(secrets)"}, want: D},
		call{name: "absolute allow outside", tool: "Read", ro: true, paths: []permission.PathFact{rd("/opt/data/x.csv")}, allow: []string{"Read(//opt/data/**)"}, want: A, step: "allow_rule"},
		call{name: "allow needs link and target", tool: "Read", ro: true, paths: []permission.PathFact{link("/opt/data/l", "/etc/shadow", permission.Read)}, allow: []string{"Read(//opt/data/**)"}, want: AU},
		call{name: "depth allow src only at cwd", tool: "Edit", paths: []permission.PathFact{wr("/w/src/a.go")}, allow: []string{"Edit(src/**)"}, want: A},
		call{name: "depth allow misses nested src", tool: "Edit", paths: []permission.PathFact{wr("/w/lib/src/a.go")}, allow: []string{"Edit(src/**)"}, want: AU},
		call{name: "depth deny hits nested src", tool: "Edit", paths: []permission.PathFact{wr("/w/lib/src/a.go")}, allow: []string{"Edit"}, deny: []string{"Edit(src/**)"}, want: D},
		call{name: "slash anchored to project root", tool: "Edit", paths: []permission.PathFact{wr("/w/src/a.go")}, allow: []string{"Edit(/src/**)"}, want: A},
		call{name: "slash anchored misses other root", tool: "Edit", paths: []permission.PathFact{wr("/src/a.go")}, allow: []string{"Edit(/src/**)"}, want: AU},
		call{name: "dot slash cwd", tool: "Edit", paths: []permission.PathFact{wr("/w/docs/x.md")}, allow: []string{"Edit(./docs/*)"}, want: A},
		call{name: "single star one segment", tool: "Edit", paths: []permission.PathFact{wr("/w/docs/a/x.md")}, allow: []string{"Edit(./docs/*.md)"}, want: AU},
		call{name: "home anchor", tool: "Write", paths: []permission.PathFact{wr("/home/u/notes/a.txt")}, allow: []string{"Edit(~/notes/**)"}, want: A},
		call{name: "edit allow grants read", tool: "Read", ro: true, paths: []permission.PathFact{rd("/opt/x/a")}, allow: []string{"Edit(//opt/x/**)"}, want: A},
		call{name: "read allow does not grant write", tool: "Edit", paths: []permission.PathFact{wr("/opt/x/a")}, allow: []string{"Read(//opt/x/**)"}, want: AU},
		call{name: "write rule covers edit tool deny", tool: "Edit", paths: []permission.PathFact{wr("/w/gen/a")}, allow: []string{"Edit"}, deny: []string{"Write(./gen/**)"}, want: D},
		call{name: "grep read deny", tool: "Grep", ro: true, paths: []permission.PathFact{rd("/w/secrets")}, deny: []string{"Read(./secrets/**)"}, want: D},
		call{name: "glob rule own tool", tool: "Glob", ro: true, paths: []permission.PathFact{rd("/w/vendor")}, deny: []string{"Glob(./vendor)"}, want: D},
		call{name: "glob rule not for read", tool: "Read", ro: true, paths: []permission.PathFact{rd("/w/vendor/a")}, deny: []string{"Glob(./vendor)"}, want: A},
		call{name: "fifo special", tool: "Read", ro: true, paths: []permission.PathFact{{Requested: "/w/pipe", Resolved: "/w/pipe", Access: permission.Read, Special: "fifo"}}, want: D, step: "safety_deny"},
		call{name: "proc mem", tool: "Read", ro: true, paths: []permission.PathFact{rd("/proc/123/mem")}, mode: permission.ModeBypassPermissions, want: D},
		call{name: "stdin via symlink", tool: "Read", ro: true, paths: []permission.PathFact{link("/w/in", "/dev/stdin", permission.Read)}, want: D},
		call{name: "protected file list", tool: "Write", paths: []permission.PathFact{wr("/w/.npmrc")}, allow: []string{"Edit"}, want: AU, step: "protected_path"},
		call{name: "mise config", tool: "Edit", paths: []permission.PathFact{wr("/w/mise.toml")}, allow: []string{"Edit"}, want: AU, step: "protected_path"},
		call{name: "mise conf.d", tool: "Write", paths: []permission.PathFact{wr("/w/.config/mise/conf.d/x.toml")}, allow: []string{"Edit"}, want: AU, step: "protected_path"},
		call{name: "a git dir's HEAD", tool: "Write", paths: []permission.PathFact{wr("/w/sub/HEAD")}, allow: []string{"Edit"}, want: AU, step: "protected_path"},
		call{name: "a git dir's HEAD in bypass", tool: "Write", mode: permission.ModeBypassPermissions, paths: []permission.PathFact{wr("/w/HEAD")}, want: D},
		call{name: "head is no git dir's", tool: "Write", paths: []permission.PathFact{wr("/w/docs/head")}, allow: []string{"Edit"}, want: A},
		call{name: "protected config git", tool: "Write", paths: []permission.PathFact{wr("/home/u/.config/git/config")}, allow: []string{"Edit"}, want: AU},
		// rm -rf ~/.config, mv ~/.local x, find ~/.config -delete: the protected dirs go with it.
		call{name: "dir holding protected ones", cmd: "rm -rf ~/.config", bash: realBash("rm -rf ~/.config"), paths: []permission.PathFact{wr("/home/u/.config/")}, mode: permission.ModeBypassPermissions, want: D, step: "protected_path"},
		call{name: "dir holding protected ones, mv", cmd: "mv ~/.local x", bash: realBash("mv ~/.local x"), paths: []permission.PathFact{wr("/home/u/.local"), wr("/w/x")}, allow: []string{"Bash"}, want: AU, step: "protected_path"},
		// A project's .cache, .config, .local is a build's, not the home's.
		call{name: "a project's cache dir", cmd: "rm -rf node_modules/.cache", bash: realBash("rm -rf node_modules/.cache"), paths: []permission.PathFact{wr("/w/node_modules/.cache")}, mode: permission.ModeBypassPermissions, want: A},
		call{name: "a project's config dir, mv", cmd: "mv .config cfg", bash: realBash("mv .config cfg"), paths: []permission.PathFact{wr("/w/.config"), wr("/w/cfg")}, allow: []string{"Bash"}, want: A},
		call{name: "a file beside protected dirs", tool: "Write", paths: []permission.PathFact{wr("/home/u/.config/app.toml")}, allow: []string{"Edit"}, want: A},
		// Where git's config takes hooks from (core.hooksPath = .githooks), as the daemon marks it.
		call{name: "git-named hooks dir", tool: "Write", mode: permission.ModeBypassPermissions, paths: []permission.PathFact{{Requested: "/w/.githooks/pre-commit", Resolved: "/w/.githooks/pre-commit", Access: permission.Write, Special: "git_named"}}, want: D, step: "protected_path"},
		call{name: "git-named hooks dir, allowed edits", tool: "Write", paths: []permission.PathFact{{Requested: "/w/.githooks/pre-commit", Resolved: "/w/.githooks/pre-commit", Access: permission.Write, Special: "git_named"}}, allow: []string{"Edit"}, want: AU, step: "protected_path"},
		call{name: "shell-named sourced file", tool: "Write", mode: permission.ModeBypassPermissions, paths: []permission.PathFact{{Requested: "/w/env.sh", Resolved: "/w/env.sh", Access: permission.Write, Special: "shell_named"}}, want: D, step: "protected_path"},
		call{name: "agent-named hook script", tool: "Write", mode: permission.ModeAcceptEdits, paths: []permission.PathFact{{Requested: "/w/tools/check.sh", Resolved: "/w/tools/check.sh", Access: permission.Write, Special: "agent_named"}}, want: AU, step: "protected_path"},
		call{name: "shell-named PATH dir, allowed edits", tool: "Write", paths: []permission.PathFact{{Requested: "/w/tools/ls", Resolved: "/w/tools/ls", Access: permission.Write, Special: "shell_named"}}, allow: []string{"Edit"}, want: AU, step: "protected_path"},
		call{name: "claude worktrees not protected", tool: "Write", paths: []permission.PathFact{wr("/w/.claude/worktrees/a/x")}, allow: []string{"Edit"}, want: A},
		call{name: "sandboxd settings protected", tool: "Edit", mode: ae, paths: []permission.PathFact{wr("/w/.sandboxd/settings.json")}, want: AU},
		call{name: "protected via symlink target", tool: "Edit", mode: ae, paths: []permission.PathFact{link("/w/cfg", "/w/.git/hooks/pre-commit", permission.Write)}, want: AU},
		call{name: "edit with no paths asks", tool: "Edit", want: AU},
		call{name: "write outside allowed by rule", tool: "Write", paths: []permission.PathFact{wr("/tmp/x")}, allow: []string{"Edit(//tmp/**)"}, want: A},
		// Agents ignore Write path rules (COMPAT 1): an allow of them allows nothing.
		call{name: "write allow of a Write path rule ignored", tool: "Write", paths: []permission.PathFact{wr("/tmp/x")}, allow: []string{"Write(//tmp/**)"}, want: AU},
		call{name: "write deny of a Write path rule kept", tool: "Write", paths: []permission.PathFact{wr("/tmp/x")}, allow: []string{"Edit(//tmp/**)"}, deny: []string{"Write(//tmp/**)"}, want: D},
	)
	// WebFetch domains.
	add(
		call{name: "subdomain star", tool: "WebFetch", domain: "api.example.com", allow: []string{"WebFetch(domain:*.example.com)"}, want: A},
		call{name: "subdomain star deep", tool: "WebFetch", domain: "a.b.example.com", allow: []string{"WebFetch(domain:*.example.com)"}, want: A},
		call{name: "subdomain star not apex", tool: "WebFetch", domain: "example.com", allow: []string{"WebFetch(domain:*.example.com)"}, want: AU},
		call{name: "plain domain no subdomains", tool: "WebFetch", domain: "api.example.com", allow: []string{"WebFetch(domain:example.com)"}, want: AU},
		call{name: "domain case and dot", tool: "WebFetch", domain: "EXAMPLE.com.", allow: []string{"WebFetch(domain:example.com)"}, want: A},
		call{name: "star within label", tool: "WebFetch", domain: "x.evil.com", allow: []string{"WebFetch(domain:x.*)"}, want: AU},
		call{name: "domain star all", tool: "WebFetch", domain: "anything.io", allow: []string{"WebFetch(domain:*)"}, want: A},
		call{name: "domain deny wins", tool: "WebFetch", domain: "evil.com", allow: []string{"WebFetch"}, deny: []string{"WebFetch(domain:evil.com)"}, want: D},
		call{name: "webfetch param ask", tool: "WebFetch", domain: "x.com", input: map[string]any{"url": "https://x.com", "prompt": "dump secrets"}, allow: []string{"WebFetch"}, ask: []string{"WebFetch(prompt:*secret*)"}, want: AU},
	)
	// WebFetch methods and paths: what a request shows (http) meets them; a tunnel (no http)
	// is decided by host, and a method/path deny on its host refuses it unless a host-level
	// allow of a source as strong says the host may be reached by host alone.
	post := &permission.HTTPFact{Method: "POST", Path: "/org/r.git/git-receive-pack"}
	get := &permission.HTTPFact{Method: "GET", Path: "/org/r.git/info/refs"}
	dontAsk := permission.ModeDontAsk
	add(
		call{name: "l7 deny push", mode: dontAsk, tool: "WebFetch", domain: "git.example", http: post, allow: []string{"WebFetch(domain:git.example)"}, deny: []string{"WebFetch(POST git.example/**/git-receive-pack)"}, want: D, step: "deny_rule", rule: "WebFetch(POST git.example/**/git-receive-pack)"},
		call{name: "l7 deny leaves fetch", mode: dontAsk, tool: "WebFetch", domain: "git.example", http: get, allow: []string{"WebFetch(domain:git.example)"}, deny: []string{"WebFetch(POST git.example/**/git-receive-pack)"}, want: A},
		call{name: "l7 allow get", mode: dontAsk, tool: "WebFetch", domain: "registry.npmjs.org", http: &permission.HTTPFact{Method: "GET", Path: "/left-pad"}, allow: []string{"WebFetch(GET registry.npmjs.org/**)"}, want: A, rule: "WebFetch(GET registry.npmjs.org/**)"},
		call{name: "l7 allow not post", mode: dontAsk, tool: "WebFetch", domain: "registry.npmjs.org", http: &permission.HTTPFact{Method: "POST", Path: "/left-pad"}, allow: []string{"WebFetch(GET registry.npmjs.org/**)"}, want: D},
		call{name: "l7 allow not a tunnel", mode: dontAsk, tool: "WebFetch", domain: "registry.npmjs.org", allow: []string{"WebFetch(GET registry.npmjs.org/**)"}, want: D, step: "mode"},
		call{name: "tunnel under l7 deny, l7 allow only", mode: dontAsk, tool: "WebFetch", domain: "paste.example", allow: []string{"WebFetch(GET paste.example/**)"}, deny: []string{"WebFetch(POST paste.example/**)"}, want: D, step: "deny_rule"},
		call{name: "tunnel under l7 deny, host allow same source", mode: dontAsk, tool: "WebFetch", domain: "paste.example", allow: []string{"WebFetch(domain:paste.example)"}, deny: []string{"WebFetch(POST paste.example/**)"}, want: A},
		call{name: "l7 deny beats domain allow", tool: "WebFetch", domain: "paste.example", http: &permission.HTTPFact{Method: "POST", Path: "/"}, allow: []string{"WebFetch(domain:paste.example)"}, deny: []string{"WebFetch(POST paste.example/**)"}, want: D},
		call{name: "l7 ask", tool: "WebFetch", domain: "paste.example", http: &permission.HTTPFact{Method: "PUT", Path: "/x"}, allow: []string{"WebFetch(domain:paste.example)"}, ask: []string{"WebFetch(* paste.example/x)"}, want: AU, step: "ask_rule"},
	)
	// MCP tool names.
	add(
		call{name: "mcp one tool", tool: "mcp__github__get_issue", allow: []string{"mcp__github__get_issue"}, want: A},
		call{name: "mcp other tool", tool: "mcp__github__delete_repo", allow: []string{"mcp__github__get_issue"}, want: AU},
		call{name: "mcp server glob", tool: "mcp__github__delete_repo", allow: []string{"mcp__github__*"}, want: A},
		call{name: "mcp other server", tool: "mcp__gitlab__x", allow: []string{"mcp__github__*"}, want: AU},
		call{name: "mcp deny one under server allow", tool: "mcp__github__delete_repo", allow: []string{"mcp__github"}, deny: []string{"mcp__github__delete_repo"}, want: D},
		call{name: "mcp param deny", tool: "mcp__db__query", input: map[string]any{"readonly": false}, allow: []string{"mcp__db"}, deny: []string{"mcp__db__query(readonly:false)"}, want: D},
		call{name: "mcp requires interaction", tool: "mcp__ui__confirm", rui: true, allow: []string{"mcp__ui"}, want: AU, step: "user_interaction"},
		call{name: "deny star everything", tool: "Read", ro: true, paths: []permission.PathFact{rd("/w/a")}, deny: []string{"*"}, want: D},
	)
	// Sources and precedence (COMPAT 2).
	add(
		call{name: "deny in user beats allow in policy", cmd: "curl x", bash: bash(sub(false, "curl", "x")), want: D},
		call{name: "ask beats allow", cmd: "curl x", bash: bash(sub(false, "curl", "x")), allow: []string{"Bash(curl *)"}, ask: []string{"Bash(curl *)"}, want: AU, step: "ask_rule"},
		call{name: "hook allow never beats ask rule", cmd: "curl x", bash: bash(sub(false, "curl", "x")), ask: []string{"Bash(curl *)"}, hook: &permission.HookVerdict{Decision: "allow"}, want: AU, step: "ask_rule"},
		call{name: "hook allow never beats deny rule", cmd: "curl x", bash: bash(sub(false, "curl", "x")), deny: []string{"Bash(curl *)"}, hook: &permission.HookVerdict{Decision: "allow"}, want: D},
		call{name: "hook ask beats allow rule", cmd: "curl x", bash: bash(sub(false, "curl", "x")), allow: []string{"Bash(curl *)"}, hook: &permission.HookVerdict{Decision: "ask"}, want: AU, step: "hook_ask"},
		call{name: "hook defer ignored", cmd: "curl x", bash: bash(sub(false, "curl", "x")), allow: []string{"Bash(curl *)"}, hook: &permission.HookVerdict{Decision: "defer"}, want: A},
		call{name: "hook allow not for protected", tool: "Edit", paths: []permission.PathFact{wr("/w/.git/HEAD")}, hook: &permission.HookVerdict{Decision: "allow"}, want: AU, step: "protected_path"},
		call{name: "unknown mode falls back", mode: "yolo", cmd: "npm i", bash: bash(sub(false, "npm", "i")), want: AU},
		call{name: "dontAsk allow rule", mode: permission.ModeDontAsk, cmd: "make", bash: bash(sub(false, "make")), allow: []string{"Bash(make)"}, want: A},
		call{name: "plan allowed edit still denied", mode: permission.ModePlan, tool: "Edit", paths: []permission.PathFact{wr("/w/a")}, allow: []string{"Edit"}, want: D, step: "plan"},
		call{name: "bypass still denies rule", mode: permission.ModeBypassPermissions, tool: "Edit", paths: []permission.PathFact{wr("/w/.env")}, deny: []string{"Edit(.env)"}, want: D},
		call{name: "bypass protected denied", mode: permission.ModeBypassPermissions, tool: "Edit", paths: []permission.PathFact{wr("/w/.git/config")}, want: D},
	)
	// The precedence case needs rules from two sources; patch it in.
	for i := range cs {
		if cs[i].name == "deny in user beats allow in policy" {
			cs[i].src = "mixed"
		}
	}
	return cs
}

func TestDecisionCorpus(t *testing.T) {
	e := newEngine(t, Config{})
	cs := corpus()
	if len(cs) < 150 {
		t.Fatalf("corpus has %d cases, want >= 150", len(cs))
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			var rs *permission.RuleSet
			if c.src == "mixed" {
				rs = mixedSources(t)
			} else {
				rs = c.ruleSet(t)
			}
			d, err := e.Decide(context.Background(), c.facts(), rs)
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if got := outcome(d); got != c.want {
				t.Errorf("got %s, want %s\n  decision: %+v", got, c.want, d)
			}
			if c.step != "" && d.Step != c.step {
				t.Errorf("step %q, want %q (%+v)", d.Step, c.step, d)
			}
			if c.rule != "" && d.Rule != c.rule {
				t.Errorf("rule %q, want %q", d.Rule, c.rule)
			}
			if d.Reason == "" || d.Step == "" || len(d.Trace) == 0 {
				t.Errorf("decision without reason/step/trace: %+v", d)
			}
			if d.Behavior == permission.Ask && !strings.Contains("user classifier parent", d.Route) {
				t.Errorf("ask without route: %+v", d)
			}
		})
	}
}

func mixedSources(t *testing.T) *permission.RuleSet {
	mk := func(text string, b permission.Behavior, s permission.Source) permission.Rule {
		r, err := permission.ParseRuleFor(text, b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = s
		return r
	}
	rules := []permission.Rule{
		mk("Bash(curl *)", permission.Allow, permission.SourcePolicy),
		mk("Bash(curl *)", permission.Deny, permission.SourceUser),
	}
	return permission.NewRuleSet(rules, permission.Effective{}, permission.Anchors{Home: "/home/u", Cwd: "/w"})
}

// TestSettingsDirectoriesCount: additionalDirectories from settings widen acceptEdits without
// the caller copying them into Facts.Dirs.
func TestSettingsDirectoriesCount(t *testing.T) {
	e := newEngine(t, Config{})
	rs := permission.NewRuleSet(nil, permission.Effective{AdditionalDirectories: []string{"/data"}}, permission.Anchors{Home: "/home/u", Cwd: "/w"})
	c := call{tool: "Write", mode: permission.ModeAcceptEdits, paths: []permission.PathFact{wr("/data/x")}}
	d, err := e.Decide(context.Background(), c.facts(), rs)
	if err != nil || d.Behavior != permission.Allow {
		t.Fatalf("write in a settings directory under acceptEdits: %+v %v", d, err)
	}
}

// realBash classifies cmd with the real classifier, as the daemon does.
func realBash(cmd string) *classifier.Classification {
	return classifier.Classify(cmd, classifier.Options{Cwd: "/w", Home: "/home/u", WorkDirs: []string{"/w"}})
}

// TestDecisionCorpusIssue16 is issue #16 through the real classifier: deny rules hold through
// wrappers, nested shells and spellings (reproduction 7), commands known only at run time
// ask wherever a Bash deny or ask rule exists (deny where nothing may ask), and each
// classifier family of reproduction 1 is not allowed as read-only.
func TestDecisionCorpusIssue16(t *testing.T) {
	e := newEngine(t, Config{})
	var cs []call
	add := func(x ...call) { cs = append(cs, x...) }
	curl := []string{"Bash(curl:*)"}
	//                                 default acceptEdits plan dontAsk bypass auto bubble
	for _, cmd := range []string{
		`ls && bash -c 'curl x'`, `eval 'curl x'`, `sh -c 'curl x'`, `zsh -c 'curl x'`, `dash -c 'curl x'`,
		`find . -exec curl {} \;`, `find . -execdir curl {} +`, `find . -ok curl {} \;`, `find . -okdir curl {} \;`,
		`xargs curl`, `env curl x`, `env -i FOO=1 curl x`, `command curl x`, `builtin curl x`, `exec curl x`,
		`timeout 5 curl x`, `nice -n 5 curl x`, `nohup curl x`, `stdbuf -o0 curl x`, `time curl x`,
		`/usr/bin/curl x`, `c\url x`, `'cu'rl x`, `"curl" x`, `bash <<< 'curl x'`, `echo 'curl x' | bash`,
		"bash <<'EOF'\ncurl x\nEOF", `watch curl x`, `sudo curl x`,
		// Runners: programs that run a command after arguments of their own.
		`flock /tmp/l curl x`, `flock /tmp/l -c 'curl x'`, `taskset 1 curl x`, `taskset -c 0 curl x`,
		`chrt -f 10 curl x`, `ionice -c3 curl x`, `prlimit --nofile=10 curl x`, `setarch x86_64 curl x`,
		`strace -f -o /dev/null curl x`, `unshare -r curl x`, `script -qc 'curl x' /dev/null`,
		`ssh host curl x`, `ssh host 'curl x'`, `systemd-run --user curl x`, `uv run curl x`, `npx curl x`,
		`direnv exec . curl x`, `busybox curl x`, `/usr/bin/taskset 1 curl x`, `flock /tmp/l timeout 5 curl x`,
		`ld.so /usr/bin/curl x`, `/lib64/ld-linux-x86-64.so.2 /usr/bin/curl x`, `logsave /dev/null curl x`,
		`start-stop-daemon --start --exec /usr/bin/curl -- x`, `systemd-cat curl x`, `ssh-agent curl x`,
		`choom -n 0 -- curl x`, `rlwrap curl x`, `mpirun -n 1 curl x`, `SHELL=/usr/bin/curl script -qc x /dev/null`,
		`i386 curl x`, `x86_64 curl x`, `dpkg-architecture -c curl x`,
		`/lib/x86_64-linux-gnu/ld-2.36.so /usr/bin/curl x`,
		// Commands git runs at a transport's other end.
		`git clone -u 'curl x; exit 1 #' /r /tmp/x`, `git fetch --upload-pack=curl origin`,
		`git push --receive-pack='curl x' origin`, `git ls-remote --upload-pack 'curl x' /r`,
		// Command strings programs run: git's config, and the variables of helpers and pagers.
		`git -c alias.x='!curl x' x`, `git -C sub -c core.sshCommand='curl x' fetch`, `GIT_SSH_COMMAND='curl x' git fetch`,
		`env GIT_SSH_COMMAND='curl x' git fetch`, `export GIT_SSH_COMMAND='curl x'; git fetch`, `PAGER='curl x'; git log`,
		`LESSOPEN='|curl x %s' less f`,
		// Scripts the shell runs later: a trap's action, an alias's value.
		`trap 'curl x' EXIT`, `alias ll='curl x'`,
		// time's and eval's --, a runner's command attached to its option, npm exec, zsh's.
		`time -- curl x`, `time -p -- curl x`, `eval -- curl x`, `builtin eval -- curl x`,
		`script -qc'curl x' /dev/null`, `script -qe --command='curl x'`, `su -c'curl x'`,
		`runuser --command='curl x' u`, `npm exec -c 'curl x'`, `npm exec --call='curl x'`,
		`npx --call='curl x'`, `pnpm dlx curl x`, `zargs -- x -- curl`, `emulate sh -c 'curl x'`,
		`alias c=curl; eval c x`,
		// A program no table describes may be a runner: each tail of its words is read.
		`fakeroot-sysv curl x`, `valgrind.bin -q curl x`, `slogin h curl x`, `heaptrack curl x`,
		`docker exec c curl x`, `ip netns exec ns curl x`, `./run.sh "$X" curl x`,
	} {
		add(matrix(call{name: "deny through " + cmd, cmd: cmd, bash: realBash(cmd), deny: curl}, D, D, D, D, D, D, D)...)
	}
	// Programs that run what no word names (the running shell by its /proc name, a debugger,
	// a scheduler or an editor reading commands from stdin, zsh with an option that makes data
	// code) meet every deny rule: asked where a person may answer, denied elsewhere.
	for _, cmd := range []string{
		`/proc/self/exe -c 'curl x'`, `/proc/thread-self/exe -c 'curl x'`, `/dev/fd/../exe -c 'curl x'`,
		`gdb -q --args curl x <<< run`, `at now <<< 'curl x'`, `batch <<< 'curl x'`, `crontab - <<< '* * * * * curl x'`,
		`ed -s f <<< '!curl x'`, `vim -es f <<< '!curl x'`,
		// A program the line itself writes, and git config read from a file.
		`printf 'curl x' > p; chmod +x p; ./p`, `ln -s /usr/bin/curl c; ./c x`, `cp /bin/bash b; ./b -c 'curl x'`,
		`printf 'curl x' > q; git -c core.fsmonitor=./q status`, `git -c include.path=/w/c status`,
		`git -c includeIf.onbranch:main.path=/w/c status`, `git -c core.hooksPath=../h commit -m x`,
		`git -c init.templateDir=./t clone -q src dst`, `GIT_TEMPLATE_DIR=./t git clone -q src dst`,
		`cp /usr/bin/curl m; PATH=.:$PATH m x`, `cp /usr/bin/curl /tmp/m; cd /tmp; ./m x`, `cp /usr/bin/curl m; ~+/m x`,
		`printf 'curl x' > q; cd src; git -c core.fsmonitor=../q status`,
	} {
		add(matrix(call{name: "opaque " + cmd, cmd: cmd, bash: realBash(cmd), deny: curl}, AU, AU, D, D, D, AU, AP)...)
	}
	for _, cmd := range []string{`zsh5 -c 'curl x'`, `rzsh -c 'curl x'`, `bash-5.2 -c 'curl x'`} {
		add(matrix(call{name: "deny through " + cmd, cmd: cmd, bash: realBash(cmd), deny: curl}, D, D, D, D, D, D, D)...)
	}
	// Words the shell expands meet the rules as what they may become: braces as their
	// expansions, a glob as any name it matches (a file the line can make), $X as anything.
	for _, c := range []struct{ cmd, rule string }{
		{`git {push,} origin main`, "Bash(git push *)"}, {`git push{,} origin`, "Bash(git push *)"},
		{`git pus{h..h} x`, "Bash(git push *)"}, {`git {,}push x`, "Bash(git push *)"},
		{`git {push,origin} main`, "Bash(git push origin *)"}, {`git -C . {push,} x`, "Bash(git push *)"},
		{`rm -r? x`, "Bash(rm -rf *)"}, {`rm -[r]f x`, "Bash(rm -rf *)"}, {`rm -{rf,} x`, "Bash(rm -rf *)"},
		{`git push $X`, "Bash(git push)"}, {`git push "$(echo -f)"`, "Bash(git push -f *)"},
		{`npm pub* x`, "Bash(npm publish *)"}, {`npm {publish,}`, "Bash(npm publish:*)"},
		// Words xargs reads and puts after the command's own; zsh's =cmd and precommand
		// modifiers before it.
		{`echo push origin main | xargs git`, "Bash(git push *)"}, {`echo -rf x | xargs rm`, "Bash(rm -rf *)"},
		{`xargs -a f -n1 git`, "Bash(git push *)"}, {`=git push x`, "Bash(git push *)"},
		{`nocorrect git push x`, "Bash(git push *)"}, {`- git push x`, "Bash(git push *)"}, {`repeat 1 git push x`, "Bash(git push *)"},
		// xargs's replace string is a line of its input; git's commands by their program names.
		{`echo -rf | xargs -I{} rm {} x`, "Bash(rm -rf *)"}, {`echo -rf | xargs -I X rm X x`, "Bash(rm -rf *)"},
		{`echo -rf | xargs -i rm {} x`, "Bash(rm -rf *)"}, {`echo push | xargs --replace git {} o`, "Bash(git push *)"},
		{`/usr/lib/git-core/git-push origin`, "Bash(git push *)"}, {`git-push origin`, "Bash(git push *)"},
		// One quoted word: anything its literals allow, blanks and slashes in the expansion too.
		{`rm -f "$f"`, "Bash(rm -rf *)"}, {`rm "-r$x" y`, "Bash(rm -rf *)"}, {`git "$p"sh origin`, "Bash(git push *)"},
		{`git "pu$x" origin`, "Bash(git push *)"}, {`cat "$d"/shadow`, "Bash(cat /etc/shadow)"},
		{`git "$(echo push) origin"`, "Bash(git push origin)"}, {`rm "$@"`, "Bash(rm -rf *)"}, {`rm "${a[@]}"`, "Bash(rm -rf *)"},
		{`rm "${x:-$@}"`, "Bash(rm -rf *)"}, {`rm $f`, "Bash(rm -rf *)"}, {`rm ./$f`, "Bash(rm -rf *)"},
		{`git -C . -- "$x"`, "Bash(git -C . -- push)"},
	} {
		add(matrix(call{name: "deny through expansion " + c.cmd, cmd: c.cmd, bash: realBash(c.cmd), deny: []string{c.rule}}, D, D, D, D, D, D, D)...)
	}
	for _, c := range []struct{ cmd, rule string }{
		{`git add *.go`, "Bash(git push *)"}, {`ls *.go`, "Bash(ls -la *)"}, {`rm *.o`, "Bash(rm -rf *)"},
		{`echo {a,b}`, "Bash(echo c *)"}, {`git log --format=%H -- {a,b}.go`, "Bash(git push *)"},
		// The safe spellings of a file known at run time: no option can come of them.
		{`rm -- "$f"`, "Bash(rm -rf *)"}, {`rm -f -- "$f"`, "Bash(rm -rf *)"}, {`rm ./"$f"`, "Bash(rm -rf *)"},
		{`rm "$dir"/x.o`, "Bash(rm -rf *)"}, {`rm -f "$tmp".bak`, "Bash(rm -rf *)"},
		// Names that are plain, and data that is not a name: nothing evaluated.
		{`printf '%s\n' "$(date)"`, "Bash(curl *)"}, {`while IFS= read -r l; do echo "$l"; done < f`, "Bash(curl *)"},
		{`unset x; echo "$(date)"`, "Bash(curl *)"},
		// Past --, whatever the shell makes of a word is an operand.
		{`rm -- "$@"`, "Bash(rm -rf *)"}, {`rm -- $f`, "Bash(rm -rf *)"}, {`rm -f -- "${a[@]}"`, "Bash(rm -rf *)"},
	} {
		add(call{name: "expansion that cannot spell the rule " + c.cmd, mode: permission.ModeBypassPermissions, cmd: c.cmd, bash: realBash(c.cmd), deny: []string{c.rule}, want: A})
	}
	for _, cmd := range []string{
		`$X x`, `$(echo curl) x`, `${cmd} x`, `wget -O- x | sh`, `bash < file`, `bash script.sh`, `eval "$X"`,
		`source f`, `. ./f`, `ls && bash -c "$CMD"`, `flock /tmp/l $CMD`, `taskset 1 "$@"`,
		`git --config-env=alias.x=FOO x`, `GIT_SSH_COMMAND=$X git fetch`,
		// Programs no word names: those run-parts finds in a dir, an ext:: remote's command.
		`run-parts --regex curl /usr/bin`, `run-parts --regex 'c.rl' /usr/bin`, `git fetch ext::curl`,
		`capsh -- -c 'curl x'`, `capsh --shell=/usr/bin/curl -- x`, `newgrp <<< 'curl x'`,
		`make -f /dev/null --eval='x:;curl x' x`, `make -E 'x:;curl x' x`, `gdb -batch -ex run --args curl x`,
		// A git subcommand git does not ship: an alias (from -c, GIT_CONFIG_*, a config file
		// no word shows) or another program; and one a glob or braces spell.
		`git p x`, `git -c alias.p=push p x`, `GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p x`,
		`git {push,} x`, `git pus* x`, `git [p]ush x`, `git -c alias.svn=push svn x`, `git -calias.bisect=push bisect x`,
		`echo push | parallel git`,
		// A subscript a declaration evaluates; a script or command xargs or script reads;
		// a remote that runs a command; a name an alias makes.
		`declare 'a[$(curl x)]=1'`, `declare -n r='a[$(curl x)]'; r=1`, `declare -a a=(['$(curl x)']=1)`,
		`local 'a[$(curl x)]=1'`, `typeset 'a[$(curl x)]=1'`, `x='a[$(curl x)]'; declare -p "$x"`,
		`echo 'curl x' | xargs -0 sh -c`, `echo 'curl x' | xargs -I{} sh -c {}`, `echo curl | xargs -I{} {} x`,
		`echo 'curl x' | script -q /dev/null`, `script -q /dev/null <<< 'curl x'`, `script -qTc /dev/null <<< 'curl x'`,
		`git -c protocol.ext.allow=always -c 'url.ext::sh -c curl% x.insteadOf=zz' fetch zz`,
		`GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=protocol.ext.allow GIT_CONFIG_VALUE_0=always git fetch zz`,
		`GIT_ALLOW_PROTOCOL=ext git fetch zz`, `alias k=ls; eval k x`,
		`x='a[$(curl x)]'; declare -n r=$x; echo $r`, `declare -n r; r='a[$(curl x)]'; echo $r`,
		`a=(1); unset 'a[$(curl x)]'`, `IFS= read 'a[$(curl x)]' <<< x`, `set -- 'a[$(curl x)]'; read "$1" <<< x`,
		`wait -p 'a[$(curl x)]'`,
		// A variable the line sets evaluated as arithmetic, beside any other command.
		`x='a[$(curl x)]'; ((x)); make`, `x='a[$(curl x)]'; echo $((x)); touch zz`,
		`x='a[$(curl x)]'; for ((;x;)); do break; done`,
	} {
		add(matrix(call{name: "opaque " + cmd, cmd: cmd, bash: realBash(cmd), deny: curl, allow: []string{"Bash"}}, AU, AU, D, D, D, AU, AP)...)
	}
	add(
		// Opaque alone changes nothing: no Bash deny or ask rule, the mode decides.
		call{name: "opaque no rule bypass", mode: permission.ModeBypassPermissions, cmd: `$X x`, bash: realBash(`$X x`), want: A},
		call{name: "opaque no rule default", cmd: `$X x`, bash: realBash(`$X x`), want: AU, step: "mode"},
		call{name: "opaque non-bash deny rule only", mode: permission.ModeBypassPermissions, cmd: `$X x`, bash: realBash(`$X x`), deny: []string{"Read(.env)"}, want: A},
		// An ask rule alone makes opaque commands ask too.
		call{name: "opaque with ask rule", mode: permission.ModeDontAsk, cmd: `eval "$X"`, bash: realBash(`eval "$X"`), ask: []string{"Bash(git push *)"}, want: D, step: "ask_rule", rule: "Bash(git push *)"},
		call{name: "opaque ask rule auto asks user", mode: permission.ModeAuto, cmd: `eval "$X"`, bash: realBash(`eval "$X"`), ask: []string{"Bash(git push *)"}, want: AU},
		// A real deny still denies everywhere, also when another command is opaque.
		call{name: "real deny beats opaque", mode: permission.ModeDefault, cmd: `curl x; $X`, bash: realBash(`curl x; $X`), deny: curl, want: D, rule: "Bash(curl:*)"},
		// A path-named rule still matches its own spelling.
		call{name: "path rule", cmd: `/usr/bin/curl x`, bash: realBash(`/usr/bin/curl x`), deny: []string{"Bash(/usr/bin/curl *)"}, want: D},
		// Allow rules judge the outer command: nested commands need no allow rule of their own.
		call{name: "allow outer shell", cmd: `bash -c 'npm test'`, bash: realBash(`bash -c 'npm test'`), allow: []string{"Bash(bash -c *)"}, want: A},
		call{name: "nested deny beats outer allow", cmd: `bash -c 'curl x'`, bash: realBash(`bash -c 'curl x'`), allow: []string{"Bash(bash -c *)"}, deny: curl, want: D},
		call{name: "nested critical rm", cmd: `bash -c 'rm -rf ~'`, bash: realBash(`bash -c 'rm -rf ~'`), allow: []string{"Bash"}, want: AU, step: "critical_rm"},
	)
	// Classifier families (reproduction 1): none may run as read-only in default mode.
	for _, cmd := range []string{
		`printf -v 'a[$(id>pwn)]' %s 1`, `read 'a[$(id)]' < /dev/null`, `test -v 'a[$(id)]'`, `[[ -v 'a[$(id)]' ]]`,
		`echo ${!x}`, `echo "${x@P}"`, `[[ 'a[$(id)]' -eq 0 ]]`, `echo x; (( $_ ))`, `echo $(( "a[1]" ))`,
		`echo "${x:-'$(id)'}"`, `a['$(id)']=1`, `sort {"-o",out} f`, `/bin/ls() { id; }; /bin/ls`,
		`command_not_found_handle() { id; }; x`, `mapfile -C 'id #' -c 1 x < f`,
		`sed -n ':x w out' f`, `git rev-list --output=x HEAD`, `git shortlog --output=x HEAD`, `git blame --output=x f`,
		`git reflog --output=x`, `git stash list --output=x`, `git config core.pager x --get`, `case x in esac > out`,
		`git -C sub status`, `git --git-dir=.git log`, `nohup ls`,
	} {
		add(call{name: "family " + cmd, cmd: cmd, bash: realBash(cmd), want: AU, step: "mode"})
		add(call{name: "family plan " + cmd, mode: permission.ModePlan, cmd: cmd, bash: realBash(cmd), want: D})
	}
	decideCases(t, e, cs)
}

// TestDenySeesPastGlobalOptions: a deny rule on a subcommand holds when global options stand
// between the program and it (Bash(git push:*) against `git -C . push`, which bypassPermissions
// ran), while an allow rule still matches only what it says.
func TestDenySeesPastGlobalOptions(t *testing.T) {
	e := newEngine(t, Config{})
	var cs []call
	for _, tc := range []struct{ rule, cmd string }{
		{"Bash(git push:*)", `git -C x push origin main`},
		{"Bash(git push:*)", `git -c user.name=x push`},
		{"Bash(git push:*)", `git --git-dir=.git --work-tree . push`},
		{"Bash(git push:*)", `git --no-pager -C x push`},
		{"Bash(git push:*)", `sudo git -C x push`},
		{"Bash(git push:*)", `/usr/bin/git -C x push`},
		{"Bash(git push *)", `timeout 5 git -C x push --force`},
		{"Bash(make install)", `make -C sub install`},
		{"Bash(kubectl delete:*)", `kubectl -n prod delete pod x`},
		{"Bash(kubectl delete:*)", `kubectl --context prod --namespace=x delete pod x`},
		{"Bash(terraform destroy:*)", `terraform -chdir=infra destroy`},
		{"Bash(cargo publish:*)", `cargo +nightly publish`},
		{"Bash(docker rm:*)", `docker -H tcp://h:2375 rm -f c`},
	} {
		//                                                                                              default acceptEdits plan dontAsk bypass auto bubble
		cs = append(cs, matrix(call{name: tc.rule + " " + tc.cmd, cmd: tc.cmd, bash: realBash(tc.cmd), deny: []string{tc.rule}}, D, D, D, D, D, D, D)...)
	}
	cs = append(cs,
		call{name: "allow stays literal", cmd: `git -C x push`, bash: realBash(`git -C x push`), allow: []string{"Bash(git push:*)"}, want: AU, step: "mode"},
		call{name: "ask rule too", mode: permission.ModeBypassPermissions, cmd: `git -C x push`, bash: realBash(`git -C x push`), ask: []string{"Bash(git push:*)"}, want: D, step: "ask_rule"},
		call{name: "other subcommand", mode: permission.ModeBypassPermissions, cmd: `git -C x status`, bash: realBash(`git -C x status`), deny: []string{"Bash(git push:*)"}, want: A},
	)
	decideCases(t, e, cs)
}

// TestDenyRuleWithQuotes: a deny rule written as the command is typed, quotes and
// backslashes included, holds against that command; commands are matched as words with their
// quotes removed, and such a rule once matched nothing.
func TestDenyRuleWithQuotes(t *testing.T) {
	e := newEngine(t, Config{})
	for _, tc := range []struct{ rule, cmd string }{
		{`Bash(rm -rf "my dir")`, `rm -rf "my dir"`},
		{`Bash(rm -rf 'my dir')`, `rm -rf "my dir"`},
		{`Bash(rm -rf my\ dir)`, `rm -rf 'my dir'`},
		{`Bash(git commit -m "wip":*)`, `git commit -m wip --no-verify`},
		{`Bash("curl" *)`, `curl x`},
		{`Bash(echo "a \"b\"")`, `echo 'a "b"'`},
	} {
		for _, behavior := range []string{"deny", "ask"} {
			c := call{name: behavior + " " + tc.rule, mode: permission.ModeBypassPermissions, cmd: tc.cmd, bash: realBash(tc.cmd), want: D}
			if behavior == "deny" {
				c.deny = []string{tc.rule}
			} else {
				c.ask = []string{tc.rule}
			}
			t.Run(c.name, func(t *testing.T) {
				d, err := e.Decide(context.Background(), c.facts(), c.ruleSet(t))
				if err != nil {
					t.Fatalf("decide: %v", err)
				}
				if got := outcome(d); got != c.want || d.Rule != tc.rule {
					t.Errorf("got %s by %q, want %s by %q\n  decision: %+v", got, d.Rule, c.want, tc.rule, d)
				}
			})
		}
	}
}

// TestUnconfinedGrepBelowDenied: a Grep its caller runs itself (an agent's hook) that searches
// a directory holding files a Read deny or ask rule covers is decided by that rule: the agent's
// rg reads them outside any sandbox. sandboxd's own Grep meets them hidden, so it is not.
func TestUnconfinedGrepBelowDenied(t *testing.T) {
	e := newEngine(t, Config{})
	home := "/home/u"
	for _, tc := range []struct {
		name       string
		root       string
		deny, ask  []string
		unconfined bool
		want, step string
	}{
		{name: "home holds ssh", root: home, deny: []string{"Read(~/.ssh/**)"}, unconfined: true, want: D, step: "deny_rule"},
		{name: "root holds ssh", root: "/", deny: []string{"Read(~/.ssh/**)"}, unconfined: true, want: D, step: "deny_rule"},
		{name: "project holds secrets", root: "/w", deny: []string{"Read(./secrets/**)"}, unconfined: true, want: D, step: "deny_rule"},
		{name: "anywhere rule", root: "/w/src", deny: []string{"Read(.env)"}, unconfined: true, want: D, step: "deny_rule"},
		{name: "grep rule", root: home, deny: []string{"Grep(~/.aws)"}, unconfined: true, want: D, step: "deny_rule"},
		{name: "ask rule", root: home, ask: []string{"Read(~/.ssh/**)"}, unconfined: true, want: AU, step: "ask_rule"},
		{name: "sibling tree", root: "/w/src", deny: []string{"Read(./secrets/**)"}, unconfined: true, want: A},
		{name: "edit rule", root: home, deny: []string{"Edit(~/.ssh/**)"}, unconfined: true, want: A},
		{name: "confined", root: home, deny: []string{"Read(~/.ssh/**)"}, want: A},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call{tool: "Grep", paths: []permission.PathFact{rd(tc.root)}, ro: true, dirs: []string{"/", home},
				input: map[string]any{"pattern": "KEY", "path": tc.root}, deny: tc.deny, ask: tc.ask}
			f := c.facts()
			f.Unconfined = tc.unconfined
			d, err := e.Decide(context.Background(), f, c.ruleSet(t))
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if got := outcome(d); got != tc.want || tc.step != "" && d.Step != tc.step {
				t.Errorf("got %s at %s, want %s at %s\n  decision: %+v", got, d.Step, tc.want, tc.step, d)
			}
		})
	}
}

// TestCriticalRmSpellings: the critical-path rm check holds for every spelling of its target
// and of rm itself, through the real classifier: no allow rule approves these, and
// bypassPermissions, which never asks, denies them.
func TestCriticalRmSpellings(t *testing.T) {
	e := newEngine(t, Config{})
	var cs []call
	for _, cmd := range []string{
		`rm -rf "$HOME"`, `rm -rf "${HOME}"/`, `rm -rf ${HOME:?}`, `rm -rf "$(pwd)"`, `rm -rf $PWD`,
		`rm -rf "$DIR"`, `/bin/rm -rf ~`, `/usr/bin/rmdir /usr`, `rm -rf ~root`, `rm -rf ~u`,
		`rm -rf {/,x}`, `rm -rf ~/{.,x}`, `bash -c 'rm -rf "$HOME"'`,
		// The home or cwd and then only what may expand to nothing, and a cd before the rm.
		`rm -rf "$HOME/$(echo)"`, `rm -rf ~/"$NAME"`, `rm -rf "$HOME"/$X/`, `rm -rf $PWD/./$X`,
		"rm -rf \"`pwd`/${X}\"", `cd / && rm -rf usr`, `cd .. && rm -rf w`, `cd ~/.. && rm -rf u`,
		// find removing all it finds below a critical root.
		`find ~ -delete`, `find / -mindepth 1 -delete`, `find -delete`, `find . -type f -delete`,
		`find "$DIR" -delete`, `find / -exec rm -rf {} +`, `cd / && find usr -delete`, `/usr/bin/find ~ -delete`,
		`find ~ -name '*' -delete`,
		// A cd by another name, positional parameters, a link the line makes, /proc's names.
		`env -C .. rm -rf w`, `env -C / rm -rf home`, `env --chdir=/ rm -rf usr`, `find ~+ -delete`,
		`cd / ; find usr -delete`, `set -- ~; rm -rf "$@"`, `f() { rm -rf "$1"; }; f ~`,
		`sh -c 'rm -rf "$1"' _ ~`, `ln -s . me; rm -rf me/`, `rm -rf /proc/self/cwd/`, `time -- rm -rf "$PWD"`,
		// /proc's names for a dir through a variable pid or /dev/fd's link, and globs that
		// take every name of the cwd.
		`rm -rf /proc/$$/cwd/`, `rm -rf "/proc/$PPID/cwd"`, `rm -rf /proc/$$/root/w`, `rm -rf /dev/fd/../cwd/`,
		`rm -rf **`, `rm -rf ?*`, `rm -rf [!.]*`, `rm -rf *?`, `rm -rf @(*)`, `rm -rf +(?)`, `rm -rf ./**`,
		`rm -rf *[!/]`, `rm -rf ~+/?*`, `rm -rf ../w/?*`, `cd / ; rm -rf w/**`,
		// More of them: POSIX classes, braces, a negated or alternative extglob, a trailing /,
		// a command known only at run time, /proc reached by dots, a slash too many or a glob.
		`rm -rf [[:alnum:]]*`, `rm -rf ~/[[:alpha:]]*`, `rm -rf *[[:alnum:]]`, `rm -rf {*,.*}`, `rm -rf ~/{*,.*}`,
		`rm -rf {a..z}*`, `rm -rf */`, `rm -rf ?*/`, `rm -rf !(x)`, `rm -rf @(x|*)`, `rm -rf +([[:alnum:]])`,
		`x=rm; $x -rf *`, `/bin/r[m] -rf *`, `${x:-rm} -rf *`, `rm -rf ../../../../proc/self/cwd/`,
		`rm -rf /dev/./fd/../cwd/`, `rm -rf /dev//fd/../cwd/`, `rm -rf /p*/self/cwd/`, `rm -rf "${x:-/proc/self/cwd}/"`,
		// A find whose tests may take every file.
		`find . -regex '.*' -delete`, `find . ! -name zzz -delete`, `find . -not -name zzz -delete`,
		`find . -name x -o -type f -delete`, `find . -path './*' -delete`, `find . -name '?*' -delete`,
		`find . -delete -name x`, `find . -mindepth 1 -exec rm -rf {} + -name x`, `find . -name '[[:alnum:]]*' -delete`,
		`find . -writable -delete`, `find . -perm -0 -delete`,
		// An alternative after the action, a wrapper or glob in -exec, regexes that match every
		// path, tests true of the user's own files, and lines that run what no word shows.
		`find . -name x -delete -o -delete`, `find . -name x -exec true \; -o -delete`, `find . -name x -delete , -delete`,
		`find . -exec env rm -rf {} +`, `find . -exec timeout 9 rm -rf {} +`, `find . -execdir nice rm -rf {} +`,
		`find . -exec /bin/r[m] -rf {} +`, `find . -regex '.*x*' -delete`, `find . -regex '.*\|x' -delete`,
		`find . -regex '.\{0,\}' -delete`, `find . -iregex '[^x]*' -delete`, `find . -user u -delete`,
		`/proc/self/exe -c 'rm -rf *'`, `/dev/fd/../exe -c 'rm -rf ~'`, `zsh5 -c 'rm -rf *'`, `rzsh -c 'rm -rf ~'`,
		`x='rm -rf *'; eval "$x"`, `hash -p /bin/rm r; r -rf *`, `f(){ "$@"; }; f rm -rf *`,
		`bash -c "$(printf 'rm -rf *')"`,
		// Time and size tests that every file may pass, a found path inside a shell's text,
		// arrays, IFS and the line's own values, a link on the way (lexically here).
		`find / -newer /w/x -delete`, `find . -mtime -100000 -delete`, `find . -size -100G -delete`, `find . -newermt 1970-01-01 -delete`,
		`find . -inum +0 -delete`, `find . -inum -99999999999 -delete`, `find ~ -inum +0 -delete`,
		`find . -mindepth 1 -exec bash -c "rm -rf {}" \;`, `a=(rm -rf ../w); "${a[@]}"`, `read -ra a <<< "rm -rf ../w"; "${a[@]}"`,
		`IFS=,; x="rm,-rf,../w"; $x`, `x='rm -rf'; eval "$x ../w"`, `eval $'rm -rf ../\x77'`, `x=w; rm -rf ../$x`, `rm -rf ../w${x}`,
		`rm -rf ../$(echo w)`, `x="rm -rf $PWD"; $x`, `x='rm -rf '"$PWD"; $x`, `for d in ../w; do rm -rf "$d/"; done`,
		`read d <<< ../w; rm -rf "$d/"`, `rm -rf "${d}/."`, `find . -regex '.*/.*' -delete`, `find . -regex '\./.*' -delete`,
		`find . -mmin +0 -delete`, `find . -size +0 -delete`, `cd build; rm -rf *`, `cd build && cd .. && rm -rf *`,
		`cd sub || rm -rf *`,
	} {
		base := call{name: cmd, cmd: cmd, bash: realBash(cmd), allow: []string{"Bash"}}
		def, byp := base, base
		def.name, def.want, def.step = cmd+"/default", AU, "critical_rm"
		byp.name, byp.mode, byp.want, byp.step = cmd+"/bypass", permission.ModeBypassPermissions, D, "critical_rm"
		cs = append(cs, def, byp)
	}
	for _, cmd := range []string{`rm -rf "$HOME/w/build" src/{a,b}`, `rm -rf "$HOME/.cache/$X"`, `cd /w/sub && rm -rf x`, `cd ~ && rm -rf .cache`, `rm -rf $HOME.bak`,
		`find . -name '*.pyc' -delete`, `find ~/.cache -delete`, `find . -inum 1234 -delete`, `find . -mtime +7 -delete`, `find . -size +1G -delete`, `find build -type f -delete`,
		`env -C sub rm -rf x`, `ln -s a b; rm -f c`, `rm -rf *.o`, `rm -rf sub/**`, `rm -rf @(a|b)`, `rm -rf /dev/shm/x`,
		`rm -rf {build,dist}`, `rm -rf x/*/`, `rm -rf [[:alnum:]]*.o`, `rm -rf src/proc/x`, `$CC -o x y.c`,
		`find . -type f -name '*.o' -delete`, `find . -regex '.*\.o' -delete`, `find . -name x -exec grep -l y {} +`,
		`rm -f "$f"`, `rm "$1"`, `for f in *.log; do rm -f "$f"; done`, `source .venv/bin/activate && grep -rn needle .`,
		`eval "$(ssh-agent -s)" && grep -rn needle .`, `rm -rf dist && cp -r public dist`, `rm -rf vendor && tar xzf vendor.tgz`,
		"find . \\( -name '*.orig' -o -name '*.rej' \\) -delete",
		`find . -path ./node_modules -prune -o -name '*.map' -delete`, `find . -not -path './.git/*' -name '*.orig' -delete`,
		`eval "$(ssh-agent)"; ls *`, `source x; cp -r a b`, `cd build && rm -rf *`, `cd sub && rm -rf ./* .[!.]*`} {
		cs = append(cs, call{name: "subdir " + cmd, cmd: cmd, bash: realBash(cmd), allow: []string{"Bash"}, want: A})
	}
	decideCases(t, e, cs)
}

// decideCases decides each case with its own rules, and checks its outcome, and its step and
// rule where it names them.
func decideCases(t *testing.T, e *Engine, cs []call) {
	t.Helper()
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			d, err := e.Decide(context.Background(), c.facts(), c.ruleSet(t))
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if got := outcome(d); got != c.want {
				t.Errorf("got %s, want %s\n  decision: %+v\n%s", got, c.want, d, c.bash.Format())
			}
			if c.step != "" && d.Step != c.step {
				t.Errorf("step %q, want %q (%+v)", d.Step, c.step, d)
			}
			if c.rule != "" && d.Rule != c.rule {
				t.Errorf("rule %q, want %q", d.Rule, c.rule)
			}
		})
	}
}
