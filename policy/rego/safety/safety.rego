# Tool-specific safety checks that hold whatever the rules say: dangerous device reads (never
# approvable), writes to protected paths and critical-path rm (approvable by a person only).
package sandboxd.safety

import rego.v1

# special_reads are reads of device, FIFO and /proc paths that block or never end, by a tool
# the daemon's worker reads for (Read, Edit, Grep, ...); denied in every mode, bypassPermissions
# included. A Bash command reads them itself, inside its sandbox: its own /proc (its own pid
# namespace), a private /dev, its timeout and output budget. `head -c 16 /dev/urandom` or
# `cat /proc/cpuinfo` is an ordinary command there, decided like any other.
special_reads contains f.requested if {
	input.tool != "Bash"
	some f in input.paths
	f.access == "read"
	f.special != ""
	f.special != "hidden"
}

# hidden_paths are reads and writes of paths the sandbox hides from every child (the owner's
# worker saw the null device bound there): a Read deny rule or the daemon's deny_paths. A
# confined call finds no such file; one its caller runs itself (an agent's own Write or
# NotebookEdit, decided by a hook) would reach it, so it is denied, in every mode.
hidden_paths contains f.requested if {
	some f in input.paths
	f.special == "hidden"
}

special_reads contains p if {
	input.tool != "Bash"
	some p in input.read_paths
	p in {
		"/dev/zero", "/dev/random", "/dev/urandom", "/dev/full", "/dev/stdin", "/dev/stdout",
		"/dev/stderr", "/dev/tty", "/dev/console", "/dev/fd/0", "/dev/mem", "/dev/kmem",
		"/dev/port", "/proc/kcore", "/proc/self/fd/0",
	}
}

special_reads contains p if {
	input.tool != "Bash"
	some p in input.read_paths
	regex.match(`^/proc/[^/]+/(mem|fd/0)$`, p)
}

# One regexp instead of a loop over path segments: a segment loop costs the evaluator about a
# microsecond per segment. Directories: .git .config/git .vscode .idea .husky .cargo
# .devcontainer .yarn .mvn .claude (.sandboxd, .codex: ours and Codex's settings; .cursor,
# .gemini, .continue, .windsurf, .kiro, .roo, .zed, .helix: other agents' and editors' MCP
# servers, hooks and language servers, which they start unconfined; .mise, .config/mise: the
# hooks and env scripts mise runs on cd; systemd's user units and drop-ins in
# .local/share/systemd/user, gdb's config dir, IPython's startup scripts, the start-up dirs of
# GHCi, Julia, Jupyter, WezTerm, Gradle, sbt, direnv, neovim's plugins and podman; the user's
# sandboxd settings and `sbctl hook`'s state, systemd user units and autostart entries, fish's config, ~/.local/bin,
# ~/.ssh, what shells source, Python's user site and editors' and tmux's start-up files, which
# run or decide outside the sandbox); then the protected file names (COMPAT 3), and HEAD: with
# objects/ and refs/ beside it, git takes its dir for a repository and runs what ./config
# names when the user runs git there. ~/bin, ~/go/bin and ~/.vim are the home's alone (a
# project's bin/ is no start-up file): see the rule for them below.
_protected_re := `(^|/)(\.git|\.config/git|\.config/hg|\.config/jj|\.config/sandboxd|\.cache/sandboxd|\.config/systemd/user|\.config/autostart|\.config/fish|\.local/bin|\.ssh|\.bashrc\.d|\.local/share/bash-completion|\.config/zsh|\.oh-my-zsh|\.config/environment\.d|\.local/lib|\.config/nvim|\.emacs\.d|\.config/tmux|\.vscode|\.idea|\.husky|\.cargo|\.devcontainer|\.yarn|\.mvn|\.claude|\.sandboxd|\.codex|\.cursor|\.gemini|\.continue|\.windsurf|\.kiro|\.roo|\.zed|\.helix|\.mise|\.config/mise|\.local/share/systemd/user|\.config/systemd/user\.conf\.d|\.config/gdb|\.ipython/profile_default/startup|\.config/ghc|\.julia/config|\.jupyter|\.config/wezterm|\.gradle/init\.d|\.sbt/1\.0/plugins|\.config/direnv|\.local/share/nvim|\.config/containers|\.terraform\.d|\.config/kitty|\.config/alacritty|\.config/nushell|\.config/powershell|\.config/helix|\.local/share/applications|\.rustup/toolchains|\.nvm/versions|\.docker/cli-plugins|\.vscode-server|\.config/Cursor/User|\.config/zed|\.config/opencode|\.config/emacs|\.config/ghostty|\.config/foot|\.local/share/dbus-1/services|\.config/i3|\.config/sway|\.config/hypr|\.config/plasma-workspace/env|\.config/autostart-scripts|\.config/openbox|\.config/pipewire|\.config/mpv/scripts|\.config/ranger|\.config/qutebrowser|\.config/yt-dlp|\.config/gh|\.config/bat|\.config/mutt|\.config/xonsh|\.config/elvish|\.cgdb|\.config/pip|\.pip|\.config/vim|\.i3|\.sway|\.config/awesome|\.config/bspwm|\.xmonad|\.config/qtile|\.config/labwc|\.config/niri|\.config/VSCodium/User|\.config/Code - OSS/User|\.doom\.d|\.config/wget|\.config/uv|\.config/conda)(/|$)|(^|/)(\.gitconfig|\.gitmodules|\.hgrc|\.hg/hgrc|\.hg/hgrc-not-shared|\.hg/sharedpath|\.jjconfig\.toml|\.jj/repo/config\.toml|\.bashrc|\.bash_profile|\.bash_login|\.bash_aliases|\.bash_logout|\.zshrc|\.zprofile|\.zshenv|\.zlogin|\.zlogout|\.profile|\.pam_environment|\.bash_completion|\.inputrc|\.nvm/nvm\.sh|\.vimrc|\.emacs|\.tmux\.conf|\.xprofile|\.xsessionrc|\.envrc|\.npmrc|\.yarnrc|\.yarnrc\.yml|\.pnp\.cjs|\.pnp\.loader\.mjs|\.pnpmfile\.cjs|bunfig\.toml|\.bunfig\.toml|\.bazelrc|\.bazelversion|\.bazeliskrc|\.pre-commit-config\.yaml|lefthook\.yml|lefthook\.yaml|\.lefthook\.yml|\.lefthook\.yaml|gradle-wrapper\.properties|maven-wrapper\.properties|\.devcontainer\.json|\.ripgreprc|pyrightconfig\.json|\.mcp\.json|\.claude\.json|\.aider\.conf\.yml|opencode\.json|opencode\.jsonc|mise\.toml|\.mise\.toml|mise\.local\.toml|\.mise\.local\.toml|mise/config\.toml|\.config/mise\.toml|\.config/systemd/user\.conf|\.xinitrc|\.xsession|\.gdbinit|\.psqlrc|\.sqliterc|\.ipython/profile_default/ipython_config\.py|\.Rprofile|\.Renviron|\.irbrc|\.pryrc|\.exrc|\.nvimrc|\.nvim\.lua|\.lessfilter|\.lesskey|\.config/lesskey|\.wgetrc|\.my\.cnf|\.mailcap|rust-toolchain\.toml|rust-toolchain|lefthook-local\.yml|lefthook-local\.yaml|\.lefthook-local\.yml|\.lefthook-local\.yaml|\.pdbrc|\.lldbinit|\.ghci|\.ghc/ghci\.conf|\.iex\.exs|\.erlang|\.octaverc|\.jvmopts|\.sbtopts|\.ipython/profile_default/ipython_kernel_config\.py|\.screenrc|\.wezterm\.lua|\.mavenrc|\.gradle/init\.gradle|\.gradle/init\.gradle\.kts|\.gradle/gradle\.properties|\.sbt/1\.0/global\.sbt|\.kube/config|\.aws/config|\.gnupg/gpg-agent\.conf|\.terraformrc|\.config/starship\.toml|\.config/Code/User/settings\.json|\.config/Code/User/tasks\.json|\.config/mimeapps\.list|\.rustup/settings\.toml|_vimrc|_exrc|\.gvimrc|\.perldb|\.pylintrc|pylintrc|\.pylintrc\.toml|pylintrc\.toml|\.docker/config\.json|\.config/pylintrc|\.manpath|\.config/go/env|\.selected_editor|\.config/user-dirs\.dirs|\.emacs\.el|\.zcompdump[^/]*|\.zshrc\.zwc|\.zshenv\.zwc|\.zprofile\.zwc|\.zlogin\.zwc|\.zlogout\.zwc|\.alacritty\.toml|\.gnomerc|\.Xclients|\.xinputrc|\.gitk|\.config/git/gitk|\.muttrc|\.xonshrc|\.tclshrc|\.guile|\.sbclrc|\.ocamlinit|\.racketrc|\.radare2rc|\.rizinrc|\.npm-init\.js|\.ansible\.cfg|\.m2/settings\.xml|\.condarc|\.curlrc|\.spacemacs|\.conda/condarc|\.m2/extensions\.xml|\.lein/profiles\.clj|HEAD)$`

# protected_writes are written paths (requested or resolved) under a protected directory or
# naming a protected file (COMPAT 3). They ask even where edits are otherwise allowed.
protected_writes contains p if {
	some p in input.write_paths
	protected(p)
}

# A written path where git's configs take hooks, config or a program from, one the shells'
# start-up files source, run or put on PATH, or one the agents' settings run as a hook, helper
# or MCP server (the daemon marks it: a project's .githooks, an included ~/.gitconfig.local, a
# ~/proj/env.sh that ~/.bashrc sources, a ./tools/check.sh hook) is protected as .git/hooks is.
protected_writes contains f.requested if {
	some f in input.paths
	f.access == "write"
	f.special in {"git_named", "shell_named", "agent_named"}
}

# protected holds for a path inside a protected directory or naming a protected file;
# .claude/worktrees is where Claude keeps worktrees and is not protected.
protected(p) if {
	regex.match(_protected_re, p)
	not _only_worktree(p)
}

# A directory that holds protected ones is protected itself as a whole: removing or moving
# ~/.config (rm -rf, mv, find -delete) takes ~/.config/sandboxd/settings.json, the user's own
# rules, and git's and systemd's config with it; moving ~/.cache and putting another in its
# place swaps the hook's state under ~/.cache/sandboxd. Each is a dir above a protected path
# of more than one segment in the list above. Paths below it are judged by the rule above.
# A repository's (.hg, .jj, mise) anywhere; the user's (.config, .local, .cache, .nvm, .gradle, .kube, …) in the
# home only, where the shells, git and sbctl read them (as the sandbox protects them): a
# project's node_modules/.cache is a build's, and removing it asks nothing.
protected(p) if regex.match(`(^|/)(\.hg|\.jj|\.jj/repo|mise)/*$`, p)

# The home's program dirs, which a login puts on PATH (Debian's .profile puts ~/bin first; go
# install fills ~/go/bin), and vim's, whose plugin/ and ftplugin/ scripts vim runs at every
# start. Only the home's: a project's bin/ is its own. The kernel keeps each read-only where it
# exists, and moves aside one a Bash call made; a file tool's write, and the agent's own when a
# hook decides, have only this check.
protected(p) if regex.match(concat("", [_home_prefix_re, `(bin|go/+bin|\.vim)(/|$)`]), p)

protected(p) if regex.match(concat("", [_home_prefix_re, `(\.config|\.config/+systemd|\.local|\.local/+share|\.nvm|\.cache|\.ipython|\.ipython/+profile_default|\.ghc|\.julia|\.gradle|\.sbt|\.sbt/+1\.0|\.kube|\.aws|\.gnupg|\.rustup)/*$`]), p)

# The home as a regex prefix; unknown (or /), any dir stands for it: fail closed.
_home_prefix_re := `(^|/)` if {
	trim_right(object.get(input, "home", ""), "/") == ""
} else := concat("", ["^", regex.replace(trim_right(input.home, "/"), `[][\\.*+?(){}|^$]`, `\$0`), "/+"])

# `sbctl hook`'s state in the user's runtime dir (its fallback, ~/.cache/sandboxd, is in the
# list above): which session and root an agent's calls are decided in. Hidden from every call
# by the sandbox; this keeps the agent's own Write tool from replacing it unasked.
protected(p) if regex.match(`^/run/user/[0-9]+/sandboxd(/|$)`, p)

_only_worktree(p) if {
	regex.match(`(^|/)\.claude/worktrees(/|$)`, p)
	not regex.match(_protected_re, regex.replace(p, `(^|/)\.claude/worktrees(/|$)`, "/"))
}

# critical_rm lists rm/rmdir commands aimed at /, a top-level directory, the home directory,
# the cwd or one of its ancestors, or a glob under a variable. No rule or hook allow approves
# them; only a person can.
critical_rm contains concat(" ", words) if {
	some words in input.bash.match_words
	rm_word(words[0])
	some i, arg in words
	i > 0
	not startswith(arg, "-")
	not _file_operand(words, i)
	_critical_target(arg)
}

# _file_operand holds for an operand of an rm that removes no directory: after --, so no
# expansion of it is an option, and every word before the -- one of rm's options that leave
# directories alone, as written. rm -f -- "$f" removes one file, whatever $f holds; with -r, -d
# or a word known only when it runs ($opts) it may remove the home.
_file_operand(words, i) if {
	words[0] == "rm"
	some j, dashes in words
	dashes == "--"
	j < i
	every w in array.slice(words, 1, j) {
		_file_rm_option(w)
	}
}

# And a lone double-quoted operand of an rm whose options, as written, remove no directory:
# rm -f "$f" removes one file at most. Were "$f" an option, no other word names a target.
_file_operand(words, i) if {
	words[0] == "rm"
	startswith(words[i], "\"")
	every w in array.slice(words, 1, count(words)) {
		_file_rm_word(w)
	}
	count([w | some w in array.slice(words, 1, count(words)); not startswith(w, "-")]) == 1
}

_file_rm_word(w) if _file_rm_option(w)

_file_rm_word(w) if not startswith(w, "-")

_file_rm_option(w) if regex.match(`^-[fiIv]+$`, w)

_file_rm_option(w) if w in {"--force", "--interactive", "--verbose", "--one-file-system", "--preserve-root"}

# The classifier's own check follows the line's cd, which the words alone do not show:
# cd / && rm -rf usr removes /usr. It also knows find's grammar: find ~ -delete is rm -rf ~.
critical_rm contains concat(" ", words) if {
	"critical_path_rm" in input.bash.risks
	some words in input.bash.match_words
	removes_word(words[0])
}

# A line that runs what no word of it shows (eval "$x", /proc/self/exe -c, hash -p), which the
# classifier judged as it may run: its commands given rm's flags as rm, its texts as scripts.
critical_rm contains sprintf("%s (it runs commands no word of the line shows, which may remove one)", [sub.text]) if {
	"critical_path_rm" in input.bash.risks
	some sub in input.bash.subcommands
	sub.opaque
}

# rm_word holds for a command word that runs rm or rmdir, by name or by path: /bin/rm -rf ~
# is rm -rf ~.
rm_word(w) if w in {"rm", "rmdir"}

rm_word(w) if endswith(w, "/rm")

rm_word(w) if endswith(w, "/rmdir")

# removes_line holds for a Bash line that may remove files: a command of it is rm, rmdir or
# find, or one is known only when it runs.
removes_line if {
	some words in input.bash.match_words
	removes_word(words[0])
}

removes_line if {
	some sub in input.bash.subcommands
	sub.opaque
}

# removes_word holds for rm_word and for find, whose -delete and -exec rm remove what it finds.
removes_word(w) if rm_word(w)

removes_word(w) if w == "find"

# A command word known only when it runs ($x, /bin/r[m]) may be rm: the classifier judged its
# targets as rm's.
removes_word(w) if regex.match("[$`*?\\[]", w)

removes_word(w) if endswith(w, "/find")

_critical_target(arg) if {
	contains(arg, "$")
	contains(arg, "*")
}

_critical_target(arg) if {
	p := sandboxd.abs_path(arg, input.cwd, input.home)
	_critical_path(p)
}

# A brace expansion is each of its words: rm -rf {/,x} removes /. The first group is expanded.
_critical_target(arg) if {
	m := regex.find_all_string_submatch_n(`^([^{]*)\{([^{}]*,[^{}]*)\}(.*)$`, arg, 1)[0]
	some alt in split(m[2], ",")
	p := sandboxd.abs_path(concat("", [m[1], alt, m[3]]), input.cwd, input.home)
	_critical_path(p)
}

# ~user (a home directory), ~+ (the cwd) and ~- (the previous one) name a critical directory,
# or one known only when the command runs.
_critical_target(arg) if regex.match(`^["']*~[^/"']+["']*/*$`, arg)

# The home or the cwd followed by nothing but slashes, dots and expansions that may be empty
# ("$HOME/$NAME", ~/"$(cmd)", $PWD/./$X) is that directory, or an ancestor, when they are.
_critical_target(arg) if regex.match("^[\"']*(~|\\$HOME|\\$\\{HOME(:?[-?=][^}]*)?\\}|\\$PWD|\\$\\{PWD(:?[-?=][^}]*)?\\}|\\$\\(pwd\\)|`pwd`)([\"'/.]|\\$[A-Za-z_][A-Za-z0-9_]*|\\$\\{[^}]*\\}|\\$\\([^)]*\\)|`[^`]*`)*$", arg)

# A target that is one expansion and nothing else ("$DIR", "$DIR/", "$DIR/.", ${X:-/},
# "$(dirname "$0")", "$1", "$@") is known
# only when it runs, and may then be / or the home directory: it is judged as such.
_critical_target(arg) if regex.match("^[\"']*(\\$[A-Za-z_][A-Za-z0-9_]*|\\$[0-9@*]|\\$\\{[^}]*\\}|\\$\\(.*\\)|`.*`)[\"'/.]*$", arg)

_critical_path("/")

# A top-level directory (/usr, /etc, /home) or everything in / (/*).
_critical_path(p) if count(split(trim(p, "/"), "/")) == 1

_critical_path(p) if p == input.home

# The cwd itself or one of its ancestors.
_critical_path(p) if sandboxd.path_within(input.cwd, [p])

# outside_writes are written paths outside the session's directories (cwd and additional).
outside_writes contains p if {
	some p in input.write_paths
	not sandboxd.path_within(p, input.workdirs)
}

# outside_reads are read paths outside the session's directories: not read-only in the
# mode sense, so the mode asks.
outside_reads contains p if {
	some p in input.read_paths
	not sandboxd.path_within(p, input.workdirs)
}

# user_interaction holds for calls that only a person may approve: a question to them, the
# approval of a plan (main inlines the same conditions on its hot path).
user_interaction if input.requires_user_interaction == true

user_interaction if input.tool in {"AskUserQuestion", "ExitPlanMode"}
