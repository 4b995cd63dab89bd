package sandboxd.modes_test

import data.sandboxd.fixtures_test as fx
import data.sandboxd.modes
import rego.v1

_admin := {"disable_bypass": true, "disable_auto": true}

_mode_cases := {
	"default": {"mode": "default", "want": "default"},
	"bypass": {"mode": "bypassPermissions", "want": "bypassPermissions"},
	"unknown": {"mode": "yolo", "want": "default"},
	"manual alias is not a mode here": {"mode": "manual", "want": "default"},
	"bypass disabled": {"mode": "bypassPermissions", "admin": _admin, "want": "default"},
	"auto disabled": {"mode": "auto", "admin": _admin, "want": "default"},
	"bubble": {"mode": "bubble", "want": "bubble"},
}

test_mode[name] if {
	some name, tc in _mode_cases
	r := fx.rules({}, {}, {})
	rules := object.union(r, {"admin": object.get(tc, "admin", r.admin)})
	modes.mode == tc.want with input as fx.input_with({"mode": tc.mode, "rules": rules})
}

_ro(over) if {
	modes.read_only with input as fx.input_with(over)
} else := false

_ro_cases := {
	"bash ro": {"x": {"bash": fx.bash([fx.sub(["ls"], true)])}, "want": true},
	"bash write": {"x": {"bash": fx.bash([fx.sub(["rm", "x"], false)])}, "want": false},
	"bash redirect path": {"x": {"bash": fx.bash([fx.sub(["echo"], true)]), "paths": [fx.write("/w/o")]}, "want": false},
	"bash unparsed": {"x": {"bash": {"parse_error": "x", "read_only": true, "subcommands": []}}, "want": false},
	"read tool": {"x": {"tool": "Read", "read_only": true, "paths": [fx.read("/w/a")]}, "want": true},
	"read tool with write path": {"x": {"tool": "Read", "read_only": true, "paths": [fx.write("/w/a")]}, "want": false},
	"edit": {"x": {"tool": "Edit", "paths": [fx.write("/w/a")]}, "want": false},
}

test_read_only[name] if {
	some name, tc in _ro_cases
	_ro(tc.x) == tc.want
}

_ae(over) if {
	modes.accept_edit with input as fx.input_with(over)
} else := false

_ae_cases := {
	"edit inside": {"x": {"tool": "Edit", "paths": [fx.write("/w/a")]}, "want": true},
	"edit outside": {"x": {"tool": "Edit", "paths": [fx.write("/x/a")]}, "want": false},
	"edit no paths": {"x": {"tool": "Edit"}, "want": false},
	"mkdir inside": {"x": {"bash": fx.bash([fx.sub(["mkdir", "-p", "a/b"], false)])}, "want": true},
	"mv out": {"x": {"bash": fx.bash([fx.sub(["mv", "a", "/tmp/b"], false)])}, "want": false},
	"home target": {"x": {"bash": fx.bash([fx.sub(["cp", "a", "~/b"], false)])}, "want": false},
	"exact only": {"x": {"bash": fx.bash([object.union(fx.sub(["sed", "x"], false), {"exact_only": true})])}, "want": false},
	"curl": {"x": {"bash": fx.bash([fx.sub(["curl", "x"], false)])}, "want": false},
	"sed in place": {"x": {"bash": fx.bash([object.union(fx.sub(["sed", "-i", "s/a/b/", "f"], false), {"reason": "sed_in_place"})])}, "want": true},
	"sed exec in place": {"x": {"bash": fx.bash([object.union(fx.sub(["sed", "-i", "1e id", "f"], false), {"reason": "sed_exec"})])}, "want": false},
	"sed write": {"x": {"bash": fx.bash([object.union(fx.sub(["sed", "-n", "w out", "f"], false), {"reason": "sed_write"})])}, "want": false},
	"sed no reason": {"x": {"bash": fx.bash([fx.sub(["sed", "-n", "1e id", "f"], false)])}, "want": false},
	"read outside": {"x": {"bash": fx.bash([fx.sub(["cat", "/etc/passwd"], true)]), "paths": [fx.read("/etc/passwd")]}, "want": false},
	"read outside into a file inside": {"x": {"bash": fx.bash([fx.sub(["cat", "/etc/passwd"], true)]), "paths": [fx.read("/etc/passwd"), fx.write("/w/o")]}, "want": false},
	"read inside into a file inside": {"x": {"bash": fx.bash([fx.sub(["cat", "a"], true)]), "paths": [fx.read("/w/a"), fx.write("/w/o")]}, "want": true},
	"risk": {"x": {"bash": object.union(fx.bash([fx.sub(["touch", "a"], false)]), {"risks": ["outside_workspace_write"]})}, "want": false},
}

test_accept_edit[name] if {
	some name, tc in _ae_cases
	_ae(tc.x) == tc.want
}

_fb_cases := {
	"bypass": {"x": {"mode": "bypassPermissions", "tool": "Edit"}, "want": "allow"},
	"read-only command": {"x": {"bash": fx.bash([fx.sub(["ls"], true)])}, "want": "allow"},
	"read only inside": {"x": {"tool": "Read", "read_only": true, "paths": [fx.read("/w/a")]}, "want": "allow"},
	"read only outside": {"x": {"tool": "Read", "read_only": true, "paths": [fx.read("/etc/a")]}, "want": "ask"},
	"accept edit": {"x": {"mode": "acceptEdits", "tool": "Edit", "paths": [fx.write("/w/a")]}, "want": "allow"},
	"accept edit outside": {"x": {"mode": "acceptEdits", "tool": "Edit", "paths": [fx.write("/etc/a")]}, "want": "ask"},
	"accept edit bash read outside": {"x": {"mode": "acceptEdits", "bash": fx.bash([fx.sub(["cat", "/etc/a"], true)]), "paths": [fx.read("/etc/a")]}, "want": "ask"},
	"default write": {"x": {"tool": "Edit", "paths": [fx.write("/w/a")]}, "want": "ask"},
}

test_fallback[name] if {
	some name, tc in _fb_cases
	f := modes.fallback with input as fx.input_with(tc.x)
	f.behavior == tc.want
}

_resolve_cases := {
	"default": {"mode": "default", "never": false, "want": ["ask", "user"]},
	"acceptEdits": {"mode": "acceptEdits", "never": false, "want": ["ask", "user"]},
	"plan": {"mode": "plan", "never": false, "want": ["ask", "user"]},
	"dontAsk": {"mode": "dontAsk", "never": false, "want": ["deny", ""]},
	"bypass": {"mode": "bypassPermissions", "never": true, "want": ["deny", ""]},
	"auto": {"mode": "auto", "never": false, "want": ["ask", "classifier"]},
	"auto never": {"mode": "auto", "never": true, "want": ["ask", "user"]},
	"bubble": {"mode": "bubble", "never": true, "want": ["ask", "parent"]},
}

test_resolve[name] if {
	some name, tc in _resolve_cases
	r := modes.resolve(tc.never) with input as fx.input_with({"mode": tc.mode})
	[r.behavior, r.route] == tc.want
}

# dontAsk's reason is exact: clients and the daemon match it.
test_resolve_dont_ask_reason if {
	r := modes.resolve(false) with input as fx.input_with({"mode": "dontAsk"})
	r.reason == "would require approval"
}

test_plan_blocks if {
	modes.plan_blocks with input as fx.input_with({"mode": "plan", "tool": "Edit", "paths": [fx.write("/w/a")]})
}

test_plan_passes_reads if {
	not modes.plan_blocks with input as fx.input_with({"mode": "plan", "tool": "Read", "read_only": true, "paths": [fx.read("/w/a")]})
}

test_plan_leaves_its_exit_to_a_person if {
	not modes.plan_blocks with input as fx.input_with({"tool": "ExitPlanMode", "mode": "plan"})
}

test_plan_leaves_webfetch_to_rules if {
	not modes.plan_blocks with input as fx.input_with({"tool": "WebFetch", "mode": "plan", "domain": "x.com"})
	modes.plan_blocks with input as fx.input_with({"tool": "Write", "mode": "plan"})
}

test_webfetch_asks_without_rule if {
	f := modes.fallback with input as fx.input_with({"tool": "WebFetch", "mode": "default", "domain": "x.com"})
	f.behavior == "ask"
	contains(f.reason, "WebFetch(domain:host)")
}

# A WebFetch the agent makes itself (through its hook) has no proxy on its way: bypassPermissions
# does not allow it; the admin's network.allowed_domains allows it in every mode, as the proxy
# does a fetch sandboxd makes.
_fetch_cases := {
	"bypass, sandboxd fetches": {"x": {"mode": "bypassPermissions"}, "want": "allow"},
	"bypass, the agent fetches": {"x": {"mode": "bypassPermissions", "unconfined": true}, "want": "ask"},
	"bypass, the agent fetches an allowed domain": {"x": {"mode": "bypassPermissions", "unconfined": true, "allowed_domain": "*.x.com"}, "want": "allow"},
	"default, allowed domain": {"x": {"mode": "default", "allowed_domain": "*.x.com"}, "want": "allow"},
	"dontAsk, allowed domain": {"x": {"mode": "dontAsk", "allowed_domain": "*.x.com"}, "want": "allow"},
	"dontAsk": {"x": {"mode": "dontAsk"}, "want": "ask"},
}

test_webfetch_past_the_proxy[name] if {
	some name, tc in _fetch_cases
	f := modes.fallback with input as fx.input_with(object.union({"tool": "WebFetch", "domain": "a.x.com"}, tc.x))
	f.behavior == tc.want
}

# In bypassPermissions, a write the agent makes itself outside the session's directories is
# not allowed: confined, the kernel would refuse it. /tmp is each call's own there.
_written_cases := {
	"confined": {"x": {"paths": [fx.write("/home/u/other/x")]}, "want": "allow"},
	"unconfined": {"x": {"unconfined": true, "paths": [fx.write("/home/u/other/x")]}, "want": "ask"},
	"unconfined inside": {"x": {"unconfined": true, "paths": [fx.write("/w/x")]}, "want": "allow"},
	"unconfined tmp": {"x": {"unconfined": true, "paths": [fx.write("/tmp/x")]}, "want": "allow"},
	"unconfined cache dir": {"x": {"unconfined": true, "cache_dirs": ["/home/u/.cache"], "paths": [fx.write("/home/u/.cache/go-build/x")]}, "want": "allow"},
}

test_bypass_written_past_kernel[name] if {
	some name, tc in _written_cases
	f := modes.fallback with input as fx.input_with(object.union({"tool": "Write", "mode": "bypassPermissions"}, tc.x))
	f.behavior == tc.want
}
