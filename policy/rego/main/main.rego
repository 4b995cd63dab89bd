# The decision chain of DESIGN.md. Go gathers facts into input and rules into input.rules;
# this package decides. The first step that has something to say decides; a left-over ask is
# then resolved by the mode (approval queue, parent, classifier or deny).
package sandboxd.main

import data.sandboxd.custom
import data.sandboxd.modes
import data.sandboxd.rules
import data.sandboxd.safety
import rego.v1

# The chain, in order. A decision's trace is the prefix of this list up to its step.
steps := [
	"hook_deny", "safety_deny", "deny_rule", "custom_deny", "plan", "ask_rule", "custom_ask",
	"critical_rm", "user_interaction", "bash_parse_error", "bash_paths_unknown", "hook_ask", "hook_allow",
	"protected_path", "allow_rule", "mode",
]

# Asks from these steps go to a person even in auto mode.
_never_auto := {"ask_rule", "custom_ask", "critical_rm", "user_interaction", "bash_parse_error", "bash_paths_unknown", "hook_ask"}

# METADATA
# title: decision
# description: The permission decision for one tool call.
# entrypoint: true
default decision := {
	"allow": false, "behavior": "deny", "reason": "no step of the policy decided",
	"rule": "", "source": "policy", "step": "default", "i": -1,
}

# A decision is the deciding step's result ({allow, behavior, reason, rule, source, step, i});
# i indexes steps, so the steps passed (the trace) are steps[0..i], built by the caller once
# instead of by the evaluator per call. An ask is then routed by the mode (resolved: true).
decision := _result if {
	_result.behavior != "ask"
} else := {
	"allow": false, "behavior": a.behavior, "reason": concat("; ", [_result.reason, a.reason]),
	"rule": object.get(_result, "rule", ""), "source": _result.source, "step": _result.step,
	"i": _result.i, "route": a.route, "resolved": true,
} if {
	a := modes.resolve(_result.step in _never_auto)
}

# Each step carries its index in steps (i) so the trace is one slice. The cheap, indexed
# conditions (tool, paths present, hook decision) come first in each body so a step that
# cannot apply costs one comparison; a ref that is undefined (no hook: input.hook is null)
# fails the body without a builtin call.
_result := {"i": 0, "step": "hook_deny", "allow": false, "behavior": "deny", "reason": _hook_reason("a PreToolUse hook denied the call"), "source": "hook"} if {
	input.hook.decision == "deny"
} else := {"i": 1, "step": "safety_deny", "allow": false, "behavior": "deny", "reason": sprintf("%s is hidden by the sandbox (a Read deny rule or the daemon's deny_paths); denied in every mode", [_first(safety.hidden_paths)]), "source": "safety"} if {
	input.paths[0] # there is a path (a ref, not a != call: this runs on every decision)
	count(safety.hidden_paths) > 0
} else := {"i": 1, "step": "safety_deny", "allow": false, "behavior": "deny", "reason": sprintf("reading %s never ends or blocks; denied in every mode", [_first(safety.special_reads)]), "source": "safety"} if {
	input.paths[0] # there is a path (a ref, not a != call: this runs on every decision)
	count(safety.special_reads) > 0
} else := _rule_result(2, "deny_rule", "deny", rules.deny_hit) if {
	rules.deny_hit
} else := _tree_result(2, "deny_rule", "deny", rules.tree_deny_hit) if {
	rules.tree_deny_hit
} else := {"i": 3, "step": "custom_deny", "allow": false, "behavior": "deny", "reason": _reasons(custom.deny), "source": "custom"} if {
	count(custom.deny) > 0
} else := {"i": 4, "step": "plan", "allow": false, "behavior": "deny", "reason": "plan mode: only read-only calls run", "source": "mode"} if {
	input.mode == "plan"
	modes.plan_blocks
} else := _rule_result(5, "ask_rule", "ask", rules.ask_hit) if {
	rules.ask_hit
} else := _tree_result(5, "ask_rule", "ask", rules.tree_ask_hit) if {
	rules.tree_ask_hit
} else := {"i": 6, "step": "custom_ask", "behavior": "ask", "reason": _reasons(custom.ask), "source": "custom"} if {
	count(custom.ask) > 0
} else := {"i": 7, "step": "critical_rm", "behavior": "ask", "reason": sprintf("rm of a critical path: %s", [_first(safety.critical_rm)]), "source": "safety"} if {
	input.tool == "Bash"
	safety.removes_line
	count(safety.critical_rm) > 0
} else := {"i": 8, "step": "user_interaction", "behavior": "ask", "reason": "this tool needs a person to answer", "source": "safety"} if {
	input.requires_user_interaction == true
} else := {"i": 8, "step": "user_interaction", "behavior": "ask", "reason": "this tool needs a person to answer", "source": "safety"} if {
	input.tool in {"AskUserQuestion", "ExitPlanMode"}
} else := {"i": 9, "step": "bash_parse_error", "behavior": "ask", "reason": sprintf("the command did not parse (%s); it is never read-only and matches no allow rule", [input.bash.parse_error]), "source": "safety"} if {
	input.tool == "Bash"
	not input.bash.parse_error == null
} else := {"i": 10, "step": "bash_paths_unknown", "behavior": "ask", "reason": "the command reads or writes a path known only when it runs ($VAR, a glob, a cd to a variable), and it runs outside any sandbox, where no deny rule or protected path would hold it; it is never read-only and matches no allow rule", "source": "safety"} if {
	# A command sandboxd runs meets the deny rules and protected paths in its sandbox's
	# mounts and landlock, whatever its words; one the caller runs itself (an agent's hook)
	# meets only what was decided here.
	input.unconfined == true
	input.tool == "Bash"
	input.bash.paths_incomplete == true
} else := {"i": 11, "step": "hook_ask", "behavior": "ask", "reason": _hook_reason("a PreToolUse hook asked"), "source": "hook"} if {
	input.hook.decision == "ask"
} else := {"i": 12, "step": "hook_allow", "allow": true, "behavior": "allow", "reason": _hook_reason("a PreToolUse hook allowed the call"), "source": "hook"} if {
	input.hook.decision == "allow"
	count(safety.protected_writes) == 0
} else := {"i": 13, "step": "protected_path", "behavior": "ask", "reason": sprintf("write to a protected path: %s", [_first(safety.protected_writes)]), "source": "safety"} if {
	# In bypassPermissions too (where the agents let it through): bypass never asks, so the
	# ask becomes a deny, as the kernel's read-only mount of an existing protected path does.
	input.write_paths[0]
	count(safety.protected_writes) > 0
} else := _rule_result(14, "allow_rule", "allow", rules.allow_hit) if {
	rules.allow_hit
} else := object.union({"i": 15, "step": "mode", "source": "mode"}, modes.fallback)

# hit.reason is "<behavior> rule <rule> (<source>)", built with the rule data once per rule set
# (a concat here was a twentieth of a decision). Rule data without one still decides.
_rule_result(i, step, behavior, hit) := {
	"i": i, "step": step, "allow": behavior == "allow", "behavior": behavior, "source": hit.source, "rule": hit.rule,
	"reason": object.get(hit, "reason", behavior),
}

# _tree_result is the result of a rule that covers files below a directory the caller's own
# Grep or Bash command reads whole (rules.tree_deny_hit, tree_ask_hit), with a reason saying
# how to read without them.
_tree_result(i, step, behavior, hit) := object.union(_rule_result(i, step, behavior, hit), {"reason": sprintf(
	"%s covers files under %s, which the agent's own %s would read outside any sandbox; search a directory the rule does not reach, or %s",
	[object.get(hit, "reason", behavior), object.get(hit, "below", _tree_root), _tree_reader, _tree_instead],
)})

# _tree_root, _tree_reader and _tree_instead say it for a Bash command's read of a whole tree
# or for a Grep.
_tree_root := input.tree_subjects[0][0] if {
	input.tool == "Bash"
} else := input.paths[0].requested

_tree_reader := "command" if {
	input.tool == "Bash"
} else := input.tool

_tree_instead := "run the command in sandboxd (sbctl hook --confine)" if {
	input.tool == "Bash"
} else := "serve the tools over MCP (sbctl mcp) to search inside sandboxd"

_hook_reason(default_reason) := r if {
	r := input.hook.reason
	r != ""
} else := default_reason

_reasons(set_) := concat("; ", sort([sprintf("%v", [x]) | some x in set_]))

_first(s) := sort([x | some x in s])[0]
