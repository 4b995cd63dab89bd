package sandboxd.safety_test

import data.sandboxd.fixtures_test as fx
import data.sandboxd.safety
import rego.v1

_special_cases := {
	"dev zero": [fx.read("/dev/zero")],
	"dev stdin via link": [{"requested": "/w/in", "resolved": "/dev/stdin", "access": "read", "special": ""}],
	"proc mem": [fx.read("/proc/42/mem")],
	"proc fd0": [fx.read("/proc/self/fd/0")],
	"fifo flagged": [{"requested": "/w/p", "resolved": "/w/p", "access": "read", "special": "fifo"}],
}

test_special_reads[name] if {
	some name, paths in _special_cases
	count(safety.special_reads) > 0 with input as fx.input_with({"tool": "Read", "paths": paths})
}

# A Bash command reads inside its own sandbox (its /proc, a private /dev, a timeout): these are
# decided like any other command, not refused as never-ending reads.
_bash_reads := {
	"urandom": ["/dev/urandom"],
	"dev zero": ["/dev/zero"],
	"proc status": ["/proc/self/status"],
	"cpuinfo": ["/proc/cpuinfo"],
	"proc mem": ["/proc/42/mem"],
}

test_bash_reads_not_special[name] if {
	some name, ps in _bash_reads
	paths := [{"requested": p, "resolved": p, "access": "read", "special": "proc"} | some p in ps]
	count(safety.special_reads) == 0 with input as fx.input_with({"tool": "Bash", "paths": paths})
}

test_special_write_not_read if {
	count(safety.special_reads) == 0 with input as fx.input_with({"paths": [fx.write("/dev/null")]})
}

_protected_cases := {
	"git dir": {"p": "/w/.git/config", "want": true},
	"config git": {"p": "/home/u/.config/git/ignore", "want": true},
	"bashrc": {"p": "/home/u/.bashrc", "want": true},
	"mcp json": {"p": "/w/.mcp.json", "want": true},
	"sandboxd": {"p": "/w/.sandboxd/settings.local.json", "want": true},
	"claude": {"p": "/w/.claude/settings.json", "want": true},
	"claude worktrees": {"p": "/w/.claude/worktrees/x/a.go", "want": false},
	"github dir": {"p": "/w/.github/workflows/ci.yml", "want": false},
	"plain": {"p": "/w/src/main.go", "want": false},
	"config other": {"p": "/home/u/.config/htop/htoprc", "want": false},
	"nvim config": {"p": "/home/u/.config/nvim/init.lua", "want": true},
	"ssh authorized_keys2": {"p": "/home/u/.ssh/authorized_keys2", "want": true},
	"inputrc": {"p": "/home/u/.inputrc", "want": true},
	"python user site": {"p": "/home/u/.local/lib/python3.13/site-packages/x.pth", "want": true},
	"local share other": {"p": "/home/u/.local/share/x/y", "want": false},
	"user sandboxd settings": {"p": "/home/u/.config/sandboxd/settings.json", "want": true},
	"sbctl hook state": {"p": "/home/u/.cache/sandboxd/hook/0123.root", "want": true},
	"hg repo config": {"p": "/w/.hg/hgrc", "want": true},
	"hg shared path": {"p": "/w/.hg/sharedpath", "want": true},
	"hg store": {"p": "/w/.hg/store/data/x.i", "want": false},
	"jj repo config": {"p": "/w/.jj/repo/config.toml", "want": true},
	"jj op store": {"p": "/w/.jj/repo/op_store/x", "want": false},
	"hg user config": {"p": "/home/u/.hgrc", "want": true},
	"jj user config": {"p": "/home/u/.config/jj/config.toml", "want": true},
	"sbctl hook state in the runtime dir": {"p": "/run/user/1000/sandboxd/hook/0123.session", "want": true},
	"other runtime files": {"p": "/run/user/1000/other.sock", "want": false},
	"other caches": {"p": "/home/u/.cache/pip/x", "want": false},
	"the cache dir holding the hook state": {"p": "/home/u/.cache", "want": true},
	"the cache dir, trailing slash": {"p": "/home/u/.cache/", "want": true},
	"the cache dir, doubled slash": {"p": "/home/u//.cache", "want": true},
	"a project's cache dir": {"p": "/home/u/w/node_modules/.cache", "want": false},
	"a project's config dir": {"p": "/w/.config/", "want": false},
	"a project's local dir": {"p": "/home/u/w/.local", "want": false},
	"a project's nvm dir": {"p": "/w/.nvm", "want": false},
	"the config dir": {"p": "/home/u/.config", "want": true},
	"the systemd config dir": {"p": "/home/u/.config/systemd/", "want": true},
	"the local share dir": {"p": "/home/u/.local/share", "want": true},
	"the nvm dir": {"p": "/home/u/.nvm", "want": true},
	"another home's cache dir": {"p": "/home/u2/.cache", "want": false},
	"hg dir": {"p": "/w/.hg", "want": true},
	"jj repo dir": {"p": "/w/.jj/repo", "want": true},
	"mise dir": {"p": "/w/mise", "want": true},
	"systemd user unit": {"p": "/home/u/.config/systemd/user/x.service", "want": true},
	"autostart": {"p": "/home/u/.config/autostart/x.desktop", "want": true},
	"systemd other": {"p": "/home/u/.config/systemd/other", "want": false},
	"cursor mcp": {"p": "/w/.cursor/mcp.json", "want": true},
	"gemini settings": {"p": "/w/.gemini/settings.json", "want": true},
	"zed tasks": {"p": "/w/.zed/tasks.json", "want": true},
	"aider conf": {"p": "/w/.aider.conf.yml", "want": true},
	"opencode": {"p": "/w/opencode.json", "want": true},
	"cursorignore": {"p": "/w/.cursorignore", "want": false},
	"systemd drop-in": {"p": "/h/.local/share/systemd/user/dbus.socket.d/x.conf", "want": true},
	"systemd user.conf": {"p": "/h/.config/systemd/user.conf", "want": true},
	"rust toolchain": {"p": "/w/rust-toolchain.toml", "want": true},
	"lefthook local": {"p": "/w/lefthook-local.yml", "want": true},
	"ipython startup": {"p": "/h/.ipython/profile_default/startup/00.py", "want": true},
	"ipython history": {"p": "/h/.ipython/profile_default/history.sqlite", "want": false},
	"pdb start-up file": {"p": "/w/.pdbrc", "want": true},
	"ghci in the project": {"p": "/w/.ghci", "want": true},
	"sbt jvm options": {"p": "/w/.jvmopts", "want": true},
	"direnv settings": {"p": "/home/u/.config/direnv/direnv.toml", "want": true},
	"neovim plugin": {"p": "/home/u/.local/share/nvim/site/plugin/x.lua", "want": true},
	"gradle init script": {"p": "/home/u/.gradle/init.d/x.gradle", "want": true},
	"gradle cache": {"p": "/home/u/.gradle/caches/x.jar", "want": false},
	"the gradle dir": {"p": "/home/u/.gradle", "want": true},
	"a project's gradle dir": {"p": "/home/u/w/.gradle", "want": false},
	"kube config": {"p": "/home/u/.kube/config", "want": true},
	"kube cache": {"p": "/home/u/.kube/cache/x", "want": false},
	"aws credential process": {"p": "/home/u/.aws/config", "want": true},
	"jupyter config": {"p": "/home/u/.jupyter/jupyter_server_config.py", "want": true},
	"julia start-up": {"p": "/home/u/.julia/config/startup.jl", "want": true},
	"julia packages": {"p": "/home/u/.julia/packages/x", "want": false},
	"terraform overrides": {"p": "/home/u/.terraformrc", "want": true},
	"starship prompt": {"p": "/home/u/.config/starship.toml", "want": true},
	"vs code user tasks": {"p": "/home/u/.config/Code/User/tasks.json", "want": true},
	"vs code other state": {"p": "/home/u/.config/Code/User/globalStorage/x", "want": false},
	"a desktop launcher": {"p": "/home/u/.local/share/applications/x.desktop", "want": true},
	"a rustup toolchain": {"p": "/home/u/.rustup/toolchains/stable/bin/cargo", "want": true},
	"rustup downloads": {"p": "/home/u/.rustup/downloads/x", "want": false},
	"the rustup dir": {"p": "/home/u/.rustup", "want": true},
	"a vim plugin in the home": {"p": "/home/u/.vim/plugin/p.vim", "want": true},
	"vim's dir in the home": {"p": "/home/u/.vim", "want": true},
	"a program on the home's PATH": {"p": "/home/u/bin/ls", "want": true},
	"go install's dir": {"p": "/home/u//go/bin/x", "want": true},
	"a project's bin": {"p": "/home/u/w/bin/x", "want": false},
	"a project's .vim": {"p": "/home/u/w/.vim/x", "want": false},
	"a project's go/bin": {"p": "/home/u/w/go/bin/x", "want": false},
	"a binary beside": {"p": "/home/u/binx", "want": false},
	"gh's aliases": {"p": "/home/u/.config/gh/config.yml", "want": true},
	"pip's index": {"p": "/home/u/.pip/pip.conf", "want": true},
	"maven's mirrors": {"p": "/home/u/.m2/settings.xml", "want": true},
	"maven's repository": {"p": "/home/u/.m2/repository/x.jar", "want": false},
	"a session bus service": {"p": "/home/u/.local/share/dbus-1/services/x.service", "want": true},
	"zsh's completion dump": {"p": "/home/u/.zcompdump", "want": true},
	"oh-my-zsh's completion dump": {"p": "/home/u/.zcompdump-host-5.9", "want": true},
	"a compiled zshrc": {"p": "/home/u/.zshrc.zwc", "want": true},
}

_is_protected(p) if {
	safety.protected(p) with input as {"home": "/home/u"}
} else := false

# With no home known, a user's dir anywhere is taken for the home's.
test_dirs_above_without_a_home if {
	safety.protected("/w/node_modules/.cache") with input as {}
	safety.protected("/w/.config/") with input as {"home": "/"}
	not safety.protected("/w/node_modules/.cache") with input as {"home": "/home/u"}
	safety.protected("/home/u.x/.cache") with input as {"home": "/home/u.x/"}
	not safety.protected("/home/uax/.cache") with input as {"home": "/home/u.x"}
}

test_protected[name] if {
	some name, tc in _protected_cases
	_is_protected(tc.p) == tc.want
}

test_protected_writes_resolved if {
	paths := [{"requested": "/w/cfg", "resolved": "/w/.git/hooks/pre-commit", "access": "write", "special": ""}]
	safety.protected_writes == {"/w/.git/hooks/pre-commit"} with input as fx.input_with({"paths": paths})
}

_rm_cases := {
	"root": {"words": ["rm", "-rf", "/"], "want": true},
	"top level": {"words": ["rm", "-rf", "/etc"], "want": true},
	"root star": {"words": ["rm", "-rf", "/*"], "want": true},
	"home tilde": {"words": ["rm", "-rf", "~"], "want": true},
	"home var": {"words": ["rm", "-rf", "$HOME"], "want": true},
	"home slash": {"words": ["rm", "-rf", "/home/u/"], "want": true},
	"cwd dot": {"words": ["rm", "-rf", "."], "want": true},
	"cwd parent": {"words": ["rm", "-r", ".."], "want": true},
	"var glob": {"words": ["rm", "-rf", "\"$DIR\"/*"], "want": true},
	"home var quoted": {"words": ["rm", "-rf", "\"$HOME\""], "want": true},
	"home braces quoted": {"words": ["rm", "-rf", "\"${HOME}\"/"], "want": true},
	"home var checked": {"words": ["rm", "-rf", "${HOME:?}"], "want": true},
	"cwd var": {"words": ["rm", "-rf", "$PWD"], "want": true},
	"cwd substitution": {"words": ["rm", "-rf", "\"$(pwd)\""], "want": true},
	"tilde quoted": {"words": ["rm", "-rf", "\"~\""], "want": true},
	"bare var": {"words": ["rm", "-rf", "\"$DIR\""], "want": true},
	"bare var default": {"words": ["rm", "-rf", "${DIR:-/}"], "want": true},
	"var subdir": {"words": ["rm", "-rf", "\"$DIR/build\""], "want": false},
	"rm by path": {"words": ["/bin/rm", "-rf", "~"], "want": true},
	"rmdir by path": {"words": ["/usr/bin/rmdir", "/usr"], "want": true},
	"other user home": {"words": ["rm", "-rf", "~root"], "want": true},
	"own home by name": {"words": ["rm", "-rf", "~u/"], "want": true},
	"tilde plus": {"words": ["rm", "-rf", "~+"], "want": true},
	"braces root": {"words": ["rm", "-rf", "{/,x}"], "want": true},
	"braces home": {"words": ["rm", "-rf", "~/{.,x}"], "want": true},
	"braces subdirs": {"words": ["rm", "-rf", "src/{a,b}"], "want": false},
	"user home subdir": {"words": ["rm", "-rf", "~u/proj/build"], "want": false},
	"not rm by path": {"words": ["/bin/rmx", "/"], "want": false},
	"home subdir quoted": {"words": ["rm", "-rf", "\"$HOME/proj/build\""], "want": false},
	"rmdir usr": {"words": ["rmdir", "/usr"], "want": true},
	"subdir": {"words": ["rm", "-rf", "build"], "want": false},
	"deep abs": {"words": ["rm", "/w/a/b"], "want": false},
	"not rm": {"words": ["ls", "/"], "want": false},
	"file after dashes": {"words": ["rm", "-f", "--", "\"$f\""], "want": false},
	"file after dashes only": {"words": ["rm", "--", "$f"], "want": false},
	"lone quoted var, no recursion": {"words": ["rm", "-f", "\"$f\""], "want": false},
	"lone quoted var, nothing else": {"words": ["rm", "\"$f\""], "want": false},
	"two quoted vars": {"words": ["rm", "-f", "\"$f\"", "\"$g\""], "want": true},
	"lone unquoted var": {"words": ["rm", "-f", "$f"], "want": true},
	"lone quoted var, recursive": {"words": ["rm", "-r", "\"$f\""], "want": true},
	"recursive after dashes": {"words": ["rm", "-rf", "--", "\"$f\""], "want": true},
	"dir after dashes": {"words": ["rm", "-d", "--", "\"$f\""], "want": true},
	"long recursive after dashes": {"words": ["rm", "--recursive", "--", "\"$f\""], "want": true},
	"unknown option after dashes": {"words": ["rm", "$opts", "--", "\"$f\""], "want": true},
	"option known at run time": {"words": ["rm", "\"-f\"", "--", "\"$f\""], "want": true},
	"operand before dashes": {"words": ["rm", "\"$f\"", "--", "x"], "want": true},
	"rmdir after dashes": {"words": ["rmdir", "--", "\"$d\""], "want": true},
	"rm by path after dashes": {"words": ["/bin/rm", "--", "\"$d\""], "want": true},
}

_critical(words) if {
	count(safety.critical_rm) > 0 with input as fx.input_with({"cwd": "/w/proj", "bash": fx.bash([fx.sub(words, false)])})
} else := false

test_critical_rm[name] if {
	some name, tc in _rm_cases
	_critical(tc.words) == tc.want
}

test_critical_rm_unparsed_words if {
	s := object.union(fx.sub(["x"], false), {"match_words": ["rm", "-rf", "/"]})
	safety.critical_rm == {"rm -rf /"} with input as fx.input_with({"bash": fx.bash([s])})
}

# A line that runs what no word of it shows is critical as a whole, and says why: its text
# holds no rm (printf 'w' | ed -s f.txt).
test_critical_rm_opaque_says_why if {
	s := object.union(fx.sub(["ed", "-s", "f.txt"], false), {"opaque": true})
	b := object.union(fx.bash([s]), {"risks": ["critical_path_rm"]})
	safety.critical_rm == {"ed -s f.txt (it runs commands no word of the line shows, which may remove one)"} with input as fx.input_with({"bash": b})
}

test_outside_writes if {
	safety.outside_writes == {"/etc/x"} with input as fx.input_with({"paths": [fx.write("/etc/x"), fx.write("/w/a")]})
}

test_outside_reads if {
	safety.outside_reads == {"/etc/x"} with input as fx.input_with({"paths": [fx.read("/etc/x"), fx.read("/w/a")]})
}

test_user_interaction[name] if {
	some name, over in {
		"ask user question": {"tool": "AskUserQuestion"},
		"mcp meta": {"tool": "mcp__x__y", "requires_user_interaction": true},
	}
	safety.user_interaction with input as fx.input_with(over)
}

test_hidden_read_not_special if {
	paths := [{"requested": "/w/.env", "resolved": "/w/.env", "access": "read", "special": "hidden"}]
	safety.hidden_paths == {"/w/.env"} with input as fx.input_with({"paths": paths})
	count(safety.special_reads) == 0 with input as fx.input_with({"paths": paths})
}

test_hidden_write_denied if {
	paths := [{"requested": "/home/u/.ssh/x", "resolved": "/home/u/.ssh/x", "access": "write", "special": "hidden"}]
	safety.hidden_paths == {"/home/u/.ssh/x"} with input as fx.input_with({"paths": paths})
}
