# Rule matching: which deny, ask and allow rule, if any, hits this call. Rules are data
# (input.rules, grouped by behavior, tool, first word and path bucket, strongest source
# first). This package decides what each kind of rule is compared with (which words, which
# paths, link and target, which buckets per access); the sandboxd.*_hit builtins only scan a
# rule list in Go, because a Rego loop over hundreds of rules costs a microsecond per rule.
package sandboxd.rules

import rego.v1

import data.sandboxd.safety

# deny_hit is the first deny rule matching the call, strongest source first. Deny and ask
# rules fail closed: they see past every wrapper and env assignment (input.deny_words: each
# simple command's match_words, or the whitespace-split text when it did not parse), and match
# a path if either the requested path or its resolved target matches (input.path_subjects:
# each path with the rule buckets it meets, mirroring permission.RuleSet's layout: reads meet
# Read rules and the tool's own Glob/Grep rules, writes meet Edit-family rules and Read denies,
# an unknown access meets both).
deny_hit := _deny_ask.deny

# ask_hit is the first ask rule matching the call; failing one, for a Bash line reading a path
# known only at run time that may lie anywhere, the first Read deny (else ask) rule that only
# the decision holds outside the session's directories (sandboxd.unseen_read_hit), as an ask:
# the decision cannot see where the read goes, and the kernel does not hold that rule there.
ask_hit := h if {
	h := _deny_ask.ask
} else := h if {
	not _deny_ask.deny
	input.bash.paths_unbounded == true
	h := sandboxd.unseen_read_hit(input.rules, input.workdirs)
} else := h if {
	# A git read of paths the line does not show: a committed file's content is in
	# .git/objects, out of every mount's reach, so any Read rule may be one it meets.
	not _deny_ask.deny
	input.bash.git_objects_unseen == true
	h := _git_unseen_hit
}

# _git_unseen_hit is the first Read deny, else ask, path rule, with the reason a git read of
# unnamed paths meets it.
_git_unseen_hit := _git_unseen("deny", r) if {
	r := input.rules.deny.paths.read[0]
} else := _git_unseen("ask", r) if {
	r := input.rules.ask.paths.read[0]
}

_git_unseen(b, r) := object.union(r, {"reason": sprintf("git prints what a repository holds for paths the command does not name (-C, --git-dir, names on stdin, pathspec magic or a wildcard), where no mount hides a committed file, and %s rule %s (%s) may name one; name the paths plainly from the repository's dir", [b, r.rule, r.source])})

# Both scans in one builtin call: each call costs the evaluator more than the scan itself.
# input.bash goes along for its opaque flag: a command known only at run time (a command word
# built by expansion, a script the classifier cannot read) is taken to match every Bash deny
# and ask rule, as an ask (never auto; denied in dontAsk and bypassPermissions) when no rule
# matched outright.
#
# input.http ({method, path}) goes along for WebFetch(METHOD host/path) rules; null means a
# tunnel (HTTPS, CONNECT, SOCKS) whose method and path cannot be seen, where such a rule naming
# the host hits unless a host-level allow of a source at least as strong says the host may be
# reached by host alone.
_deny_ask := sandboxd.deny_ask_hits(input.rules, input.tool, input.input, input.deny_words, input.path_subjects, input.domain, input.bash, _http)

# _http defaults to null (a tunnel): custom callers and fixtures may omit the field.
default _http := null

_http := input.http

# tree_deny_hit and tree_ask_hit are, for a Grep its caller runs itself (input.unconfined: an
# agent's hook), the first deny or ask path rule that may match a file below the searched
# directory. sandboxd's own Grep meets such files hidden by the sandbox; the agent's rg reads
# them, so Read(~/.ssh/**) held Read of ~/.ssh/id_rsa but not a Grep of ~ for its contents.
tree_deny_hit := r if {
	input.unconfined == true
	input.tool == "Grep"
	r := sandboxd.below_hit(input.rules.deny.paths, input.path_subjects)
}

# tree_ask_hit: see tree_deny_hit; for a Bash command its caller runs itself, its reads of
# everything under a dir (grep -r, rg: input.tree_subjects) too. Its denies are refused before
# the policy (the executor's checkTreeUnconfined).
tree_ask_hit := r if {
	input.unconfined == true
	input.tool == "Grep"
	r := sandboxd.below_hit(input.rules.ask.paths, input.path_subjects)
} else := r if {
	input.unconfined == true
	input.tool == "Bash"
	r := sandboxd.below_hit(input.rules.ask.paths, object.get(input, "tree_subjects", []))
}

# bash_parsed holds when the classifier parsed the command (null bash: not parsed).
bash_parsed if input.bash.parse_error == null

# allow_hit is the allow rule that lets the call run. Unparseable Bash never matches one; a
# compound command needs every simple command allowed (read-only ones pass); a path tool needs
# every path, requested and resolved (link and target), allowed; a Bash redirect target needs
# an Edit allow as any write would. Conditions are inlined rather than helper rules: each rule
# the evaluator visits costs about as much as a dozen expressions.
allow_hit := r if {
	input.tool != "Bash"
	r := sandboxd.tool_hit(input.rules.allow, input.tool)
} else := r if {
	input.tool in {"Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit", "MultiEdit"}
	r := sandboxd.all_paths_hit(input.rules.allow.paths, input.path_subjects)
} else := r if {
	input.tool == "WebFetch"
	r := sandboxd.domain_hit(input.rules.allow.domains, input.domain)
} else := r if {
	# A method/path allow covers only requests it can see: never a tunnel (http null).
	input.tool == "WebFetch"
	r := sandboxd.web_hit(input.rules.allow.web, input.domain, _http)
} else := r if {
	input.tool == "Bash"
	input.bash.parse_error == null

	# A Bash allow rule covers the paths its command names; a redirect is a write of its own
	# that needs an Edit allow (redirect_subjects: the redirect targets only), and one whose
	# file is known only at run time (`> $PWD/x`) has none that could.
	not _redirects_incomplete
	sandboxd.paths_allowed(input.rules.allow.paths, _redirect_subjects)
	r := _allow_bash
}

_redirects_incomplete if input.bash.redirects_incomplete == true

_allow_bash := r if {
	r := sandboxd.tool_hit(input.rules.allow, "Bash")
} else := r if {
	# Allow rules see each non-read-only simple command past wrappers and known-safe env
	# assignments only (prefix; null when not static, which then matches nothing).
	# Commands of a nested script (bash -c 'STRING') are judged by deny and ask rules only;
	# the allow rule judges the command that runs them, as written. A line that runs what
	# none of its commands names (x='a[$(cmd)]'; npm test; echo $((x))) is no rule's, nor
	# one whose read-only commands read outside the session (npm test; cat ~/.ssh/id_rsa):
	# those the mode judges, as it would the read alone.
	not _hides_commands
	not _read_only_reads_outside
	r := sandboxd.all_words_hit(input.rules.allow.bash, [{"w": sub.prefix, "exact": sub.exact_only == true} |
		some sub in input.bash.subcommands
		sub.read_only != true
		not sub.nested
	])
} else := r if {
	# Read-only commands whose only effect is a redirect the Edit rules allow, in a line that
	# runs nothing else and reads nothing outside the session.
	not _hides_commands
	not _reads_outside
	every sub in input.bash.subcommands {
		_read_only_or_redirects(sub)
	}
	r := sandboxd.all_paths_hit(input.rules.allow.paths, _redirect_subjects)
}

# _hides_commands: the line runs something none of the commands an allow rule judges names:
# a read-only command made opaque by what the line evaluates (x='a[$(cmd)]' before $((x))),
# or a construct the classifier does not follow (a variable evaluated as arithmetic or as a
# name, a prompt expansion, a function). A command that is itself opaque (bash build.sh) is
# the rule's to judge as written. Line reasons that concern only whether a line may run
# unasked as read-only (git after a cd, a long line) are not that.
_hides_commands if {
	some sub in input.bash.subcommands
	sub.opaque == true
	sub.read_only == true
}

_hides_commands if not object.get(input.bash, "line_reason", "") in {"", "cd_git", "git_partial_clone", "too_long", "empty_command"}

# _read_only_reads_outside: some command no allow rule judges (read-only, not nested) is in a
# line that reads outside the session's directories, or where it cannot tell.
_read_only_reads_outside if {
	some sub in input.bash.subcommands
	sub.read_only == true
	not sub.nested
	_reads_outside
}

_reads_outside if count(safety.outside_reads) > 0

_reads_outside if input.bash.paths_unbounded == true

_read_only_or_redirects(sub) if sub.read_only == true

_read_only_or_redirects(sub) if sub.redirect_only == true

# _redirect_subjects defaults to none: custom callers and fixtures may omit the field.
default _redirect_subjects := []

_redirect_subjects := input.redirect_subjects
