# Rule matching: which deny, ask and allow rule, if any, hits this call. Rules are data
# (input.rules, grouped by behavior, tool and first word, strongest source first); the Go
# builtins sandboxd.*_match only compare patterns, the order and the semantics live here.
package sandboxd.rules

import rego.v1

_path_tools := {"Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit", "MultiEdit"}

# deny_hit is the first deny rule matching the call, strongest source first.
deny_hit := _hit("deny")

# ask_hit is the first ask rule matching the call.
ask_hit := _hit("ask")

# Deny and ask rules fail closed: they see past every wrapper and env assignment, they match a
# path if either the requested path or its resolved target matches, and they see the words of
# Bash text that did not parse.
_hit(b) := r if {
	r := input.rules[b].tools[input.tool][0]
} else := r if {
	r := sandboxd.glob_match(input.rules[b].globs, input.tool)
	r != null
} else := r if {
	r := sandboxd.param_match(object.get(input.rules[b].params, input.tool, []), input.input)
	r != null
} else := r if {
	r := _bash_hits(b)[0]
} else := r if {
	r := _path_hits(b)[0]
} else := r if {
	input.domain != ""
	r := sandboxd.domain_match(input.rules[b].domains, input.domain)
	r != null
}

_bash_hits(b) := [r |
	some w in deny_words
	r := sandboxd.bash_match(input.rules[b].bash, w, false)
	r != null
]

_path_hits(b) := [r |
	some f in input.paths
	some list in _path_lists(input.rules[b].paths, f.access)
	some p in [f.requested, f.resolved]
	r := sandboxd.path_match(list, p)
	r != null
]

_path_lists(paths, "write") := [object.get(paths, "write", [])]

_path_lists(paths, "read") := [object.get(paths, "read", []), object.get(paths, input.tool, [])]

# An access the policy does not know is checked as both.
_path_lists(paths, a) := [object.get(paths, "write", []), object.get(paths, "read", [])] if not a in {"read", "write"}

# deny_words are the word lists deny and ask rules see: each simple command past wrappers and
# every env assignment (deny_prefix), else its static words, else its text split on spaces.
deny_words contains w if {
	input.tool == "Bash"
	some sub in input.bash.subcommands
	w := _sub_words(sub)
}

# Text that did not parse (or was not classified) is matched by its whitespace-split words.
deny_words contains w if {
	input.tool == "Bash"
	not bash_parsed
	w := [x | some x in split(object.get(input.input, "command", ""), " "); x != ""]
	count(w) > 0
}

_sub_words(sub) := sub.deny_prefix if {
	is_array(sub.deny_prefix)
	count(sub.deny_prefix) > 0
} else := sub.argv if {
	is_array(sub.argv)
	count(sub.argv) > 0
} else := [x | some x in split(sub.text, " "); x != ""]

# bash_parsed holds when the classifier parsed the command.
bash_parsed if {
	is_object(input.bash)
	input.bash.parse_error == null
}

# allow_hit is the allow rule that lets the call run. Unparseable Bash never matches one; a
# compound command needs every simple command allowed (read-only ones pass), a path tool needs
# every path, requested and resolved (link and target), allowed.
allow_hit := r if {
	input.tool != "Bash"
	r := _allow_other
} else := r if {
	input.tool == "Bash"
	bash_parsed
	_paths_allowed
	r := _allow_bash
}

_allow_other := r if {
	r := input.rules.allow.tools[input.tool][0]
} else := r if {
	r := sandboxd.glob_match(input.rules.allow.globs, input.tool)
	r != null
} else := r if {
	input.tool in _path_tools
	count(input.paths) > 0
	_paths_allowed
	r := _path_allow_hits[0]
} else := r if {
	input.tool == "WebFetch"
	input.domain != ""
	r := sandboxd.domain_match(input.rules.allow.domains, input.domain)
	r != null
}

_allow_bash := r if {
	r := input.rules.allow.tools.Bash[0]
} else := r if {
	r := sandboxd.glob_match(input.rules.allow.globs, "Bash")
	r != null
} else := hits[0] if {
	subs := input.bash.subcommands
	count(subs) > 0
	results := [x | some sub in subs; x := _allow_sub(sub)]
	count(results) == count(subs)
	hits := [x | some x in results; x != "read_only"]
	count(hits) > 0
}

_allow_sub(sub) := r if {
	is_array(sub.prefix)
	count(sub.prefix) > 0
	r := sandboxd.bash_match(input.rules.allow.bash, sub.prefix, sub.exact_only == true)
	r != null
} else := "read_only" if sub.read_only == true

_path_allow_hits := [r |
	some f in input.paths
	some p in [f.requested, f.resolved]
	r := _allow_path(f.access, p)
]

# _paths_allowed: every path fact, requested and resolved, is covered by an allow rule.
_paths_allowed if count(_path_allow_hits) == 2 * count(input.paths)

_allow_path("read", p) := r if {
	r := sandboxd.path_match(input.rules.allow.paths.read, p)
	r != null
} else := r if {
	r := sandboxd.path_match(object.get(input.rules.allow.paths, input.tool, []), p)
	r != null
}

_allow_path("write", p) := r if {
	r := sandboxd.path_match(input.rules.allow.paths.write, p)
	r != null
}
