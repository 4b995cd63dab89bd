# The seven permission modes: the effective mode, what each allows when no rule decided, and
# where a left-over ask goes.
package sandboxd.modes

import data.sandboxd.safety
import rego.v1

# mode is the mode the call runs in. A mode the admin disabled, or one this policy does not
# know, falls back to default (the safe choice). Literal sets and no helper functions: this
# rule is on every decision's path.
mode := "default" if {
	input.mode == "bypassPermissions"
	input.rules.admin.disable_bypass == true
} else := "default" if {
	input.mode == "auto"
	input.rules.admin.disable_auto == true
} else := input.mode if {
	input.mode in {"default", "acceptEdits", "plan", "dontAsk", "bypassPermissions", "auto", "bubble"}
} else := "default"

_edit_tools := {"Edit", "Write", "MultiEdit", "NotebookEdit"}

# read_only: the call only reads. Bash: the classifier parsed it, found every command
# read-only and no path it names is written (the paths it reads are checked like any read).
# Other tools: the tool says so and no path is written.
read_only if {
	input.tool == "Bash"
	input.bash.parse_error == null
	input.bash.read_only == true
	count(input.write_paths) == 0
}

read_only if {
	input.tool != "Bash"
	input.read_only == true
	count(input.write_paths) == 0
}

# paths_unbounded: a Bash line reads or writes a path known only when it runs that may lie
# anywhere ($HOME/x, $(...), ~user, the names xargs reads). Whether it stays inside the
# session's directories is not known, so the modes never count it as inside them. A glob such
# as *.go is bounded by the directory it is in, and the line's other paths are checked.
paths_unbounded if input.bash.paths_unbounded == true

# accept_edit: what acceptEdits runs unasked: edits inside the session's directories, and
# Bash made of read-only commands and mkdir/touch/rm/rmdir/mv/cp/sed on paths inside them.
# Neither reads outside them: acceptEdits widens what default writes, never what it reads.
accept_edit if {
	input.tool in _edit_tools
	count(input.paths) > 0
	count(safety.outside_writes) == 0
	count(safety.outside_reads) == 0
}

accept_edit if {
	input.tool == "Bash"
	input.bash.parse_error == null

	# Not a line that is not read-only whatever its commands (x='a[$(cmd)]'; echo $((x))
	# runs cmd), nor one whose commands are known only when it runs.
	object.get(input.bash, "line_reason", "") == ""
	not input.bash.opaque == true
	count(safety.outside_writes) == 0
	count(safety.outside_reads) == 0
	not paths_unbounded
	not input.bash.redirects_incomplete == true
	not "outside_workspace_write" in object.get(input.bash, "risks", [])
	every sub in input.bash.subcommands {
		_accept_sub(sub)
	}
}

_file_commands := {"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"}

_accept_sub(sub) if sub.read_only == true

# A read-only command whose writes are its redirections (echo x > out.txt): the writes are
# among the paths, checked as any edit's.
_accept_sub(sub) if sub.redirect_only == true

_accept_sub(sub) if {
	is_array(sub.prefix)
	sub.prefix[0] in _file_commands
	_edits_only(sub)
	sub.exact_only != true
	every a in array.slice(sub.prefix, 1, count(sub.prefix)) {
		_arg_inside(a)
	}
}

# _edits_only: sed is an edit only when in-place editing is all that keeps it from being
# read-only; a script that runs programs (e), writes or reads other files (w, r) or comes from
# a file asks. The other file commands run nothing.
_edits_only(sub) if sub.prefix[0] != "sed"

_edits_only(sub) if sub.reason == "sed_in_place"

_arg_inside(a) if startswith(a, "-")

_arg_inside(a) if {
	not startswith(a, "-")
	sandboxd.path_within(sandboxd.abs_path(a, input.cwd, input.home), input.workdirs)
}

# fallback is the mode's answer when no rule, hook or check decided.
# Read-only comes first: every mode allows it, so the order against bypassPermissions does not
# change an outcome, and the most common call (a read-only command, no paths) stops here.
#
# An allow granted because the call only reads carries read_only: the call then runs with every
# mount read-only but its private /tmp, so a write the classifier missed fails in the kernel.
# bypassPermissions would allow the call anyway, so its read-only calls keep their writable dirs.
fallback := {"allow": true, "behavior": "allow", "read_only": true, "reason": "read-only call inside the session's directories"} if {
	read_only
	input.read_paths == []
	not paths_unbounded
	mode != "bypassPermissions"
} else := {"allow": true, "behavior": "allow", "reason": "bypassPermissions allows what no rule or check stopped"} if {
	mode == "bypassPermissions"
	not _fetched_past_proxy
	count(_written_past_kernel) == 0
} else := {"allow": false, "behavior": "ask", "reason": sprintf("the call writes %s, outside the session's directories, and the agent makes the write itself, outside any sandbox, where nothing keeps it read-only as in a confined call: no mode allows it", [_first_sorted(_written_past_kernel)])} if {
	mode == "bypassPermissions"
	count(_written_past_kernel) > 0
} else := {"allow": true, "behavior": "allow", "read_only": true, "reason": "read-only call inside the session's directories"} if {
	read_only
	count(safety.outside_reads) == 0
	not paths_unbounded
} else := {"allow": true, "behavior": "allow", "reason": "acceptEdits: edit inside the session's directories"} if {
	mode == "acceptEdits"
	accept_edit
} else := {"allow": false, "behavior": "ask", "reason": "a path the command reads is known only when it runs ($VAR, $(...), ~user, names xargs reads), so it may be outside the session's directories"} if {
	read_only
	paths_unbounded
} else := {"allow": false, "behavior": "ask", "reason": "read outside the session's directories"} if {
	read_only
} else := {"allow": true, "behavior": "allow", "reason": sprintf("%s is in network.allowed_domains (%s)", [input.domain, input.allowed_domain])} if {
	input.tool == "WebFetch"
	input.allowed_domain != ""
} else := {"allow": false, "behavior": "ask", "reason": "WebFetch reaches the network: it needs an allow rule (WebFetch(domain:host) or WebFetch(GET host/path)) or a person's approval"} if {
	input.tool == "WebFetch"
	not _fetched_past_proxy
} else := {"allow": false, "behavior": "ask", "reason": "WebFetch reaches the network, and the agent fetches this one itself, past sandboxd's proxy, so no mode allows it: it needs an allow rule (WebFetch(domain:host) or WebFetch(GET host/path)), network.allowed_domains or a person's approval"} if {
	input.tool == "WebFetch"
} else := {"allow": false, "behavior": "ask", "reason": "acceptEdits: write outside the session's directories"} if {
	mode == "acceptEdits"
	count(safety.outside_writes) > 0
} else := {"allow": false, "behavior": "ask", "reason": concat("", [mode, " mode: this call is not read-only"])}

# _written_past_kernel are the paths outside the session's directories a call its caller runs
# itself (an agent's, decided through its hook) writes: confined, only the session's
# directories (and a private /tmp, and the daemon's cache_dirs) are writable, so
# bypassPermissions does not allow them.
_written_past_kernel contains p if {
	input.unconfined == true
	some p in safety.outside_writes
	not _private_tmp(p)
}

_private_tmp(p) if sandboxd.path_within(p, ["/tmp", "/dev/null"])

_private_tmp(p) if sandboxd.path_within(p, object.get(input, "cache_dirs", []))

_first_sorted(s) := sort(s)[0]

# _fetched_past_proxy: a WebFetch its caller makes itself (an agent's, decided through its
# hook). The proxy, which refuses what no rule allows whatever the mode, is not on its way, so
# bypassPermissions does not allow it: a mode never opens the network.
_fetched_past_proxy if {
	input.tool == "WebFetch"
	input.unconfined == true
}

# plan_blocks: plan mode denies anything that is not read-only. WebFetch writes nothing here;
# it is not read-only for the modes only because the network needs a rule or a person, so plan
# mode leaves it to them. ExitPlanMode is the way out of plan mode, which a person approves
# (safety.user_interaction): denying it would leave an agent in plan mode for good.
plan_blocks if {
	mode == "plan"
	not read_only
	not input.tool in {"WebFetch", "ExitPlanMode"}
}

# resolve says where an ask goes in each mode. never_auto asks (ask rules, critical rm, ...)
# skip the classifier; bypassPermissions never asks, so an ask it cannot skip is a deny.
resolve(never_auto) := {"behavior": "deny", "route": "", "reason": "would require approval"} if {
	mode == "dontAsk"
} else := {"behavior": "deny", "route": "", "reason": "bypassPermissions never asks and this call needs approval"} if {
	mode == "bypassPermissions"
} else := {"behavior": "ask", "route": "parent", "reason": "bubble mode: ask the parent session"} if {
	mode == "bubble"
} else := {"behavior": "ask", "route": "user", "reason": "auto mode: needs a person, not the classifier"} if {
	mode == "auto"
	never_auto
} else := {"behavior": "ask", "route": "classifier", "reason": "auto mode: the classifier decides"} if {
	mode == "auto"
} else := {"behavior": "ask", "route": "user", "reason": "ask the user"}
