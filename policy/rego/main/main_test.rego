package sandboxd.main_test

import data.sandboxd.fixtures_test as fx
import data.sandboxd.main
import rego.v1

_rm := fx.rule("Bash(rm *)", "bash", "rm *")

_git := fx.rule("Bash(git *)", "bash", "git *")

_all_bash := fx.rule("Bash", "all", "")

_cases := {
	"hook deny first": {"x": {"hook": {"decision": "deny", "reason": "nope"}, "bash": fx.bash([fx.sub(["ls"], true)])}, "want": ["deny", "hook_deny", ""]},
	"safety deny": {"x": {"tool": "Read", "read_only": true, "paths": [fx.read("/dev/zero")], "mode": "bypassPermissions"}, "want": ["deny", "safety_deny", ""]},
	"deny rule": {"x": {"bash": fx.bash([fx.sub(["rm", "x"], false)]), "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {"tools": {"Bash": [_all_bash]}})}, "want": ["deny", "deny_rule", ""]},
	"plan": {"x": {"mode": "plan", "bash": fx.bash([fx.sub(["make"], false)])}, "want": ["deny", "plan", ""]},
	"ask rule": {"x": {"bash": fx.bash([fx.sub(["git", "push"], false)]), "rules": fx.rules({}, {"bash": {"word": {"git": [_git]}}}, {"tools": {"Bash": [_all_bash]}})}, "want": ["ask", "ask_rule", "user"]},
	"ask rule auto": {"x": {"mode": "auto", "bash": fx.bash([fx.sub(["git", "push"], false)]), "rules": fx.rules({}, {"bash": {"word": {"git": [_git]}}}, {})}, "want": ["ask", "ask_rule", "user"]},
	"critical rm": {"x": {"bash": fx.bash([fx.sub(["rm", "-rf", "/"], false)]), "hook": {"decision": "allow", "reason": ""}}, "want": ["ask", "critical_rm", "user"]},
	"user interaction": {"x": {"tool": "AskUserQuestion", "read_only": true}, "want": ["ask", "user_interaction", "user"]},
	"plan approval": {"x": {"tool": "ExitPlanMode", "mode": "plan"}, "want": ["ask", "user_interaction", "user"]},
	"plan approval auto": {"x": {"tool": "ExitPlanMode", "mode": "auto"}, "want": ["ask", "user_interaction", "user"]},
	"parse error": {"x": {"bash": {"parse_error": "eof", "read_only": false, "subcommands": []}}, "want": ["ask", "bash_parse_error", "user"]},
	"paths unknown, run unconfined": {"x": {"unconfined": true, "read_only": true, "bash": object.union(fx.bash([fx.sub(["cat"], true)]), {"paths_incomplete": true}), "hook": {"decision": "allow", "reason": ""}}, "want": ["ask", "bash_paths_unknown", "user"]},
	"paths unknown, run unconfined, allow rule": {"x": {"unconfined": true, "bash": object.union(fx.bash([fx.sub(["cat"], false)]), {"paths_incomplete": true}), "rules": fx.rules({}, {}, {"tools": {"Bash": [_all_bash]}})}, "want": ["ask", "bash_paths_unknown", "user"]},
	"paths unknown, run in the sandbox": {"x": {"read_only": true, "bash": object.union(fx.bash([fx.sub(["cat"], true)]), {"paths_incomplete": true})}, "want": ["allow", "mode", ""]},
	"hook ask": {"x": {"hook": {"decision": "ask", "reason": ""}, "bash": fx.bash([fx.sub(["ls"], true)])}, "want": ["ask", "hook_ask", "user"]},
	"hook allow": {"x": {"hook": {"decision": "allow", "reason": "ok"}, "bash": fx.bash([fx.sub(["make"], false)])}, "want": ["allow", "hook_allow", ""]},
	"protected": {"x": {"tool": "Edit", "paths": [fx.write("/w/.git/config")], "mode": "acceptEdits"}, "want": ["ask", "protected_path", "user"]},
	"protected bypass": {"x": {"tool": "Edit", "paths": [fx.write("/w/.git/config")], "mode": "bypassPermissions"}, "want": ["deny", "protected_path", ""]},
	"allow rule": {"x": {"bash": fx.bash([fx.sub(["git", "log"], false)]), "rules": fx.rules({}, {}, {"bash": {"word": {"git": [_git]}}})}, "want": ["allow", "allow_rule", ""]},
	"mode default": {"x": {"bash": fx.bash([fx.sub(["make"], false)])}, "want": ["ask", "mode", "user"]},
	"mode dontAsk": {"x": {"mode": "dontAsk", "bash": fx.bash([fx.sub(["make"], false)])}, "want": ["deny", "mode", ""]},
	"mode bubble": {"x": {"mode": "bubble", "bash": fx.bash([fx.sub(["make"], false)])}, "want": ["ask", "mode", "parent"]},
	"mode auto": {"x": {"mode": "auto", "bash": fx.bash([fx.sub(["make"], false)])}, "want": ["ask", "mode", "classifier"]},
	"read only": {"x": {"bash": fx.bash([fx.sub(["ls"], true)])}, "want": ["allow", "mode", ""]},
}

test_decision[name] if {
	some name, tc in _cases
	d := main.decision with input as fx.input_with(tc.x)
	[d.behavior, d.step, object.get(d, "route", "")] == tc.want
	allowed := d.behavior == "allow"
	d.allow == allowed
	main.steps[d.i] == d.step
}

test_custom_deny if {
	d := main.decision with input as fx.input_with({"bash": fx.bash([fx.sub(["ls"], true)])})
		with data.sandboxd.custom.deny as {"no ls on fridays"}
	d.behavior == "deny"
	d.step == "custom_deny"
	d.reason == "no ls on fridays"
}

test_custom_ask_never_auto if {
	d := main.decision with input as fx.input_with({"mode": "auto", "bash": fx.bash([fx.sub(["ls"], true)])})
		with data.sandboxd.custom.ask as {"check"}
	[d.behavior, d.step, d.route] == ["ask", "custom_ask", "user"]
}

test_custom_cannot_beat_deny_rule if {
	d := main.decision with input as fx.input_with({"bash": fx.bash([fx.sub(["rm", "x"], false)]), "rules": fx.rules({"bash": {"word": {"rm": [_rm]}}}, {}, {})})
		with data.sandboxd.custom.ask as {"check"}
	d.step == "deny_rule"
}

test_default_decision_denies if {
	d := main.decision with main._result as null
	d.behavior == "deny"
	d.allow == false
}

test_rule_reported if {
	d := main.decision with input as fx.input_with({"bash": fx.bash([fx.sub(["git", "log"], false)]), "rules": fx.rules({}, {}, {"bash": {"word": {"git": [_git]}}})})
	d.rule == "Bash(git *)"
	d.source == "projectSettings"
}
