package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
)

// ProtectedInDir are the paths, relative to each writable dir, that another program of the
// user later runs as code or trusts as configuration outside the sandbox: git's config, hooks
// and attributes (git runs core.fsmonitor, hooks and filters on the user's next command), the
// agents' and editors' settings (.sandboxd, .claude, .mcp.json, .vscode tasks, .idea), direnv's
// .envrc and husky's hooks. Each one that exists is mounted read-only in every child that has
// the dir writable, and each dir on the way to it is made a mount point so it cannot be renamed
// away and replaced.
var ProtectedInDir = []string{
	".git/config", ".git/hooks", ".git/info/attributes", ".gitmodules",
	// git reads its config from the dir .git/commondir names, and .git/config.worktree as
	// config where extensions.worktreeConfig is on (sparse-checkout turns it on).
	".git/commondir", ".git/config.worktree",
	".sandboxd", ".claude", ".codex", ".mcp.json", ".claude.json", ".vscode", ".idea", ".devcontainer", ".devcontainer.json",
	// Other agents' and editors' project settings: the MCP servers, hooks, tasks and language
	// servers they start, unconfined, when the user next opens the project with them.
	".cursor", ".gemini", ".continue", ".windsurf", ".kiro", ".roo", ".zed", ".helix", ".aider.conf.yml",
	"opencode.json", "opencode.jsonc",
	".envrc", ".husky",
	// What the user's git commit (pre-commit, lefthook) and package managers run or load on
	// any command: npm's node-options and script-shell, yarn's yarnPath and plugins, pnpm's
	// hooks, bun's preloads, cargo's rustc-wrapper, the build wrappers' download URLs. Not
	// the files those tools write as they work (.yarn/cache, .pnp.cjs), which stay writable.
	".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
	"lefthook-local.yml", "lefthook-local.yaml", ".lefthook-local.yml", ".lefthook-local.yaml",
	// rustup runs the toolchain a project's rust-toolchain file names (its path key: any
	// dir's cargo and rustc); R (.Renviron may point R_PROFILE_USER at any file), irb, pry, gdb and vim/neovim (with exrc) run the project's
	// start-up file in the dir they start in.
	"rust-toolchain.toml", "rust-toolchain", ".Rprofile", ".Renviron", ".irbrc", ".pryrc", ".gdbinit", ".exrc", ".nvimrc", ".nvim.lua",
	// vim's exrc reads these spellings too, gvim its .gvimrc.
	".vimrc", "_vimrc", "_exrc", ".gvimrc",
	// So do pdb, lldb, GHCi, IEx, Erlang, Octave and perl -d; sbt's launcher takes JVM options
	// (-javaagent) from the dir's .jvmopts and .sbtopts; pylint runs a pylintrc's init-hook.
	".pdbrc", ".lldbinit", ".ghci", ".iex.exs", ".erlang", ".octaverc", ".jvmopts", ".sbtopts", ".perldb",
	".pylintrc", "pylintrc", ".pylintrc.toml", "pylintrc.toml",
	".npmrc", ".yarnrc", ".yarnrc.yml", ".yarn/releases", ".yarn/plugins", ".pnpmfile.cjs", "bunfig.toml", ".bunfig.toml",
	".cargo/config.toml", ".cargo/config", ".bazelrc", ".bazelversion", ".bazeliskrc",
	"gradle/wrapper/gradle-wrapper.properties", ".mvn/wrapper/maven-wrapper.properties", ".mvn/extensions.xml",
	".mvn/jvm.config", ".mvn/maven.config", ".ripgreprc", "pyrightconfig.json",
	// Mercurial runs its repository config's [hooks] on the user's next hg command (a shared
	// repository's config is where .hg/sharedpath points); jj its repository config's
	// commands (ui.pager, diff and merge tools, fix.tools). Not their stores, which they write
	// as they work.
	".hg/hgrc", ".hg/hgrc-not-shared", ".hg/sharedpath", ".jj/repo/config.toml",
	// mise runs a config's hooks and sourced env scripts on cd, once the user trusted its path.
	"mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".mise", "mise/config.toml",
	".config/mise.toml", ".config/mise",
	// With objects/ and refs/ beside it, git takes the dir for a bare repository, whose
	// ./config (core.worktree, core.fsmonitor) runs where no .git is found first.
	"HEAD",
	".git", // .git last: a worktree's .git file names its git dir
}

// ProtectedInHome are the same, relative to the owner's home when a writable dir holds it:
// the shells' start-up files and what they source (readline's key bindings, completions,
// zsh frameworks), the dirs a login puts first on PATH (Debian's .profile adds ~/bin and
// ~/.local/bin, and toolchains' bin dirs rc files add), Python's user site (a .pth file there runs at every python start), editors'
// and tmux's start-up files, git's, npm's and the user's sandboxd settings, what the user's
// systemd manager and desktop session start, ~/.ssh (authorized_keys and authorized_keys2
// let a key in, rc and config run commands), and the state `sbctl hook` keeps there when the
// user has no runtime dir (which session and root an agent's calls are decided in, and the
// commands its rewrites run: a call that could replace them could stall the hook, and an agent
// runs a call whose hook never answers, unconfined).
var ProtectedInHome = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
	".bashrc.d", ".bash_completion", ".local/share/bash-completion", ".inputrc",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".config/zsh", ".oh-my-zsh",
	".config/fish", ".pam_environment", ".config/environment.d",
	"bin", ".local/bin", ".local/lib", ".cargo/env", ".cargo/bin", ".nvm/nvm.sh", "go/bin",
	".vimrc", ".vim", ".config/nvim", ".emacs", ".emacs.d", ".tmux.conf", ".config/tmux",
	".gitconfig", ".config/git", ".hgrc", ".config/hg", ".jjconfig.toml", ".config/jj",
	".npmrc", ".config/sandboxd", ".config/systemd/user", ".config/autostart",
	// systemd's user manager also loads units and drop-ins from ~/.local/share/systemd/user
	// and its own settings (DefaultEnvironment=) from user.conf and user.conf.d.
	".local/share/systemd/user", ".config/systemd/user.conf", ".config/systemd/user.conf.d",
	".config/mise", ".xprofile", ".xsessionrc", ".xinitrc", ".xsession",
	// Other programs' start-up files that run commands: gdb's, psql's (\!), sqlite's
	// (.shell), IPython's startup scripts and config, R's, irb's and pry's, vi's, less's
	// input filter and key file (LESSOPEN), wget's (use_askpass), MySQL's client (pager),
	// and mailcap's viewers.
	".gdbinit", ".config/gdb", ".psqlrc", ".sqliterc", ".ipython/profile_default/startup",
	".ipython/profile_default/ipython_config.py", ".Rprofile", ".Renviron", ".irbrc", ".pryrc", ".exrc",
	".lessfilter", ".lesskey", ".config/lesskey", ".wgetrc", ".my.cnf", ".mailcap",
	// The same for pdb, lldb, GHCi, IEx, Erlang, Octave, Julia, Jupyter's servers and
	// kernels, screen and WezTerm; Maven's shell-sourced .mavenrc, Gradle's init scripts and
	// JVM options, sbt's global plugins; direnv's own rc and settings (which may trust every
	// .envrc); neovim's installed plugins; and the configs whose settings name a program the
	// tool runs: kubectl's exec credential plugins, the AWS CLI's credential_process, gpg's
	// pinentry, podman's helpers.
	".pdbrc", ".lldbinit", ".ghci", ".ghc/ghci.conf", ".config/ghc", ".iex.exs", ".erlang", ".octaverc",
	".julia/config", ".jupyter", ".ipython/profile_default/ipython_kernel_config.py", ".screenrc",
	".wezterm.lua", ".config/wezterm", ".mavenrc", ".gradle/init.d", ".gradle/init.gradle",
	".gradle/init.gradle.kts", ".gradle/gradle.properties", ".sbt/1.0/plugins", ".sbt/1.0/global.sbt",
	".config/direnv", ".local/share/nvim", ".kube/config", ".aws/config", ".gnupg/gpg-agent.conf",
	".config/containers",
	// Terraform's provider overrides and plugins, the prompt's and terminals' and other
	// shells' configs (starship's custom commands, kitty's and alacritty's shell, nushell's and
	// PowerShell's profiles), VS Code's user settings and tasks, helix's, the desktop's file
	// associations and launchers, rustup's toolchain override and its toolchains, and nvm's
	// installed node versions (their bin dirs are on the PATH nvm sets).
	".terraformrc", ".terraform.d", ".config/starship.toml", ".config/kitty", ".config/alacritty",
	".config/nushell", ".config/powershell", ".config/Code/User/settings.json", ".config/Code/User/tasks.json",
	".config/helix", ".config/mimeapps.list", ".local/share/applications", ".rustup/settings.toml",
	".rustup/toolchains", ".nvm/versions",
	// man's own config (DEFINE nroff runs a program), go's env file (GOFLAGS=-toolexec),
	// docker's CLI plugins (run by docker --help), what sensible-editor and xdg-user-dir
	// source, perl -d's and pylint's start-up files, gvim's, and the settings of the VS Code
	// server's extensions and of other editors and agents that run tasks and servers.
	".manpath", ".config/go/env", ".docker/cli-plugins", ".docker/config.json", ".selected_editor", ".config/user-dirs.dirs",
	".perldb", ".pylintrc", ".config/pylintrc", ".gvimrc", ".vscode-server", ".config/Cursor/User",
	".config/zed", ".config/opencode",
	// Siblings of the above: emacs's XDG init dir, zsh's completion dump (compinit sources it),
	// terminals' configs (their shell and commands), what desktop sessions and window managers
	// start (D-Bus session services' Exec=, i3's and sway's exec, plasma's env scripts,
	// openbox's autostart, pipewire's context.exec), applications that load scripts or run
	// commands (mpv, ranger, qutebrowser, yt-dlp's --exec, gh's ! aliases, bat's pager, gitk's
	// Tcl, mutt), other REPLs' start-up files, npm's init module, and the package sources pip,
	// maven, conda and curl take (a mirror that serves what every later install runs).
	".config/emacs", ".emacs.el", ".zcompdump", ".alacritty.toml",
	// zsh runs FILE.zwc, compiled, in place of a start-up FILE it is newer than.
	".zshrc.zwc", ".zshenv.zwc", ".zprofile.zwc", ".zlogin.zwc", ".zlogout.zwc", ".zcompdump.zwc", ".config/ghostty", ".config/foot",
	".local/share/dbus-1/services", ".config/i3", ".config/sway", ".config/hypr", ".config/plasma-workspace/env",
	".config/autostart-scripts", ".config/openbox", ".gnomerc", ".Xclients", ".xinputrc", ".config/pipewire",
	".config/mpv/scripts", ".config/ranger", ".config/qutebrowser", ".config/yt-dlp", ".config/gh", ".config/bat",
	".gitk", ".config/git/gitk", ".muttrc", ".config/mutt", ".xonshrc", ".config/xonsh", ".config/elvish", ".tclshrc",
	".guile", ".sbclrc", ".ocamlinit", ".racketrc", ".radare2rc", ".rizinrc", ".cgdb", ".npm-init.js", ".ansible.cfg",
	".config/pip", ".pip", ".m2/settings.xml", ".condarc", ".curlrc",
	// And theirs: vim's XDG dir, i3's and sway's older homes and other window managers',
	// VS Code's builds' user settings, emacs frameworks, wget2's rc, uv's, conda's and
	// maven's extension and Leiningen's profiles.
	".config/vim", ".i3", ".sway", ".config/awesome", ".config/bspwm", ".xmonad", ".config/qtile", ".config/labwc",
	".config/niri", ".config/VSCodium/User", ".config/Code - OSS/User", ".doom.d", ".spacemacs", ".config/wget",
	".config/uv", ".conda/condarc", ".config/conda", ".m2/extensions.xml", ".lein/profiles.clj",
	".ssh", ".cache/sandboxd",
}

// ProtectedCandidates lists the protected paths for writable dirs, a working directory and a
// home, absolute; which of them exist is the plan's to find out, as the caller. Besides each
// writable dir, every dir from the one holding cwd down to cwd is a root: git finds its
// repository from the cwd up, and the session's cwd may be a repository inside a writable dir.
//
// A writable dir may also lie inside a protected path (an added ~/.ssh, ~/.claude/commands or
// a repository's .git/hooks), or hold part of one that starts above it (an added .cargo holds
// .cargo/config.toml). The first is a candidate itself, protected whole; the second is a
// candidate as any other.
//
// homes are the owner's home as given and where it leads (a home that is a link into /srv):
// the first gets the home's own names, and each that a writable dir holds, a project's too.
func ProtectedCandidates(writable []string, cwd string, homes ...string) []string {
	home := ""
	if len(homes) > 0 {
		home = homes[0]
	}
	var out []string
	for _, d := range protectedRoots(writable, cwd) {
		for _, rel := range ProtectedInDir {
			out = append(out, filepath.Join(d, rel))
		}
	}
	hasHome := home != "" && home != "/"
	if hasHome {
		for _, rel := range ProtectedInHome {
			out = append(out, filepath.Join(home, rel))
		}
	}
	// A writable dir that holds the home (a session at / or /home) makes it as writable as a
	// project: what a project's dir protects (the agents' settings, hooks and MCP servers,
	// .vscode, a dotfiles repository's .git/config) the home protects too.
	for _, h := range homes {
		if h != "" && h != "/" && slices.ContainsFunc(writable, func(w string) bool { return under(h, w) && h != w }) {
			for _, rel := range ProtectedInDir {
				out = appendNew(out, filepath.Join(h, rel))
			}
		}
	}
	for _, w := range writable {
		// tail is w below d; compared with each rel in place, as the plan asks this of every
		// ancestor of every writable dir.
		for d := filepath.Dir(w); ; d = filepath.Dir(d) {
			tail := strings.TrimPrefix(w[len(d):], "/")
			for _, rel := range ProtectedInDir {
				if rel == ".git" {
					continue // a .git dir stays writable: its config and hooks are named apart
				}
				if under(rel, tail) {
					out = appendNew(out, filepath.Join(d, rel))
				} else if under(tail, rel) {
					out = appendNew(out, w)
				}
			}
			if d == "/" || d == "." {
				break
			}
		}
		for _, h := range homes {
			for _, rel := range ProtectedInHome {
				if h != "" && h != "/" && under(w, filepath.Join(h, rel)) {
					out = appendNew(out, w)
				}
			}
		}
	}
	return out
}

// appendNew appends p unless out holds it: the plan takes candidates to be distinct.
func appendNew(out []string, p string) []string {
	if slices.Contains(out, p) {
		return out
	}
	return append(out, p)
}

// protectedRoots are the writable dirs, every dir from the one holding cwd down to cwd, and
// the repository of a writable dir inside a .git dir (its submodules' config and hooks are
// patterns from there).
func protectedRoots(writable []string, cwd string) []string {
	roots := slices.Clone(writable)
	for _, w := range writable {
		if under(cwd, w) {
			for d := cwd; d != w && under(d, w); d = filepath.Dir(d) {
				roots = append(roots, d)
			}
		}
		if i := strings.Index(w+"/", "/.git/"); i >= 0 && !slices.Contains(roots, w[:max(i, 1)]) {
			roots = append(roots, w[:max(i, 1)])
		}
	}
	return roots
}

// ProtectedPatterns are the protected paths that need a pattern: each submodule's config,
// hooks and commondir, kept in the superproject's .git/modules (git status runs the
// submodules' fsmonitor and hooks too), and each linked worktree's commondir and
// config.worktree in .git/worktrees.
func ProtectedPatterns(writable []string, cwd string) []string {
	var out []string
	for _, d := range protectedRoots(writable, cwd) {
		// A submodule's git dir is .git/modules/NAME, its name of any number of segments
		// (vendor/foo), and its own submodules' are in its modules dir: at any depth. The
		// walk enters no module git dir but for its modules (modulePatterns' pruning).
		m := escapePattern(filepath.Join(d, ".git", "modules"))
		for _, name := range moduleProtected {
			out = append(out, m+"/**/"+name)
		}
		// A linked worktree's git dir: its commondir names where its config is.
		wt := escapePattern(filepath.Join(d, ".git", "worktrees"))
		out = append(out, wt+"/*/commondir", wt+"/*/config.worktree")
	}
	return out
}

// moduleProtected are what of a submodule's git dir runs code at the user's git command.
var moduleProtected = []string{"config", "hooks", "commondir", "config.worktree"}

// modulePatterns reports whether every pattern of a walk is one of ProtectedPatterns' for
// .git/modules: such a walk enters a module's git dir (a dir holding HEAD) only for its
// modules dir, never its objects, refs or logs, which may hold many thousands of entries.
func modulePatterns(pats []pathPattern) bool {
	for _, pp := range pats {
		if !strings.Contains(pp.pat, "/.git/modules/**/") {
			return false
		}
	}
	return len(pats) > 0
}

// escapePattern quotes the glob metacharacters of a literal path for a pattern.
func escapePattern(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// maxProtected bounds the read-only mounts of one call: each costs the child three syscalls.
const maxProtected = 256

// enclosingRepos are the .git and git configs of the repository each writable dir lies in,
// when it lies below the repository's top (a session opened in one package of a monorepo):
// that repository's config names hooks and programs inside the dir (core.hooksPath =
// app/githooks), taken relative to its top. Its own files lie outside the dir, where no call
// writes. Run as the caller.
func enclosingRepos(v *fsView, writable []string) []string {
	var out []string
	for _, w := range writable {
		for d := filepath.Dir(w); d != "/" && d != "."; d = filepath.Dir(d) {
			if _, err := v.lstat(filepath.Join(d, ".git")); err == nil {
				out = append(out, filepath.Join(d, ".git"), filepath.Join(d, ".git/config"), filepath.Join(d, ".git/config.worktree"))
				break
			}
		}
	}
	return out
}

// protectedPaths resolves the spec's protected paths and patterns as the caller and keeps the
// ones that exist inside a writable dir, outermost first, and each place al's table shows one at
// again inside a writable dir (a writable bind mount of the home shows ~/.bashrc again). A
// path whose real place lies outside every writable dir needs nothing: the call cannot write
// there anyway. One that another running call guards (busy) counts as missing: that call made
// it, and moves it aside. Run as the caller.
func protectedPaths(v *fsView, spec *Spec, writable []string, al *aliasLookup, busy guardLists, scans *linkScans) (out []string, missing []guarded, err error) {
	add := func(p string) {
		fi, err := v.lstat(p)
		if err != nil || (filepath.Base(p) == ".git" && fi.IsDir()) {
			return // a repository's .git dir stays writable; its config and hooks do not
		}
		// An alias is the same file, looked at no further: a pooled init's copy of an older
		// table may show it where the host's table no longer does (its mounts are optional).
		for _, q := range append([]string{p}, al.of(p)...) {
			// A writable dir itself may be one: protected whole (an Edit deny of all of it).
			if !slices.Contains(out, q) && slices.ContainsFunc(writable, func(w string) bool { return under(q, w) }) {
				out = append(out, q)
			}
		}
	}
	// A missing one is guarded where a call could make it: at its own place or any other
	// place the table shows its dir at.
	guard := func(c string) {
		if g, ok := guardable(v, c, writable); ok && !slices.Contains(missing, g) {
			missing = append(missing, g) // a candidate and where a link leads it may meet
		}
		for _, q := range al.of(c) {
			if g, ok := guardable(v, q, writable); ok && !slices.Contains(missing, g) {
				missing = append(missing, g)
			}
		}
	}
	// A literal pattern (an Edit deny naming one path) is a candidate like the others.
	candidates := slices.Clone(spec.ProtectedPaths)
	var patterns []string
	for _, pat := range spec.ProtectedPatterns {
		if lit, wild := literalPrefix(pat); wild {
			patterns = append(patterns, pat)
		} else {
			candidates = append(candidates, lit)
		}
	}
	clean := make([]string, 0, len(candidates))
	for _, p := range candidates {
		c, err := cleanAbs(p)
		if err != nil {
			return nil, nil, err
		}
		clean = append(clean, c)
	}
	clean = equivalentNames(clean)
	v.listDirsOf(clean)
	inClean := make(map[string]bool, len(clean))
	for _, c := range clean {
		inClean[c] = true
	}
	addClean := func(c string) {
		if !inClean[c] {
			inClean[c] = true
			clean = append(clean, c)
		}
	}
	// What git's configs among them name as hooks or config is theirs to protect too, and so is
	// what the shells' start-up files in the home source, run or put on PATH.
	home := envValue(spec.Env, "HOME")
	named, moved, err := shellNamedPaths(home, spec.UID, v.knownMissing)
	if err != nil {
		return nil, nil, err
	}
	shellGitConfigs, movedTools := movedKinds(moved)
	gitNamed, err := gitNamedPaths(append(slices.Clone(clean), enclosingRepos(v, writable)...), shellGitConfigs, home)
	if err != nil {
		return nil, nil, err
	}
	// The tools' configs the start-up files moved (KUBECONFIG), read as the home's are.
	toolsNamed, err := readToolConfigs(movedTools, home, spec.UID, nil)
	if err != nil {
		return nil, nil, err
	}
	named = append(named, toolsNamed...)
	for _, c := range gitNamed {
		addClean(c)
	}
	// So is what the agents' settings run (hooks, helpers, MCP servers). Only those in the home
	// (a dotfile may be a link to a writable dir) or a writable dir can be written: the
	// system's (/etc/bash_completion, /usr/bin/node) cost a look each for nothing.
	for _, toolNamed := range []func(string, uint32, func(string) bool) ([]string, error){sshNamedPaths, vimNamedPaths, rcNamedPaths, toolConfigNamedPaths} {
		more, err := toolNamed(home, spec.UID, v.knownMissing)
		if err != nil {
			return nil, nil, err
		}
		named = append(named, more...)
	}
	named = append(named, agentNamedPaths(clean, home, spec.UID, v.knownMissing)...)
	for _, c := range named {
		if under(c, home) || slices.ContainsFunc(writable, func(w string) bool { return under(c, w) }) {
			addClean(c)
		}
	}
	// A link inside a protected dir leads the user's tool to its target (a hook kept in the
	// repository: .git/hooks/pre-commit -> ../../scripts/pre-commit), which is protected too.
	for _, c := range slices.Clone(clean) {
		if filepath.Base(c) == ".git" {
			continue // its config and hooks are candidates of their own
		}
		if _, err := v.lstat(c); err != nil {
			continue // most do not exist, which the listings already tell
		}
		if fi, err := v.stat(c); err != nil || !fi.IsDir() {
			continue
		}
		// Where each leads as the kernel resolves it; each link of the user's on the way there
		// is held too.
		for _, t := range scans.targets(resolve(v, c), spec.UID) {
			r := resolve(v, t)
			if slices.ContainsFunc(writable, func(w string) bool { return under(r, w) }) {
				addClean(r)
			}
			if spec.MoveAsideCreated {
				missing = keptLinks(missing, linksOnTheWay(v, t, writable))
			}
		}
	}
	for _, c := range clean {
		// Most candidates do not exist: one lstat each. One that does is resolved (a dotfile
		// may be a link into a repository; a parent may be a link, as /home can be).
		_, err := v.lstat(c)
		// One another running call made is its to move aside, and this call's too: mounted
		// read-only here, it would leave the name free once that call moved it.
		made := spec.MoveAsideCreated && err == nil && busy != nil && (busy.has(c) || busy.has(resolve(v, c)))
		if err == nil {
			add(resolve(v, c))
			if spec.MoveAsideCreated {
				missing = keptLinks(missing, linksOnTheWay(v, c, writable))
			}
		}
		if err == nil && !made {
			continue
		} else if dir := v.ownDirInTheWay(c, spec.UID); dir != "" {
			return nil, nil, fmt.Errorf("%w: cannot tell whether %s exists, to keep it read-only: %s, yours, cannot be searched, so a call could chmod it and write there; make it searchable (chmod u+x)", ErrBadSpec, c, dir)
		} else if spec.MoveAsideCreated && (made || errors.Is(err, fs.ErrNotExist)) {
			n := len(missing)
			guard(c)
			// A link of the user's on the way (.mvn, ~/.config into a dotfiles repository)
			// leads their tools to another name, where the sweep must look too: it does not
			// follow links, and the user's own link stays.
			if r := resolve(v, c); r != c {
				guard(r)
			}
			if keeps(spec.KeepCreated, c) {
				for i := n; i < len(missing); i++ {
					missing[i].keep = true
				}
			}
		}
	}
	matches, err := expandPatterns(v, patterns, writable, spec.UID, patternWalk{tenant: spec.tenant()})
	matches = throughLinks(v, matches)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range matches {
		add(p)
	}
	if len(out) > maxProtected {
		return nil, nil, fmt.Errorf("%w: more than %d protected paths exist in the session's dirs; narrow the Edit deny rules", ErrBadSpec, maxProtected)
	}
	slices.Sort(out) // an ancestor before what lies below it
	return out, missing, nil
}

// keeps reports whether the approved paths kept name c itself (then a regular file made there
// stays: guarded.keep). One inside c does not keep c: a protected dir made for it (a new
// .claude for its settings.json) would keep whatever else the call put in it, out of the
// person's sight.
func keeps(kept []string, c string) bool {
	return slices.ContainsFunc(kept, func(k string) bool { return filepath.Clean(k) == c })
}

// keptLinks adds to guards each link of links as one the sweep keeps leading where it did
// (guarded.target: keepLink), as linksToHidden keeps those on the way to a named path: a link
// on the way to a git dir or a hook the plan found, removed or retargeted by a call, would
// leave where it led unprotected for the next call, to be trusted again once the user put the
// link back.
func keptLinks(guards, links []guarded) []guarded {
	for _, g := range links {
		if g.link, g.target = "", g.link; !slices.Contains(guards, g) {
			guards = append(guards, g)
		}
	}
	return guards
}

// linksOnTheWay returns each of the user's symlinks inside a writable dir that the kernel
// follows on the way to c, hop by hop: a link may lead to a dir holding another, or to another
// link (.envrc -> e1 -> real/envrc), and a `..` after a link leaves where the link led, not
// where its name lies (hooks/pre-push -> ../../x/../hook with x -> sub/dir is sub/hook). Each
// is a guarded path with what it says (guarded.link). Run as the caller.
func linksOnTheWay(v *fsView, c string, writable []string) []guarded {
	if !filepath.IsAbs(c) || filepath.Clean(c) != c {
		return linksFrom(v, "/", strings.Split(strings.TrimPrefix(c, "/"), "/"), writable)
	}
	// Along a clean c each step is a prefix of it, which costs no allocation, until a link
	// leads elsewhere: most named paths hold none (a plan asks this of a few hundred).
	for end := 0; end < len(c); {
		next := len(c)
		if i := strings.IndexByte(c[end+1:], '/'); i >= 0 {
			next = end + 1 + i
		}
		fi, err := v.lstat(c[:next])
		if err != nil {
			return nil // missing: nothing below it is reached
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			cur := c[:end]
			if cur == "" {
				cur = "/"
			}
			return linksFrom(v, cur, strings.Split(c[end+1:], "/"), writable)
		}
		end = next
	}
	return nil
}

// linksFrom is linksOnTheWay from the dir cur (clean), through the names todo.
func linksFrom(v *fsView, cur string, todo []string, writable []string) []guarded {
	var out []guarded
	for hops := 0; len(todo) > 0; {
		comp := todo[0]
		todo = todo[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		// cur is clean and comp one plain name: joined without Join's Clean.
		next := cur + "/" + comp
		if cur == "/" {
			next = "/" + comp
		}
		fi, err := v.lstat(next)
		if err != nil {
			return out // missing: nothing below it is reached
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		link, err := os.Readlink(next)
		if hops++; err != nil || link == "" || hops > 40 {
			return out
		}
		for _, w := range writable {
			if w != "/" && under(next, w) && next != w {
				if g := (guarded{root: w, rel: next[len(w)+1:], link: link}); !slices.Contains(out, g) {
					out = append(out, g)
				}
				break
			}
		}
		if filepath.IsAbs(link) {
			cur = "/"
		}
		todo = append(strings.Split(link, "/"), todo...)
	}
	return out
}

// protectMounts makes each protected path read-only, after the writable dirs were opened
// again: every dir between its writable dir and it first becomes a mount point (a writable
// bind onto itself), so `mv .git x && mkdir .git` or `mv ~/.config c` fails with EBUSY
// instead of putting a file of the agent's where the read-only one was; then the path itself
// is bound onto itself and made read-only, recursively (a file or a whole dir). The dirs on
// the way to each covered (hidden) path are pinned the same way: a call that could move a
// hidden file's dir (`mv secrets s2`) would leave it where the next call's rules do not name
// it, or deeper than a pattern's walk looks.
//
// WARNING: what keeps a writable dir's configuration files and hidden files out of the
// agent's reach; rerun as root after changing: go test -run 'TestProtected|TestHid' ./sandbox/
func protectMounts(protected, covered, writable []string) []mountOp {
	var ops []mountOp
	pinned := map[string]bool{}
	bind := func(p string) {
		ops = append(ops, cloneTreeOp(p, 0, false).optional().noFollow(), moveTreeOp(p, 0).optional().noFollow())
	}
	pinWay := func(p string) {
		for _, w := range writable {
			if !under(p, w) || p == w {
				continue
			}
			for _, d := range mkdirChain(w, p) {
				if !pinned[d] {
					pinned[d] = true
					bind(d)
				}
			}
		}
	}
	for _, p := range covered {
		pinWay(p)
	}
	for _, p := range protected {
		pinWay(p)
		pinned[p] = true
		bind(p)
		ops = append(ops, setattrOp(p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, 0, true).optional().noFollow())
	}
	return ops
}

// maxPatternWalk bounds the entries one call's pattern expansion visits. The walk goes as deep
// as the tree does: a match the walk missed would be one the call could read (or write), and
// a call could move one deeper before the next looks. A tree too large to walk refuses the
// call instead.
const maxPatternWalk = 50000

// maxPatternChecks bounds the pattern checks (each entry visited, once per pattern walked
// with it) of one expansion. The walk runs in the daemon, outside any user's cgroup, on every
// call: a thousand wildcard rules over a tree of 15 000 entries cost seconds of its CPU a call.
// A variable for tests.
var maxPatternChecks = 1_000_000

// maxPatternCPU bounds the CPU time one expansion's walk takes: a check's own cost grows with
// the pattern and the name (`*` then 4 000 `?` costs 4 ms against a long name), which no count
// of checks bounds. Measured on the walking thread, which asCaller keeps locked.
const maxPatternCPU = 300 * time.Millisecond

// walkShare is the daemon CPU one user's pattern walks (and index reads, gitlinkCache) may
// take together: a quarter of a CPU,
// and two seconds of it at once. The walks run in the daemon, outside the user's cgroup; a
// tree that takes each call's walk to maxPatternCPU would otherwise let one user keep the
// daemon's CPUs with calls refused one after another. A walk of 44 000 entries takes about
// 40 ms: six calls a second of such a session, or a batch of fifty at once. Past it a call is refused at once (rate_limited), and a running
// call's sweeps wait their turn; the sweep after a call, which must not miss what it made,
// always walks whole, pausing whenever its user owes: a call that made a tree of millions of
// entries under a thousand wildcard rules waits minutes for its result, and the daemon spends
// on it no more than its user's share.
var walkShare = newCPUShare(0.25, 2*time.Second)

// walkSlice is the CPU an unbounded walk takes between looks at its user's share; a
// variable for tests.
var walkSlice = 20 * time.Millisecond

// walkPause waits out what an unbounded walk owes; a variable for tests.
var walkPause = time.Sleep

// errWalkShare builds the refusal of a walk over walkShare.
func errWalkShare(wait time.Duration) error {
	return errcode.New(errcode.RateLimited, fmt.Errorf("the daemon's work for this user's calls (walks for path rules with wildcards, reads of large git indexes) has taken its share of the daemon's CPU (a quarter of a CPU); retry in %v, and name paths in the rules instead (Read(./.env)) or narrow the dirs they reach", wait.Round(10*time.Millisecond)))
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// expandPatterns lists the existing paths that match one of the absolute path-rule patterns
// (permission.MatchPath syntax), looked for inside roots, and in a pattern's literal start
// where that holds no root and lies in none (walkStarts). A pattern without wildcards is its own (unescaped) path. A matching dir is
// not descended: it is covered whole. Each walk start is walked once for all its patterns, and
// the commonest form, a name at any depth (Read(.env) is /**/.env), is matched on the entry's
// name alone: the walk runs on every call of a session with such a rule. It fails when the
// walk cannot be complete (more than maxPatternWalk entries, or a dir of the caller's it cannot
// read). Run as the caller, uid.
// patternWalk says how expandPatterns walks: openUp gives the caller's own unreadable dirs
// their bits back (the sweep's walk); followOut walks through a link to a dir outside the
// roots (hide patterns: what they name there is readable through the link; an Edit deny's
// match there is read-only anyway).
// unbounded lifts the walk's bounds (entries, checks, CPU): the sweep after a call, which
// must not miss what the call made because the call made the tree too big to walk.
type patternWalk struct {
	openUp, followOut, unbounded bool
	tenant                       uint32 // whose walkShare the walk takes (Spec.tenant)
}

func expandPatterns(v *fsView, patterns, roots []string, uid uint32, how patternWalk) ([]string, error) {
	if how.tenant == 0 {
		how.tenant = uid
	}
	var out []string
	walks := map[string][]pathPattern{}
	var order []string
	for _, pat := range patterns {
		prefix, wild := literalPrefix(pat)
		if !wild {
			if _, err := v.lstat(prefix); err == nil {
				out = append(out, prefix)
			}
			continue
		}
		starts := walkStarts(prefix, roots)
		if len(starts) == 0 && prefix != "/" {
			// A place apart from the session's dirs (Read(~/other/*.key), Read(//etc/**/*.pem)):
			// only this walk makes the rule the kernel's there, since a program's own reads
			// (awk, tar -T, a script's cd) are out of the decision's sight. What holds a
			// session dir or is / (Read(.env)) is walked in the session's dirs only.
			starts = []string{prefix}
		}
		if len(starts) == 1 && starts[0] == prefix {
			// The rule names a place in the session's dirs through a link there (cfg ->
			// ~/realcfg): what it names lies where the link leads, inside the roots or not.
			if r := resolve(v, prefix); r != prefix {
				if lit := escapePattern(prefix); strings.HasPrefix(pat, lit) {
					pat, starts = escapePattern(r)+pat[len(lit):], []string{r}
				}
			}
		}
		pp := compilePattern(pat)
		for _, start := range starts {
			if walks[start] == nil {
				order = append(order, start)
			}
			walks[start] = append(walks[start], pp)
		}
	}
	if len(order) == 0 {
		return out, nil
	}
	reserved := time.Duration(0)
	if !how.unbounded {
		// The walk's bound is taken before it starts and what it did not use given back:
		// calls started at once cannot all pass a check made before any of them paid.
		if wait := walkShare.reserve(how.tenant, maxPatternCPU); wait > 0 {
			return nil, errWalkShare(wait)
		}
		reserved = maxPatternCPU
	} else {
		// The sweeps after calls walk whole: one of a user's at a time.
		defer unboundedWalks.lock(how.tenant)()
	}
	began := threadCPU() // the thread asCaller keeps locked
	defer func() { walkShare.charge(how.tenant, threadCPU()-began-reserved) }()
	w := &treeWalk{budget: maxPatternWalk, uid: uid, openUp: how.openUp}
	checksMax, cpuMax := maxPatternChecks, maxPatternCPU
	if how.unbounded {
		w.budget, checksMax, cpuMax = math.MaxInt, math.MaxInt, time.Duration(math.MaxInt64)
	}
	checks, visits, cpuStart, overCPU := 0, 0, threadCPU(), false
	// A link in the session's dirs to a dir outside them (conf/keys -> ~/vault) holds what a
	// pattern names at every depth (Read(**/*.key) reaches conf/keys/prod.key), which no walk
	// of the roots meets: it is walked through. One into the roots is walked where it leads.
	var followed []string
	outside := func(r string) bool {
		return !slices.ContainsFunc(roots, func(root string) bool { return under(r, root) })
	}
	for _, start := range order {
		pats := walks[start]
		modules := modulePatterns(pats)
		// The commonest rule, a literal name at any depth (Read(.env): /**/.env), is one map
		// look an entry however many there are; the others are tried one by one.
		names, others := map[string]bool{}, []pathPattern(nil)
		for _, pp := range pats {
			if pp.name != "" && !strings.ContainsAny(pp.name, `*?[\`) {
				names[pp.name] = true
			} else {
				others = append(others, pp)
			}
		}
		perEntry := len(others) + min(len(names), 1)
		// visit reports whether to walk into p: a match is covered whole, not entered.
		visit := func(p, name string, isDir bool) bool {
			if checks += perEntry; checks > checksMax {
				w.budget = 0 // the walk stops at its next entry (errWalkBudget)
			}
			if visits++; visits%64 == 0 {
				now := threadCPU()
				if now-cpuStart > cpuMax {
					w.budget, overCPU = 0, true
				}
				if how.unbounded && now-began >= walkSlice {
					// The sweep after a call walks whole, but at its user's share: what
					// it takes past that is paid in the call's own time, not the daemon's
					// other users'.
					walkShare.charge(how.tenant, now-began)
					began = now
					if wait := walkShare.wait(how.tenant); wait > 0 {
						walkPause(wait)
					}
				}
			}
			if names[name] {
				out = append(out, p)
				return false
			}
			descend := len(names) > 0 // a name at any depth may lie below anything
			for _, pp := range others {
				if pp.match(p, name) {
					out = append(out, p)
					return false
				}
				descend = descend || pp.mayHold(p)
			}
			// A repository's objects are many dirs of files named by their hash, never what a
			// rule names (a pattern naming .git is matched there too), and nothing is moved
			// in: a covered file's dirs are mount points. The rest of .git is walked.
			if isDir && descend && modules && name != "modules" {
				if _, err := v.lstat(filepath.Join(filepath.Dir(p), "HEAD")); err == nil {
					return false // inside a module's git dir: only its modules hold more
				}
			}
			return isDir && descend && !(name == "objects" && strings.HasSuffix(p, "/.git/objects") && !mentionsGit(pats))
		}
		fi, err := v.lstat(start)
		if err != nil || !visit(start, filepath.Base(start), fi.IsDir()) {
			continue
		}
		w.visit = visit
		if how.unbounded {
			// The sweep after a call: the call started with every root walkable, so a dir
			// past the depth bound is what it made, and may hold a match the walk cannot
			// list. It goes aside whole rather than leave the walk, and every match, undone.
			w.beyond = func(p string) { out = append(out, p) }
		}
		w.follow = func(p string) bool {
			if !how.followOut || !slices.ContainsFunc(pats, func(pp pathPattern) bool { return pp.mayHold(p) }) {
				return false
			}
			if r := resolve(v, p); r != p && outside(r) {
				followed = append(followed, p)
				return true
			}
			return false
		}
		if err := w.walk(start); err != nil {
			pats := make([]string, len(pats))
			for i, pp := range walks[start] {
				pats[i] = pp.pat
			}
			switch {
			case errors.Is(err, errWalkBudget) && overCPU:
				err = fmt.Errorf("%d patterns over what %s holds take more than %v of the daemon's CPU, on every call", len(pats), start, maxPatternCPU)
			case errors.Is(err, errWalkBudget) && checks > checksMax:
				err = fmt.Errorf("%d patterns over what %s holds take more than %d checks, on every call", len(pats), start, maxPatternChecks)
			case errors.Is(err, errWalkBudget):
				err = fmt.Errorf("%s holds more than %d entries", start, maxPatternWalk)
			}
			return nil, fmt.Errorf("%w: the kernel cannot be made to enforce %s in every file, so nothing runs: %v; name paths in the rule instead (Read(./.env), Read(./config/**)), or narrow what it reaches (the session's dirs, or the place the rule starts at, and the links in them that lead elsewhere)", ErrBadSpec, strings.Join(pats, ", "), err)
		}
	}
	// What was found through a link is covered where it lies, and the link is kept leading
	// there (v.matchedLinks, as throughLinks keeps a matched one): removed, the next call's
	// walk would not meet what it hides.
	for i, m := range out {
		for _, l := range followed {
			if under(m, l) && m != l {
				out[i] = resolve(v, m)
				if !slices.Contains(v.matchedLinks, l) {
					v.matchedLinks = append(v.matchedLinks, l)
				}
				break
			}
		}
	}
	return out, nil
}

// throughLinks replaces each matched path that is a symlink (the user's cfg -> ../shared under
// Read(cfg/**), the walk not following it) by where it leads, which is what a program opening
// it reaches, and which a mount can cover; a mount planned on the link itself fails every
// call. A link that leads nowhere has nothing to cover. Each such link is kept in
// v.matchedLinks: a call that removed or retargeted it would leave where it led uncovered for
// the next call, so the sweep puts it back (linksToHidden). For a plan only: a sweep moves
// aside a link a call made, not where it leads.
func throughLinks(v *fsView, paths []string) []string {
	out := paths[:0]
	for _, p := range paths {
		if fi, err := v.lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			r := resolve(v, p)
			if _, err := v.lstat(r); err != nil || r == p {
				continue
			}
			if !slices.Contains(v.matchedLinks, p) {
				v.matchedLinks = append(v.matchedLinks, p)
			}
			p = r
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// wholePaths are the existing paths that a pattern of the form <path>/** denies everything
// under, where <path> holds none of roots and lies in none of them: expandPatterns walks only
// the roots, so without this such a rule (Read(//etc/**), Read(//proc/**)) would be the
// policy's alone. A dir is hidden whole, its own listing included: stricter than the rule,
// never looser. <path> may be a file: ** matches nothing too, so the decision denies the file
// itself (Read(~/out.txt/**)), and the kernel must as well.
func wholePaths(v *fsView, patterns, roots []string) []string {
	var out []string
	for _, pat := range patterns {
		p, ok := strings.CutSuffix(pat, "/**")
		if !ok || p == "" {
			continue
		}
		p, wild := literalPrefix(p)
		if wild || len(walkStarts(p, roots)) > 0 {
			continue
		}
		if p = resolve(v, p); p == "/" || len(walkStarts(p, roots)) > 0 {
			continue
		}
		// After resolve, a link is one that leads nowhere (or in a loop): nothing to hide.
		if fi, err := v.lstat(p); err == nil && fi.Mode()&fs.ModeSymlink == 0 && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func mentionsGit(pats []pathPattern) bool {
	for _, pp := range pats {
		if strings.Contains(pp.pat, ".git") {
			return true
		}
	}
	return false
}

// pathPattern is a pattern compiled for a walk: name, for /…/**/NAME, matches an entry by its
// name; segs, for a pattern without **, prunes what cannot match; anything else is MatchPath.
type pathPattern struct {
	pat  string
	name string
	segs []string
}

func compilePattern(pat string) pathPattern {
	pp := pathPattern{pat: pat}
	if dir, last, ok := strings.Cut(pat, "/**/"); ok && !strings.Contains(last, "/") && !strings.Contains(dir, "*") {
		pp.name = last
	} else if !strings.Contains(pat, "**") {
		pp.segs = strings.Split(strings.TrimPrefix(pat, "/"), "/")
	}
	return pp
}

func (pp pathPattern) match(p, name string) bool {
	if pp.name != "" {
		ok, _ := path.Match(pp.name, name)
		return ok
	}
	return permission.MatchPath(pp.pat, p)
}

// mayHold reports whether something below dir could still match.
func (pp pathPattern) mayHold(dir string) bool {
	if pp.segs == nil {
		return true
	}
	return mayHold(pp.segs, dir)
}

// mayHold reports whether something below dir could match the pattern segments (no **):
// dir is shallower than the pattern and each of its segments matches the pattern's.
func mayHold(segs []string, dir string) bool {
	ds := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	if len(ds) >= len(segs) {
		return false
	}
	for i, s := range ds {
		if ok, _ := path.Match(segs[i], s); !ok {
			return false
		}
	}
	return true
}

// walkStarts is where a pattern with the literal prefix could match inside roots: the prefix
// itself when a root holds it, else each root inside the prefix.
func walkStarts(prefix string, roots []string) []string {
	for _, r := range roots {
		if under(prefix, r) {
			return []string{prefix}
		}
	}
	var out []string
	for _, r := range roots {
		if under(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// LiteralPath is the path an absolute path-rule pattern names when it holds no wildcard.
func LiteralPath(pattern string) (string, bool) {
	p, wild := literalPrefix(pattern)
	return p, !wild
}

// literalPrefix is the pattern's leading segments that hold no wildcard, unescaped, and
// whether anything after them does.
func literalPrefix(pat string) (string, bool) {
	if !strings.Contains(pat, `\`) {
		// Nothing escaped (nearly every pattern): the prefix is the text before the segment
		// that holds the first metacharacter. A plan asks this of dozens of patterns.
		rest := strings.TrimPrefix(pat, "/")
		i := strings.IndexAny(rest, "*?[")
		if i < 0 {
			return "/" + rest, false
		}
		return "/" + rest[:max(strings.LastIndexByte(rest[:i], '/'), 0)], true
	}
	segs := strings.Split(strings.TrimPrefix(pat, "/"), "/")
	var lit []string
	for _, s := range segs {
		if strings.ContainsAny(unescapedMeta(s), "*?[") {
			return "/" + strings.Join(lit, "/"), true
		}
		lit = append(lit, unescape(s))
	}
	return "/" + strings.Join(lit, "/"), false
}

// unescapedMeta drops escaped characters, leaving the metacharacters that act as such.
func unescapedMeta(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
