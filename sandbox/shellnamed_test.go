package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShellNamedPaths: what the start-up files source, run by path, or put on PATH, fpath,
// ZDOTDIR, ENV and BASH_ENV, in the forms dotfiles write them; sourced files are read too,
// and names known only at run time are left out.
func TestShellNamedPaths(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	files := map[string]string{
		".profile": `if [ -d "$HOME/bin" ] ; then PATH="$HOME/bin:$PATH"; fi
[ -f ~/work/env.sh ] && . ~/work/env.sh
export BASH_ENV=$HOME/work/bashenv
`,
		".bashrc": `source "${HOME}/dotfiles/aliases.sh"
export PATH=~/work/tools:$PATH:/opt/x/bin
eval "$(pyenv init -)"
. "$DYNAMIC/skip.sh"
~/work/prompt.sh --init
`,
		"dotfiles/aliases.sh": "source .fzf.bash\nalias ll='ls -l'\n",
		".zshenv":             "export ZDOTDIR=$HOME/work/zdot\n",
		".zshrc":              "path=(~/work/zbin $path)\nfpath=($HOME/work/zfunc $fpath)\ntypeset -U path\nsetopt extendedglob\nls *(.)\n",
		// The dynamic part may hold the colon; a relative entry names no dir of its own.
		".bash_aliases": `export PATH="$HOME/work/cuda${PATH:+:${PATH}}"
export PATH="${PATH:+${PATH}:}$HOME/work/last"
export PATH="./node_modules/.bin:$PATH:.:"
`,
		// What runs commands later (an alias, a trap, a prompt), through a wrapper, by the
		// owner's name.
		".bash_logout": `alias ll=~/work/ll
builtin source ~/work/b.sh
command . ~/work/c.sh
hash -p ~/work/evil ls
PROMPT_COMMAND=~/work/pc
PS1='$(~/work/ps1) \$ '
trap ~/work/tr EXIT
eval ~/work/ev
env A=1 ~/work/en
export PYTHONSTARTUP=~/work/ps.py
export PATH=` + filepath.Dir(home) + `/$USER/work/ub:$PATH
~` + filepath.Base(home) + `/work/tilde
`,
		".bash_profile": `\. ~/work/nvm.sh
\source ~/work/bs.sh
source -- ~/work/dd.sh
bash ~/work/setup.sh
python3 -u ~/work/x.py
trap -- '. ~/work/trap.sh' EXIT
exec -a x ~/work/ex
timeout 5 ~/work/to
complete -C ~/work/cmp cmp
bind -x '"\C-t": ~/work/bind.sh'
enable -f ~/work/x.so foo
export LD_LIBRARY_PATH=$HOME/work/lib:$LD_LIBRARY_PATH
export PYTHONPATH="$HOME/work/src"
export EDITOR=~/work/ed
cd ~/work/cdd && . ./rel.sh
bash -lc '~/work/lc.sh'
for f in ~/work/bashd/*.sh; do . "$f"; done
lua ~/work/z.lua --init bash
export RIPGREP_CONFIG_PATH=~/work/ripgreprc
export KUBECONFIG=~/work/kc1:$HOME/work/kc2
export XDG_CONFIG_HOME=~/work/config
export VIMINIT="source ~/work/vimrc"
`,
	}
	abs := map[string]string{}
	for name, body := range files {
		abs[filepath.Join(home, name)] = body
	}
	writeFiles(t, abs)
	got, _, err := shellNamedPaths(home, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bin", "work/env.sh", "work/bashenv", "dotfiles/aliases.sh", ".fzf.bash",
		"work/tools", "work/prompt.sh", "work/zdot/.zshrc", "work/zdot/.zshenv", "work/zbin", "work/zfunc",
		"work/cuda", "work/last", "work/ll", "work/b.sh", "work/c.sh", "work/evil", "work/pc", "work/ps1", "work/tr",
		"work/ev", "work/en", "work/ps.py", "work/ub", "work/tilde",
		"work/nvm.sh", "work/bs.sh", "work/dd.sh", "work/setup.sh", "work/x.py", "work/trap.sh", "work/ex", "work/to",
		"work/cmp", "work/bind.sh", "work/x.so", "work/lib", "work/src/sitecustomize.py", "work/ed", "work/cdd/rel.sh", "work/lc.sh",
		"work/bashd", "work/z.lua", "work/ripgreprc", "work/kc1", "work/kc2", "work/config/git", "work/config/fish", "work/vimrc"} {
		if !slices.Contains(got, filepath.Join(home, want)) {
			t.Errorf("%s not among %v", want, got)
		}
	}
	if !slices.Contains(got, "/opt/x/bin") {
		t.Errorf("/opt/x/bin not among %v", got)
	}
	for _, p := range got {
		if strings.Contains(p, dynamicPart) || strings.Contains(p, "skip.sh") || !filepath.IsAbs(p) {
			t.Errorf("a name known only at run time, or not absolute: %q", p)
		}
	}
}

// TestShellNamedPathsProtected: in a session rooted at a project, what the owner's start-up
// files (outside the session) source or put on PATH inside the project is read-only, and what
// a call makes there is moved aside, however the call spells the name.
func TestShellNamedPathsProtected(t *testing.T) {
	t.Parallel()
	rc := "# rc\n. ~/repo/env.sh\nexport PATH=\"$HOME/repo/tools:$PATH\"\n[ -x ~/repo/hello ] && ~/repo/hello\n"
	// The names are built at run time, as a program the classifier cannot see into would.
	const script = `e=env; ( echo id >> ${e}.sh ) 2>/dev/null && echo 'ATTACK-WORKED sourced file'; ` +
		`mkdir -p too""ls && printf '#!/bin/sh\nid\n' > tools/ls && chmod +x tools/ls; ` +
		`printf '#!/bin/sh\nid\n' > hel""lo; chmod +x hello; `
	attackNamed(t, map[string]string{".bashrc": rc, "repo/env.sh": "export A=1\n"}, script, "tools", "hello")
}

// attackNamed writes files (relative to the home) into a fresh fixture, runs script and then
// a write of the project's own src/a.go in its repo, as a call with the repo writable, and
// checks that the files are unchanged and each of gone (relative to the repo) is not there
// after the call.
func attackNamed(t *testing.T, files map[string]string, script string, gone ...string) {
	t.Helper()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	abs := map[string]string{filepath.Join(f.repo, "src", "a.go"): "package a\n"}
	for p, c := range files {
		abs[filepath.Join(f.home, p)] = c
	}
	f.write(t, abs)
	chownR(t, filepath.Dir(f.home))
	f.attack(t, s, script+`echo ok >> src/a.go && echo done`, f.repo, f.repo)
	delete(f.files, filepath.Join(f.repo, "src", "a.go")) // the project's own file: written
	f.unchanged(t)
	for _, g := range gone {
		if _, err := os.Lstat(filepath.Join(f.repo, g)); err == nil {
			t.Errorf("%s, which the owner's config names, is still there after the call", g)
		}
	}
}

// FuzzShellNames: any start-up file, as bash or zsh or neither can parse it, is read without a
// panic (the plan runs in the daemon), and names only absolute paths with nothing unknown in
// them.
func FuzzShellNames(f *testing.F) {
	for _, s := range []string{
		". ~/a.sh\nexport PATH=$HOME/bin:$PATH\n", "path=(~/x $path)\nfpath+=(${HOME}/f)\n",
		"ZDOTDIR=~/z; ENV=\"$HOME\"/e\n~/bin/hello --x\n", "source \"${X:-~}/y\"\nalias a='. b'\n",
		"setopt extendedglob; print -l *(.)\n", "if x; then . ~/q; fi; f() { source ~/r; }\n",
		"for f (~/a ${X:-~/b} $Y/c) source $f\nif [[ -n x ]] { . ./d }\n", "p() { PATH=$1:$PATH; }; p ~/e; . <(cat ~/f)\n",
		"0&0\xff", // the parser yields past its error
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := shellNames(b, "/home/u")
		for _, p := range slices.Concat(n.sourced, n.zdotdirs, n.named) {
			if !filepath.IsAbs(p) || strings.Contains(p, dynamicPart) || filepath.Clean(p) != p {
				t.Fatalf("%q names %q", b, p)
			}
		}
	})
}

// TestShellNamesTooDeep: a start-up file nesting past shnest.MaxDepth is not parsed (256 KiB
// of `(` would take the parser's stack past the runtime's 1 GiB limit, which ends the
// daemon), but read word by word as one that does not parse.
func TestShellNamesTooDeep(t *testing.T) {
	deep := []byte(". ~/real.sh\necho $((" + strings.Repeat("(", maxShellFileBytes-32))
	if n := shellNames(deep, "/home/u"); !slices.Contains(n.sourced, "/home/u/real.sh") {
		t.Errorf("a file nested too deep named %+v, want ~/real.sh sourced", n)
	}
	if n := shellNames([]byte(". ~/real.sh\n"), "/home/u"); len(n.sourced) != 1 {
		t.Errorf("a plain file named %+v, want ~/real.sh sourced", n)
	}
}

// TestShellNamedPathsBounded: start-up files naming more paths than a call can protect make
// the plan fail rather than look at each on every call (a .bashrc of 37 000 PATH entries took
// each call 8 s of the daemon's CPU), and a git config as well; up to the bound, all are kept.
func TestShellNamedPathsBounded(t *testing.T) {
	t.Parallel()
	pathLine := func(n int) string {
		dirs := make([]string, n)
		for i := range dirs {
			dirs[i] = fmt.Sprintf("~/d%d", i)
		}
		return "export PATH=" + strings.Join(dirs, ":") + ":$PATH\n"
	}
	home := t.TempDir()
	writeFiles(t, map[string]string{filepath.Join(home, ".bashrc"): pathLine(maxNamedPaths / 2)})
	if got, _, err := shellNamedPaths(home, 0, nil); err != nil || len(got) != maxNamedPaths/2 {
		t.Errorf("%d paths (%v), want %d", len(got), err, maxNamedPaths/2)
	}
	home = t.TempDir()
	writeFiles(t, map[string]string{filepath.Join(home, ".bashrc"): pathLine(maxNamedPaths + 1)})
	if _, _, err := shellNamedPaths(home, 0, nil); !errors.Is(err, errTooManyNamed) {
		t.Errorf("%d PATH entries: %v, want refused", maxNamedPaths+1, err)
	}
	var cfg strings.Builder
	for i := range maxNamedPaths + 1 {
		fmt.Fprintf(&cfg, "[core]\n\thooksPath = %s/h/%d\n", home, i)
	}
	writeFiles(t, map[string]string{filepath.Join(home, ".gitconfig"): cfg.String()})
	if _, err := gitNamedPaths([]string{filepath.Join(home, ".gitconfig")}, nil, home); !errors.Is(err, errTooManyNamed) {
		t.Errorf("%d hooksPath lines: %v, want refused", maxNamedPaths+1, err)
	}
}

// TestShellNamedTooManyFiles: start files that are not there take nothing of the bound on the
// files read; past it, one more that is there fails the whole rather than leave what it names
// unprotected.
func TestShellNamedTooManyFiles(t *testing.T) {
	t.Parallel()
	for _, n := range []int{maxShellNamedFiles - 1, maxShellNamedFiles + 1} {
		home := t.TempDir()
		files := map[string]string{}
		var rc strings.Builder
		for i := range n {
			fmt.Fprintf(&rc, ". ~/d/%d.sh\n", i)
			files[filepath.Join(home, "d", fmt.Sprintf("%d.sh", i))] = "true\n"
		}
		files[filepath.Join(home, ".bashrc")] = rc.String()
		writeFiles(t, files)
		_, _, err := shellNamedPaths(home, 0, nil)
		if over := n+1 > maxShellNamedFiles; over != errors.Is(err, errTooManyFiles) {
			t.Errorf("%d sourced files and .bashrc: %v", n, err)
		}
	}
}

// TestShellNamesUnparsed: a start-up file neither bash's parser nor zsh's reads whole (zsh's
// short forms) still names what it sources, runs or puts on PATH: the statements that parse
// are read as such, the lines that do not word by word. Each want is among what the file
// names; none of not is.
func TestShellNamesUnparsed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src       string
		want, not []string
	}{
		{src: "for f (~/p/a.zsh ~/p/b.zsh) source $f\n", want: []string{"p/a.zsh", "p/b.zsh"}},
		{src: "for f in a b; source ~/p/x\n", want: []string{"p/x"}},
		{src: "if [[ -n x ]] { source ~/p/x }\n", want: []string{"p/x"}},
		{src: "while false { }\nexport PATH=~/p/bin:$PATH\n", want: []string{"p/bin"}},
		{src: "if true; then\n  for f (a b) source $f\n  export PATH=$HOME/p/zbin:$PATH\nfi\n", want: []string{"p/zbin"}},
		{src: "setopt x\nfor f (~/p/conf.d/*.zsh(N)) source $f\npath=(~/p/pbin $path)\n", want: []string{"p/conf.d", "p/pbin"}},
		{src: "if [[ -n x ]] {\n  . ~/p/in.sh\n}\n", want: []string{"p/in.sh"}},
		{src: "for f (x) { ZDOTDIR=~/p/zd; PATH=/opt/q/bin:$PATH }\n", want: []string{"p/zd", "/opt/q/bin"}},
		// Statements that parse keep their reading: a cd names nothing; the home and / never.
		{src: "for f (~ /) echo $f\ncd ~/proj\n", not: []string{"proj", "/home/u", "/"}},
		// What a function the file defines is given, and what a substitution or an eval'd
		// string names.
		{src: "pathadd() { PATH=\"$1:$PATH\"; }\npathadd ~/p/fbin\n", want: []string{"p/fbin"}},
		{src: "source <(cat ~/p/ps)\n", want: []string{"p/ps"}},
		{src: "eval \"$(cat ~/p/ev)\"\n", want: []string{"p/ev"}},
		{src: "PATH=$(echo ~/p/cbin):$PATH\n", want: []string{"p/cbin"}},
		{src: "eval \"source ~/p/$V/x.sh\"\n", want: []string{"p"}},
	} {
		n := shellNames([]byte(c.src), "/home/u")
		got := slices.Concat(n.sourced, n.zdotdirs, n.named)
		wantNames(t, c.src, got, c.want, c.not)
	}
}

// TestShellNamedPathsUnparsed: a file a .zshrc that does not parse whole sources is read too.
func TestShellNamedPathsUnparsed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".zshrc"):       "for f in x; source ~/p/env.zsh\n",
		filepath.Join(home, "p", "env.zsh"): "export PATH=~/p/deep:$PATH\n",
	})
	got, _, err := shellNamedPaths(home, 0, nil)
	if err != nil || !slices.Contains(got, filepath.Join(home, "p/deep")) {
		t.Errorf("what a file sourced by a short-form loop names: %v (%v)", got, err)
	}
}

// TestShellMovedGitConfigsRead: a git config a start-up file moves (GIT_CONFIG_GLOBAL, or
// XDG_CONFIG_HOME's git/config) is read like ~/.gitconfig for what it names: its hooksPath was
// kept read-only as a file but the hooks it named were not.
func TestShellMovedGitConfigsRead(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".bashrc"):            "export GIT_CONFIG_GLOBAL=~/dotfiles/gitconfig\nexport XDG_CONFIG_HOME=$HOME/xdg\n",
		filepath.Join(home, "dotfiles/gitconfig"): "[core]\n\thooksPath = ~/dotfiles/githooks\n",
		filepath.Join(home, "xdg/git/config"):     "[core]\n\tfsmonitor = ~/xdg/fsmon.sh\n",
	})
	got, err := ShellNamedPaths(uint32(os.Getuid()), uint32(os.Getgid()), nil, home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(home, "dotfiles/gitconfig"), filepath.Join(home, "dotfiles/githooks"), filepath.Join(home, "xdg/fsmon.sh")} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not among %v", want, got)
		}
	}
}

// TestShellNamedGitDirs: a repository kept apart that the user's git is pointed at (the
// dotfiles `alias config='git --git-dir=$HOME/.cfg --work-tree=$HOME'`, a function's
// --git-dir, GIT_DIR) has its config, hooks and attributes protected, and its config read for
// what it names; in a session whose dir holds it, a hook written there fails.
func TestShellNamedGitDirs(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".bashrc"):     "alias config='/usr/bin/git --git-dir=$HOME/.cfg/ --work-tree=$HOME'\nd() { git --git-dir ~/.d2 \"$@\"; }\n",
		filepath.Join(home, ".zshenv"):     "export GIT_DIR=~/.d3\n",
		filepath.Join(home, ".cfg/config"): "[core]\n\tbare = true\n\tfsmonitor = ~/bin2/fsmon\n",
	})
	got, err := ShellNamedPaths(uint32(os.Getuid()), uint32(os.Getgid()), nil, home)
	if err != nil {
		t.Fatal(err)
	}
	wantAmong(t, home, got, ".cfg/config", ".cfg/hooks", ".cfg/info/attributes", "bin2/fsmon", ".d2/hooks", ".d3/config")
	// Relative to a -C or a cd before it; GIT_COMMON_DIR as GIT_DIR; a git alias's --git-dir.
	home2 := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home2, ".bashrc"):    "alias a1='git -C ~/p --git-dir=g1'\nalias a2='cd ~/p && git --git-dir=g2 status'\nexport GIT_COMMON_DIR=~/p/g3\n",
		filepath.Join(home2, ".gitconfig"): "[alias]\n\tdot = !git --git-dir=$HOME/p/g4 --work-tree=$HOME\n\tdot2 = --git-dir=" + home2 + "/p/g5 status\n",
	})
	got, err = ShellNamedPaths(uint32(os.Getuid()), uint32(os.Getgid()), nil, home2)
	if err != nil {
		t.Fatal(err)
	}
	git, err := GitNamedPaths(uint32(os.Getuid()), uint32(os.Getgid()), nil, ProtectedCandidates(nil, home2, home2), home2)
	if err != nil {
		t.Fatal(err)
	}
	wantAmong(t, home2, slices.Concat(got, git), "p/g1/hooks", "p/g2/hooks", "p/g3/hooks", "p/g4/hooks", "p/g5/hooks", "p/g4/config")
	attackNamed(t, map[string]string{
		".bashrc":                "alias dots='git --git-dir=$HOME/repo/dots.git --work-tree=$HOME'\n",
		"repo/dots.git/HEAD":     "ref: refs/heads/main\n",
		"repo/dots.git/config":   "[core]\n\tbare = true\n",
		"repo/dots.git/hooks/.k": "",
	}, `( echo id > dots.git/hooks/pre-""commit ) 2>/dev/null && echo 'ATTACK-WORKED dotfiles hook'; `+
		`( echo '[core] fsmonitor = /tmp/x' >> dots.git/con""fig ) 2>/dev/null && echo 'ATTACK-WORKED dotfiles config'; `)
}

// TestShellNamedCompiledFiles: zsh runs FILE.zwc, compiled, in place of a start-up or sourced
// FILE it is newer than: each is protected with its FILE.
func TestShellNamedCompiledFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".zshrc"):    ". ~/p/env.zsh\nexport ZDOTDIR=~/p/z\n",
		filepath.Join(home, "p/env.zsh"): "true\n",
	})
	got, err := ShellNamedPaths(uint32(os.Getuid()), uint32(os.Getgid()), nil, home)
	if err != nil {
		t.Fatal(err)
	}
	wantAmong(t, home, got, "p/env.zsh.zwc", "p/z/.zshrc.zwc", "p/z/.zshenv.zwc")
	if !slices.Contains(ProtectedCandidates(nil, home, home), filepath.Join(home, ".zshrc.zwc")) {
		t.Error("~/.zshrc.zwc is no candidate")
	}
}

// TestShellNamesDefaultWords: a value given as a parameter expansion's default (PATH's entry
// in ${MYBIN:-$HOME/p/tools}, BASH_ENV=${BASH_ENV:-…}, a sourced ${RC:-…}, : ${X:=…}) is what the
// variable holds in a fresh login: it names what a plain value would.
func TestShellNamesDefaultWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src       string
		want, cfg []string
	}{
		{src: "export PATH=\"${MYBIN:-$HOME/p/tools}:$PATH\"\n", want: []string{"p/tools"}},
		{src: "export BASH_ENV=${BASH_ENV:-$HOME/p/x/e}\n", want: []string{"p/x/e"}},
		{src: ". ${RC:-$HOME/p/x/rc}\nsource \"${RC2-~/p/x/rc2}\"\n", want: []string{"p/x/rc", "p/x/rc2"}},
		{src: "export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}${HOME}/p/x/e.so\n", want: []string{"p/x/e.so"}},
		{src: ": ${EDITOR:=$HOME/p/x/ed}; export EDITOR\n", want: []string{"p/x/ed"}},
		{src: "export GIT_CONFIG_GLOBAL=${G:-$HOME/p/gc}\n", want: []string{"p/gc"}, cfg: []string{"p/gc"}},
	} {
		n := shellNames([]byte(c.src), "/home/u")
		got := slices.Concat(n.sourced, n.zdotdirs, n.named)
		wantNames(t, c.src, got, c.want, nil)
		git, _ := movedKinds(n.moved)
		wantNames(t, c.src, git, c.cfg, nil)
	}
	n := shellNames([]byte("export KUBECONFIG=${KUBECONFIG:-$HOME/p/kc}\n"), "/home/u")
	if !slices.Contains(n.moved, movedConfig{".kube/config", "/home/u/p/kc"}) {
		t.Errorf("a moved kubeconfig's default not read: %+v", n.moved)
	}
}

// TestShellNamesProgramsAndGlobs: the variables that name a program git or less runs, the
// JVM's and interpreters' options, git's template dir and its config given by the
// environment or `git -c`, a dir pushd moves to, and a glob a file sources (in a process
// substitution too) or a zsh qualifier on a PATH entry. Each want is among what the file
// names (a glob's dir whole); none of not is; configs are read as git configs.
func TestShellNamesProgramsAndGlobs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src            string
		want, not, cfg []string
	}{
		{src: "export GIT_EXTERNAL_DIFF=~/p/gd\n", want: []string{"p/gd"}},
		{src: "export GIT_ASKPASS=\"$HOME/p/ask\"\n", want: []string{"p/ask"}},
		{src: "export GIT_SEQUENCE_EDITOR='~/p/se --x'\n", want: []string{"p/se"}},
		{src: "export GIT_PROXY_COMMAND=/opt/p/proxy\n", want: []string{"/opt/p/proxy"}},
		{src: "export LESSOPEN='| ~/p/lesspipe.sh %s'\n", want: []string{"p/lesspipe.sh"}},
		{src: "export LESSOPEN='||/opt/p/lp %s'\n", want: []string{"/opt/p/lp"}},
		{src: "export LESSOPEN=\"|-$HOME/p/lp2 %s\"\n", want: []string{"p/lp2"}},
		{src: "export LESSCLOSE='~/p/lc %s %s'\n", want: []string{"p/lc"}},
		{src: "export JAVA_TOOL_OPTIONS=\"-javaagent:$HOME/p/x.jar=opt\"\n", want: []string{"p/x.jar"}},
		{src: "export _JAVA_OPTIONS='-Xbootclasspath/a:/opt/p/b.jar'\n", want: []string{"/opt/p/b.jar"}},
		{src: "export NODE_OPTIONS=\"--require $HOME/p/pre.js\"\n", want: []string{"p/pre.js"}},
		{src: "export NODE_OPTIONS='-r ~/p/n.js'\n", want: []string{"p/n.js"}},
		{src: "export PERL5OPT=-r/opt/p/pl\n", want: []string{"/opt/p/pl"}},
		{src: "export RUBYOPT=\"-r$HOME/p/rb -I${HOME}/p/rblib\"\n", want: []string{"p/rb", "p/rblib"}},
		{src: "export LD_PRELOAD=/opt/p/a.so:$HOME/p/b.so\n", want: []string{"/opt/p/a.so", "p/b.so"}},
		{src: "export GIT_TEMPLATE_DIR=~/p/tmpl\n", want: []string{"p/tmpl"}},
		{src: "export GIT_CONFIG_PARAMETERS=\"'core.editor'='$HOME/p/ce' 'core.pager'='less'\"\n", want: []string{"p/ce"}},
		{src: "export GIT_CONFIG_PARAMETERS=\"'include.path'='/opt/p/inc'\"\n", want: []string{"/opt/p/inc"}, cfg: []string{"/opt/p/inc"}},
		{src: "export GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0=~/p/hooks\nexport GIT_CONFIG_KEY_1=core.fsmonitor GIT_CONFIG_VALUE_1='~/p/gv --flag'\n",
			want: []string{"p/hooks", "p/gv"}},
		{src: "export GIT_CONFIG_KEY_0=include.path GIT_CONFIG_VALUE_0=$HOME/p/gi\n", want: []string{"p/gi"}, cfg: []string{"p/gi"}},
		{src: "alias git='git -c core.fsmonitor=$HOME/p/gitc'\n", want: []string{"p/gitc"}},
		{src: "alias git='git -c core.fsmonitor=~/p/gitc2 -c core.pager=less'\n", want: []string{"p/gitc2"}},
		{src: "alias g=\"git -c 'core.hooksPath=\\$HOME/p/gh' -c 'include.path=\\${HOME}/p/ginc'\"\n", want: []string{"p/gh", "p/ginc"}, cfg: []string{"p/ginc"}},
		{src: "g() { command git -c core.sshCommand=\"ssh -o ProxyCommand=$HOME/p/pc\" \"$@\"; }\n", want: []string{"p/pc"}},
		{src: "pushd ~/p/pd >/dev/null; . ./e.sh; popd\n. ./after.sh\n", want: []string{"p/pd/e.sh", "after.sh"}, not: []string{"p/pd/after.sh"}},
		{src: "cd /opt/p/cd1\npushd -q ~/p/pd2\npopd\n. ./x.sh\n", want: []string{"/opt/p/cd1/x.sh"}},
		{src: "source ~/p/rc/glob*.sh\n", want: []string{"p/rc"}},
		{src: "while read -r f; do . \"$f\"; done < <(ls ~/p/rc/g/*.sh)\n", want: []string{"p/rc/g"}},
		{src: "setopt extendedglob\nsource ~/p/z/m*.zsh(N)\n", want: []string{"p/z"}},
		{src: "path=(~/p/z/r(N-/) $path)\nfpath=($HOME/p/z/f(N) $fpath)\n", want: []string{"p/z/r", "p/z/f"}},
		// Never the home, / or above it, however it is spelled.
		{src: "export EDITOR=~ GIT_TEMPLATE_DIR=$HOME JAVA_TOOL_OPTIONS=-javaagent:/home/x.jar\nsource ~/*.sh\nalias git='git -c core.hooksPath=/'\n",
			not: []string{"/home/u", "/", "/home"}},
	} {
		n := shellNames([]byte(c.src), "/home/u")
		got := slices.Concat(n.sourced, n.zdotdirs, n.named)
		wantNames(t, c.src, got, c.want, c.not)
		git, _ := movedKinds(n.moved)
		wantNames(t, c.src, git, c.cfg, nil)
	}
}

// TestShellNamedGlobAndGitCProtected: in a session rooted at a dotfiles repository, the dir a
// .bashrc sources by a glob and the fsmonitor its git alias gives with -c are read-only: a
// file a call adds there would be sourced, or run at the user's next git status.
func TestShellNamedGlobAndGitCProtected(t *testing.T) {
	t.Parallel()
	attackNamed(t, map[string]string{
		".bashrc":          "source ~/repo/rc/*.sh\nalias git='git -c core.fsmonitor=$HOME/repo/tools/fsmon'\n",
		"repo/rc/a.sh":     "A=1\n",
		"repo/tools/fsmon": "#!/bin/sh\n",
	}, `( echo id >> tools/fs""mon ) 2>/dev/null && echo 'ATTACK-WORKED git -c fsmonitor'; `+
		`printf 'id\n' > rc/ev""il.sh 2>/dev/null; `, "rc/evil.sh")
}

// wantNames checks that the names got from src hold each of want and none of not (relative:
// to the home /home/u).
// wantAmong reports each of want (relative to home, or absolute) that got lacks.
func wantAmong(t *testing.T, home string, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !filepath.IsAbs(w) {
			w = filepath.Join(home, w)
		}
		if !slices.Contains(got, w) {
			t.Errorf("%s not among %v", w, got)
		}
	}
}

func wantNames(t *testing.T, src string, got, want, not []string) {
	t.Helper()
	abs := func(w string) string {
		if filepath.IsAbs(w) {
			return w
		}
		return filepath.Join("/home/u", w)
	}
	for _, w := range want {
		if !slices.Contains(got, abs(w)) {
			t.Errorf("%q: %s not among %q", src, w, got)
		}
	}
	for _, w := range not {
		if slices.Contains(got, abs(w)) {
			t.Errorf("%q: %s among %q", src, w, got)
		}
	}
}

// TestShellNamedPathsGlobLoopRead: the files a loop over a glob sources (~/.bashrc.d/*.sh) are
// read for what they source in turn, as a file sourced by name is; a loop that does not
// source its variable reads none.
func TestShellNamedPathsGlobLoopRead(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".bashrc"):              "for rc in ~/.bashrc.d/*.sh; do . \"$rc\"; done\nfor d in ~/code/*; do echo \"$d\"; done\n",
		filepath.Join(home, ".bashrc.d", "proj.sh"): ". ~/proj/tools/rcd.sh\n",
		filepath.Join(home, "code", "x.sh"):         ". ~/proj/tools/never.sh\n",
	})
	got, _, err := shellNamedPaths(home, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "proj/tools/rcd.sh"); !slices.Contains(got, want) {
		t.Errorf("%s not among %v", want, got)
	}
	if never := filepath.Join(home, "proj/tools/never.sh"); slices.Contains(got, never) {
		t.Errorf("a loop that sources nothing read %s: %v", never, got)
	}
}
