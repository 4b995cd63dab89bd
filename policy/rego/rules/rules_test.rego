package sandboxd.rules_test

import data.sandboxd.fixtures_test as fx
import data.sandboxd.rules
import rego.v1

_rm := fx.rule("Bash(rm *)", "bash", "rm *")

_git := fx.rule("Bash(git *)", "bash", "git *")

_deny_cases := {
	"bash word index": {"x": {"bash": fx.bash([fx.sub(["rm", "-rf", "x"], false)]), "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})}, "want": "Bash(rm *)"},
	"bash other list": {"x": {"bash": fx.bash([fx.sub(["rmdir", "x"], false)]), "rules": fx.rules({"bash": {"other": [fx.rule("Bash(rm*)", "bash", "rm*")]}}, {}, {})}, "want": "Bash(rm*)"},
	"compound second sub": {"x": {"bash": fx.bash([fx.sub(["ls"], true), fx.sub(["rm", "x"], false)]), "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})}, "want": "Bash(rm *)"},
	"parse error raw words": {"x": {"command_words": ["rm", "-rf", "\"x"], "bash": {"parse_error": "eof", "subcommands": [], "read_only": false}, "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})}, "want": "Bash(rm *)"},
	"bare tool": {"x": {"tool": "Read", "rules": fx.rules({"tools": {"Read": [fx.rule("Read", "all", "")]}}, {}, {})}, "want": "Read"},
	"tool glob": {"x": {"tool": "mcp__a__b", "rules": fx.rules({"globs": [fx.rule("mcp__*", "tool", "mcp__*")]}, {}, {})}, "want": "mcp__*"},
	"param": {"x": {"input": {"run_in_background": true}, "rules": fx.rules({"params": {"Bash": [object.union(fx.rule("Bash(run_in_background:true)", "param", "true"), {"param": "run_in_background"})]}}, {}, {})}, "want": "Bash(run_in_background:true)"},
	"path resolved": {"x": {"tool": "Read", "paths": [{"requested": "/w/l", "resolved": "/home/u/.ssh/k", "access": "read", "special": ""}], "rules": fx.rules({"paths": {"read": [fx.rule("Read(~/.ssh/**)", "path", "/home/u/.ssh/**")]}}, {}, {})}, "want": "Read(~/.ssh/**)"},
	"path unknown access": {"x": {"tool": "X", "paths": [{"requested": "/w/.env", "resolved": "/w/.env", "access": "exec", "special": ""}], "rules": fx.rules({"paths": {"write": [fx.rule("Edit(.env)", "path", "/**/.env")]}}, {}, {})}, "want": "Edit(.env)"},
	"domain": {"x": {"tool": "WebFetch", "domain": "evil.com", "rules": fx.rules({"domains": [fx.rule("WebFetch(domain:evil.com)", "domain", "evil.com")]}, {}, {})}, "want": "WebFetch(domain:evil.com)"},
}

test_deny_hit[name] if {
	some name, tc in _deny_cases
	hit := rules.deny_hit with input as fx.input_with(tc.x)
	hit.rule == tc.want
}

_no_deny_cases := {
	"other command": {"bash": fx.bash([fx.sub(["ls"], true)]), "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})},
	"no rules": {"bash": fx.bash([fx.sub(["rm", "x"], false)])},
	"param absent": {"input": {}, "rules": fx.rules({"params": {"Bash": [object.union(fx.rule("p", "param", "true"), {"param": "run_in_background"})]}}, {}, {})},
}

test_no_deny_hit[name] if {
	some name, tc in _no_deny_cases
	not rules.deny_hit with input as fx.input_with(tc)
}

_allow_cases := {
	"all subs": {"x": {"bash": fx.bash([fx.sub(["git", "add", "."], false), fx.sub(["git", "commit"], false)]), "rules": fx.rules({}, {}, {"bash": {"word": {"git": [_git]}}})}, "want": true},
	"read-only sub passes": {"x": {"bash": fx.bash([fx.sub(["git", "log"], false), fx.sub(["grep", "x"], true)]), "rules": fx.rules({}, {}, {"bash": {"word": {"git": [_git]}}})}, "want": true},
	"one sub unallowed": {"x": {"bash": fx.bash([fx.sub(["git", "log"], false), fx.sub(["rm", "x"], false)]), "rules": fx.rules({}, {}, {"bash": {"word": {"git": [_git]}}})}, "want": false},
	"only read-only no rule": {"x": {"bash": fx.bash([fx.sub(["ls"], true)])}, "want": false},
	"parse error bare": {"x": {"bash": {"parse_error": "x", "subcommands": [], "read_only": false}, "rules": fx.rules({}, {}, {"tools": {"Bash": [fx.rule("Bash", "all", "")]}})}, "want": false},
	"non-static prefix": {"x": {"bash": fx.bash([object.union(fx.sub(["echo"], false), {"prefix": null})]), "rules": fx.rules({}, {}, {"bash": {"word": {"echo": [fx.rule("Bash(echo *)", "bash", "echo *")]}}})}, "want": false},
	"exact only": {"x": {"bash": fx.bash([object.union(fx.sub(["watch", "ls"], false), {"exact_only": true})]), "rules": fx.rules({}, {}, {"bash": {"word": {"watch": [fx.rule("Bash(watch *)", "bash", "watch *")]}}})}, "want": false},
	"bare with redirect": {"x": {"bash": fx.bash([fx.sub(["echo"], true)]), "paths": [fx.redirect("/w/o")], "rules": fx.rules({}, {}, {"tools": {"Bash": [fx.rule("Bash", "all", "")]}})}, "want": false},
	"bare with a command's write path": {"x": {"bash": fx.bash([fx.sub(["touch", "/w/o"], false)]), "paths": [fx.write("/w/o")], "rules": fx.rules({}, {}, {"tools": {"Bash": [fx.rule("Bash", "all", "")]}})}, "want": true},
	"path link and target": {"x": {"tool": "Read", "paths": [{"requested": "/opt/l", "resolved": "/etc/shadow", "access": "read", "special": ""}], "rules": fx.rules({}, {}, {"paths": {"read": [fx.rule("Read(//opt/**)", "path", "/opt/**")]}})}, "want": false},
	"path both": {"x": {"tool": "Read", "paths": [fx.read("/opt/a")], "rules": fx.rules({}, {}, {"paths": {"read": [fx.rule("Read(//opt/**)", "path", "/opt/**")]}})}, "want": true},
	"tool bucket for glob": {"x": {"tool": "Glob", "paths": [fx.read("/opt/a")], "rules": fx.rules({}, {}, {"paths": {"Glob": [fx.rule("Glob(//opt/**)", "path", "/opt/**")]}})}, "want": true},
	"write path": {"x": {"tool": "Edit", "paths": [fx.write("/opt/a")], "rules": fx.rules({}, {}, {"paths": {"write": [fx.rule("Edit(//opt/**)", "path", "/opt/**")]}})}, "want": true},
	"webfetch": {"x": {"tool": "WebFetch", "domain": "a.com", "rules": fx.rules({}, {}, {"domains": [fx.rule("WebFetch(domain:a.com)", "domain", "a.com")]})}, "want": true},
	"mcp glob": {"x": {"tool": "mcp__s__t", "rules": fx.rules({}, {}, {"globs": [fx.rule("mcp__s__*", "tool", "mcp__s__*")]})}, "want": true},
	"bash glob": {"x": {"bash": fx.bash([fx.sub(["x"], false)]), "rules": fx.rules({}, {}, {"globs": [fx.rule("B*", "tool", "Bash")]})}, "want": true},
}

_allowed(x) if {
	rules.allow_hit with input as x
} else := false

test_allow_hit[name] if {
	some name, tc in _allow_cases
	_allowed(fx.input_with(tc.x)) == tc.want
}

test_ask_hit_uses_ask_bucket if {
	hit := rules.ask_hit with input as fx.input_with({"bash": fx.bash([fx.sub(["git", "push"], false)]), "rules": fx.rules({}, {"bash": {"word": {"git": [_git]}}}, {})})
	hit.rule == "Bash(git *)"
}

_opaque_bash := object.union(fx.bash([fx.sub(["x"], false)]), {"opaque": true})

test_opaque_asks_with_deny_rule if {
	hit := rules.ask_hit with input as fx.input_with({"bash": _opaque_bash, "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})})
	hit.rule == "Bash(rm *)"
	not rules.deny_hit with input as fx.input_with({"bash": _opaque_bash, "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})})
}

test_opaque_asks_with_ask_rule if {
	hit := rules.ask_hit with input as fx.input_with({"bash": _opaque_bash, "rules": fx.rules({}, {"bash": {"other": [fx.rule("Bash(*push*)", "bash", "*push*")]}}, {})})
	hit.rule == "Bash(*push*)"
}

test_opaque_without_bash_rule if {
	not rules.ask_hit with input as fx.input_with({"bash": _opaque_bash})
}

test_allow_skips_nested if {
	outer := object.union(fx.sub(["bash", "-c", "curl x"], false), {"nested": false})
	inner := object.union(fx.sub(["curl", "x"], false), {"nested": true})
	hit := rules.allow_hit with input as fx.input_with({"bash": fx.bash([outer, inner]), "rules": fx.rules({}, {}, {"bash": {"word": {"bash": [fx.rule("Bash(bash -c *)", "bash", "bash -c *")]}}})})
	hit.rule == "Bash(bash -c *)"
}

_web(text, host, method, path, source) := object.union(fx.rule(text, "web", host), {"method": method, "path": path, "source": source})

_post_paste := _web("WebFetch(POST paste.example/**)", "paste.example", "POST", "/**", "projectSettings")

_push := _web("WebFetch(POST git.example/**/git-receive-pack)", "git.example", "POST", "/**/git-receive-pack", "policySettings")

_get_npm := _web("WebFetch(GET registry.npmjs.org/**)", "registry.npmjs.org", "GET", "/**", "projectSettings")

_fetch(host, http, rules) := fx.input_with({"tool": "WebFetch", "domain": host, "http": http, "rules": rules})

_web_deny_cases := {
	"method and path": {"x": _fetch("paste.example", {"method": "POST", "path": "/a/b"}, fx.rules({"web": [_post_paste]}, {}, {})), "want": "WebFetch(POST paste.example/**)"},
	"method folded": {"x": _fetch("paste.example", {"method": "post", "path": "/"}, fx.rules({"web": [_post_paste]}, {}, {})), "want": "WebFetch(POST paste.example/**)"},
	"git push": {"x": _fetch("git.example", {"method": "POST", "path": "/org/repo.git/git-receive-pack"}, fx.rules({"web": [_push]}, {}, {})), "want": "WebFetch(POST git.example/**/git-receive-pack)"},
	"path folded": {"x": _fetch("git.example", {"method": "POST", "path": "/r/GIT-RECEIVE-PACK"}, fx.rules({"web": [_push]}, {}, {})), "want": "WebFetch(POST git.example/**/git-receive-pack)"},
	"path parameters": {"x": _fetch("git.example", {"method": "POST", "path": "/r/git-receive-pack;x=1"}, fx.rules({"web": [_push]}, {}, {})), "want": "WebFetch(POST git.example/**/git-receive-pack)"},
	"tunnel, only an L7 allow": {"x": _fetch("paste.example", null, fx.rules({"web": [_post_paste]}, {}, {"web": [_web("WebFetch(GET paste.example/**)", "paste.example", "GET", "/**", "projectSettings")]})), "want": "WebFetch(POST paste.example/**)"},
	"tunnel, weaker host allow": {"x": _fetch("git.example", null, fx.rules({"web": [_push]}, {}, {"domains": [fx.rule("WebFetch(domain:git.example)", "domain", "git.example")]})), "want": "WebFetch(POST git.example/**/git-receive-pack)"},
	"tunnel, field absent": {"x": object.remove(_fetch("paste.example", null, fx.rules({"web": [_post_paste]}, {}, {})), ["http"]), "want": "WebFetch(POST paste.example/**)"},
}

test_web_deny_hit[name] if {
	some name, tc in _web_deny_cases
	hit := rules.deny_hit with input as tc.x
	hit.rule == tc.want
}

_web_no_deny_cases := {
	"other method": _fetch("paste.example", {"method": "GET", "path": "/a"}, fx.rules({"web": [_post_paste]}, {}, {})),
	"other path": _fetch("git.example", {"method": "POST", "path": "/r/git-upload-pack"}, fx.rules({"web": [_push]}, {}, {})),
	"other host": _fetch("paste.example.org", {"method": "POST", "path": "/"}, fx.rules({"web": [_post_paste]}, {}, {})),
	"tunnel, host allow as strong": _fetch("paste.example", null, fx.rules({"web": [_post_paste]}, {}, {"domains": [fx.rule("WebFetch(domain:paste.example)", "domain", "paste.example")]})),
	"tunnel, stronger bare allow": _fetch("git.example", null, fx.rules({"web": [_web("WebFetch(POST git.example/**)", "git.example", "POST", "/**", "userSettings")]}, {}, {"tools": {"WebFetch": [fx.rule("WebFetch", "all", "")]}})),
	"tunnel, other host": _fetch("other.example", null, fx.rules({"web": [_post_paste]}, {}, {})),
}

test_web_no_deny_hit[name] if {
	some name, x in _web_no_deny_cases
	not rules.deny_hit with input as x
}

test_web_blind_reason if {
	hit := rules.deny_hit with input as _fetch("paste.example", null, fx.rules({"web": [_post_paste]}, {}, {}))
	contains(hit.reason, "WebFetch(domain:paste.example)")
}

test_web_blind_ask if {
	hit := rules.ask_hit with input as _fetch("paste.example", null, fx.rules({}, {"web": [_post_paste]}, {}))
	hit.rule == "WebFetch(POST paste.example/**)"
}

_web_allow_cases := {
	"get": {"x": _fetch("registry.npmjs.org", {"method": "GET", "path": "/left-pad"}, fx.rules({}, {}, {"web": [_get_npm]})), "want": true},
	"post": {"x": _fetch("registry.npmjs.org", {"method": "POST", "path": "/left-pad"}, fx.rules({}, {}, {"web": [_get_npm]})), "want": false},
	"lowercase method is not folded for allow": {"x": _fetch("registry.npmjs.org", {"method": "get", "path": "/x"}, fx.rules({}, {}, {"web": [_get_npm]})), "want": false},
	"tunnel": {"x": _fetch("registry.npmjs.org", null, fx.rules({}, {}, {"web": [_get_npm]})), "want": false},
	"other host": {"x": _fetch("registry.npmjs.org.evil", {"method": "GET", "path": "/x"}, fx.rules({}, {}, {"web": [_get_npm]})), "want": false},
}

test_web_allow_hit[name] if {
	some name, tc in _web_allow_cases
	_allowed(tc.x) == tc.want
}

_ssh := fx.rule("Read(~/.ssh/**)", "path", "/home/u/.ssh/**")

_tree_cases := {
	"grep of home": {"x": {"tool": "Grep", "unconfined": true, "paths": [fx.read("/home/u")]}, "want": true},
	"grep of a sibling": {"x": {"tool": "Grep", "unconfined": true, "paths": [fx.read("/home/u/src")]}, "want": false},
	"confined grep": {"x": {"tool": "Grep", "paths": [fx.read("/home/u")]}, "want": false},
	"unconfined read": {"x": {"tool": "Read", "unconfined": true, "paths": [fx.read("/home/u")]}, "want": false},
}

_tree_hit(x, behavior) if {
	r := fx.rules({"paths": {"read": [_ssh]}}, {"paths": {"read": [_ssh]}}, {})
	hit := {"deny": rules.tree_deny_hit, "ask": rules.tree_ask_hit}[behavior] with input as fx.input_with(object.union(x, {"rules": r}))
	hit.rule == "Read(~/.ssh/**)"
} else := false

test_tree_hit[name] if {
	some name, tc in _tree_cases
	some behavior in ["deny", "ask"]
	_tree_hit(tc.x, behavior) == tc.want
}
