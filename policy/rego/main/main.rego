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
	"critical_rm", "user_interaction", "bash_parse_error", "hook_ask", "hook_allow",
	"protected_path", "allow_rule", "mode",
]

# Asks from these steps go to a person even in auto mode.
_never_auto := {"ask_rule", "custom_ask", "critical_rm", "user_interaction", "bash_parse_error", "hook_ask"}

# METADATA
# title: decision
# description: The permission decision for one tool call.
# entrypoint: true
default decision := {
	"allow": false, "behavior": "deny", "reason": "no step of the policy decided",
	"rule": "", "source": "policy", "step": "default", "route": "", "trace": [],
}

decision := _finish(_result)

_hook := object.get(input, "hook", null)

_result := {"step": "hook_deny", "behavior": "deny", "reason": _hook_reason("a PreToolUse hook denied the call"), "source": "hook"} if {
	_hook.decision == "deny"
} else := {"step": "safety_deny", "behavior": "deny", "reason": sprintf("reading %s never ends or blocks; denied in every mode", [_first(safety.special_reads)]), "source": "safety"} if {
	count(safety.special_reads) > 0
} else := _rule_result("deny_rule", "deny", rules.deny_hit) if {
	rules.deny_hit
} else := {"step": "custom_deny", "behavior": "deny", "reason": _reasons(custom.deny), "source": "custom"} if {
	count(_custom("deny")) > 0
} else := {"step": "plan", "behavior": "deny", "reason": "plan mode: only read-only calls run", "source": "mode"} if {
	modes.plan_blocks
} else := _rule_result("ask_rule", "ask", rules.ask_hit) if {
	rules.ask_hit
} else := {"step": "custom_ask", "behavior": "ask", "reason": _reasons(custom.ask), "source": "custom"} if {
	count(_custom("ask")) > 0
} else := {"step": "critical_rm", "behavior": "ask", "reason": sprintf("rm of a critical path: %s", [_first(safety.critical_rm)]), "source": "safety"} if {
	count(safety.critical_rm) > 0
} else := {"step": "user_interaction", "behavior": "ask", "reason": "this tool needs a person to answer", "source": "safety"} if {
	safety.user_interaction
} else := {"step": "bash_parse_error", "behavior": "ask", "reason": "the command did not parse; it is never read-only and matches no allow rule", "source": "safety"} if {
	input.tool == "Bash"
	not rules.bash_parsed
} else := {"step": "hook_ask", "behavior": "ask", "reason": _hook_reason("a PreToolUse hook asked"), "source": "hook"} if {
	_hook.decision == "ask"
} else := {"step": "hook_allow", "behavior": "allow", "reason": _hook_reason("a PreToolUse hook allowed the call"), "source": "hook"} if {
	_hook.decision == "allow"
	count(safety.protected_writes) == 0
} else := {"step": "protected_path", "behavior": "ask", "reason": sprintf("write to a protected path: %s", [_first(safety.protected_writes)]), "source": "safety"} if {
	modes.mode != "bypassPermissions"
	count(safety.protected_writes) > 0
} else := _rule_result("allow_rule", "allow", rules.allow_hit) if {
	rules.allow_hit
} else := object.union({"step": "mode", "source": "mode"}, modes.fallback)

_rule_result(step, behavior, hit) := {
	"step": step, "behavior": behavior, "source": hit.source, "rule": hit.rule,
	"reason": sprintf("%s rule %s (%s)", [behavior, hit.rule, hit.source]),
}

_hook_reason(default_reason) := r if {
	r := _hook.reason
	r != ""
} else := default_reason

_custom(kind) := {x | some x in object.get(custom, kind, set())}

_reasons(set_) := concat("; ", sort([sprintf("%v", [x]) | some x in set_]))

_first(s) := sort([x | some x in s])[0]

_finish(r) := object.union(_base(r), {"allow": r.behavior == "allow", "behavior": r.behavior, "route": "", "trace": _trace(r.step)}) if {
	r.behavior != "ask"
}

_finish(r) := object.union(_base(r), {
	"allow": false, "behavior": a.behavior, "route": a.route,
	"reason": sprintf("%s; %s", [r.reason, a.reason]),
	"trace": array.concat(_trace(r.step), ["resolve"]),
}) if {
	r.behavior == "ask"
	a := modes.resolve(r.step in _never_auto)
}

_base(r) := {
	"reason": r.reason, "rule": object.get(r, "rule", ""), "source": r.source,
	"step": r.step, "mode": modes.mode,
}

_trace(step) := array.slice(steps, 0, i + 1) if {
	some i, s in steps
	s == step
}
