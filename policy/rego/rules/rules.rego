# Rule matching: which deny, ask and allow rule, if any, hits this call. Rules are data
# (input.rules, grouped by behavior, tool, first word and path bucket, strongest source
# first). This package decides what each kind of rule is compared with (which words, which
# paths, link and target, which buckets per access); the sandboxd.*_hit builtins only scan a
# rule list in Go, because a Rego loop over hundreds of rules costs a microsecond per rule.
package sandboxd.rules

import rego.v1

_path_tools := {"Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit", "MultiEdit"}

# deny_hit is the first deny rule matching the call, strongest source first.
deny_hit := r if {
	r := sandboxd.any_hit(input.rules.deny, _deny_subject)
	r != null
}

# ask_hit is the first ask rule matching the call.
ask_hit := r if {
	r := sandboxd.any_hit(input.rules.ask, _deny_subject)
	r != null
}

# Deny and ask rules fail closed: they see past every wrapper and env assignment, match a path
# if either the requested path or its resolved target matches, and see the words of Bash text
# that did not parse.
_deny_subject := {
	"tool": input.tool,
	"params": input.input,
	"words": deny_words,
	"paths": input.path_subjects,
	"domain": input.domain,
}

# path_subjects pairs each requested and resolved path with the rule buckets it is compared
# with, precomputed by Go next to the bucket layout it mirrors (permission.RuleSet): reads meet
# Read rules (and Glob/Grep rules for those tools), writes meet Edit-family rules (Read denies
# are filed there too), an unknown access meets both.
path_subjects := input.path_subjects

# deny_words are the word lists deny and ask rules see. Go puts on each simple command its
# match_words: deny_prefix (past wrappers and every env assignment), else its static words,
# else its text split on spaces (and the list of them as input.bash.match_words); and on the
# input the command's whitespace-split words.
default deny_words := []

deny_words := input.bash.match_words if {
	input.tool == "Bash"
	bash_parsed
}

# Text that did not parse (or was not classified) is matched by its whitespace-split words.
deny_words := [input.command_words] if {
	input.tool == "Bash"
	not bash_parsed
}

# bash_parsed holds when the classifier parsed the command.
bash_parsed if {
	is_object(input.bash)
	input.bash.parse_error == null
}

# allow_hit is the allow rule that lets the call run. Unparseable Bash never matches one; a
# compound command needs every simple command allowed (read-only ones pass); a path tool needs
# every path, requested and resolved (link and target), allowed; a Bash redirect target needs
# an Edit allow as any write would.
allow_hit := r if {
	input.tool != "Bash"
	r := _allow_other
} else := r if {
	input.tool == "Bash"
	bash_parsed
	_redirects_allowed
	r := _allow_bash
}

_allow_other := r if {
	r := sandboxd.tool_hit(input.rules.allow, input.tool)
	r != null
} else := r if {
	input.tool in _path_tools
	r := sandboxd.all_paths_hit(input.rules.allow.paths, input.path_subjects)
	r != null
} else := r if {
	input.tool == "WebFetch"
	r := sandboxd.domain_hit(input.rules.allow.domains, input.domain)
	r != null
}

_redirects_allowed if count(input.paths) == 0

_redirects_allowed if sandboxd.all_paths_hit(input.rules.allow.paths, input.path_subjects) != null

_allow_bash := r if {
	r := sandboxd.tool_hit(input.rules.allow, "Bash")
	r != null
} else := r if {
	r := sandboxd.all_words_hit(input.rules.allow.bash, _allow_words)
	r != null
} else := r if {
	# Read-only commands whose only effect is a redirect the Edit rules allow.
	count(_allow_words) == 0
	r := sandboxd.all_paths_hit(input.rules.allow.paths, input.path_subjects)
	r != null
}

# Allow rules see each non-read-only simple command past wrappers and known-safe env
# assignments only (prefix; null when not static, which then matches nothing).
_allow_words := [{"w": sub.prefix, "exact": sub.exact_only == true} |
	some sub in input.bash.subcommands
	sub.read_only != true
]
