package sandbox

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestRCNamedPaths: what tmux's, gdb's and fish's start-up files source or run, and what the
// variables environment.d sets name as a start-up file's would (PATH, a program, a JVM agent,
// a moved kubeconfig and what it runs), in the forms they are written.
func TestRCNamedPaths(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".tmux.conf"):                     "set -g mouse on\nrun-shell ~/dot/t1.sh\nsource-file -q \"$HOME/dot/t2.conf\"\nif-shell 'true' 'source-file ~/dot/t3.conf'\nnew-session -c ~/proj\n",
		filepath.Join(home, ".gdbinit"):                       "source ~/dot/g.gdb\n",
		filepath.Join(home, ".config", "fish", "config.fish"): "source ~/dot/f.fish\nfish_add_path -g ${HOME}/dot/fbin\n",
		filepath.Join(home, ".config", "environment.d", "50.conf"): "PATH=$HOME/dot/ebin:$PATH\nEDITOR=vim\nLD_PRELOAD=/home/x.so\n" +
			"VISUAL=${HOME}/dot/evis -f\nJAVA_TOOL_OPTIONS=-javaagent:$HOME/dot/ej.jar\nKUBECONFIG=${HOME}/dot/ekc\nBASH_ENV=\"$HOME/dot/eenv\"\n",
		filepath.Join(home, "dot", "ekc"):                                 "users:\n- user:\n    exec:\n      command: ./ekcred\n",
		filepath.Join(home, ".xsessionrc"):                                "export PATH=\"$HOME/dot/xbin:$PATH\"\n",
		filepath.Join(home, ".config", "plasma-workspace", "env", "p.sh"): ". ~/dot/plasma.sh\n",
		filepath.Join(home, ".pam_environment"):                           "KUBECONFIG DEFAULT=@{HOME}/dot/pkc\nEDITOR OVERRIDE=${HOME}/dot/ped\n",
		filepath.Join(home, "dot", "pkc"):                                 "users:\n- user:\n    exec:\n      command: ./pkcred\n",
		filepath.Join(home, ".config", "fish", "fish_variables"):          "# This file contains fish universal variable definitions.\nSETUVAR fish_user_paths:" + home + "/dot/fup2\\x1e/usr/bin\nSETUVAR --export EDITOR:" + home + "/dot/fed\\x20\\x2dw\n",
		filepath.Join(home, ".config", "fish", "functions", "ls.fish"):    "function ls\n  ~/dot/fls $argv\nend\n",
		filepath.Join(home, ".config", "fish", "conf.d", "p.fish"):        "set -gx PATH ~/dot/fset $PATH\nif status is-interactive; source ~/dot/fif.fish; end\nalias ll ~/dot/fll\nset -U fish_user_paths ~/dot/fup\n",
		filepath.Join(home, ".config", "tmux", "tmux.conf"):               "set-hook -g session-created 'run-shell ~/dot/th.sh'\nbind r source-file ~/dot/tb.conf\nset -g default-command ~/dot/tdc\nset -g status-right '#(~/dot/ts.sh)'\n",
		filepath.Join(home, ".config", "gdb", "gdbinit"):                  "shell ~/dot/gs.sh\npython exec(open(\"/home/gp.py\").read())\n",
	})
	got, err := rcNamedPaths(home, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAmong(t, home, got, "dot/t1.sh", "dot/t2.conf", "dot/t3.conf", "dot/g.gdb", "dot/f.fish", "dot/fbin", "dot/ebin",
		"dot/fset", "dot/fif.fish", "dot/fll", "dot/fup", "dot/th.sh", "dot/tb.conf", "dot/tdc", "dot/ts.sh", "dot/gs.sh",
		"dot/evis", "dot/ej.jar", "dot/ekc", "dot/ekcred", "dot/eenv",
		"dot/xbin", "dot/plasma.sh", "dot/pkc", "dot/pkcred", "dot/ped", "dot/fup2", "dot/fed", "dot/fls",
		"/home/x.so", "/home/gp.py")
	if slices.Contains(got, filepath.Join(home, "proj")) {
		t.Errorf("a dir a line names for another purpose (a session's start dir) is protected: %v", got)
	}
}

// TestRCNamedPathsProtected: in a session rooted at a dotfiles repository, a script the owner's
// ~/.tmux.conf runs from it is read-only.
func TestRCNamedPathsProtected(t *testing.T) {
	t.Parallel()
	attackNamed(t, map[string]string{".tmux.conf": "run-shell ~/repo/tmux/on-start.sh\n", "repo/tmux/on-start.sh": "#!/bin/sh\n"},
		`( echo id >> tmux/on-""start.sh ) 2>/dev/null && echo 'ATTACK-WORKED tmux run-shell'; `)
}

// FuzzRCNames: any file parses without a panic and names only absolute, clean paths.
func FuzzRCNames(f *testing.F) {
	for _, s := range []string{"run-shell ~/a.sh\nsource-file \"$HOME/b\"\n", "PATH=${HOME}/c:$PATH\n", "fish_add_path -g ~/d\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range slices.Concat(rcNames(b, "/home/u", []string{"run-shell", "source-file", "PATH", "fish_add_path"}),
			rcNames(b, "/home/u", rcFiles[".config/environment.d/*.conf"]), rcNames(b, "/home/u", []string{pamEnv}),
			rcNames(b, "/home/u", []string{fishUniversal}), rcNames(b, "/home/u", []string{shellScript})) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Fatalf("%q names %q", b, p)
			}
		}
	})
}

// TestRCNamedFollowed: a file tmux sources is read as tmux's too, and what it runs is named.
func TestRCNamedFollowed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".tmux.conf"):            "source-file ~/dot/tmux/t.conf\n",
		filepath.Join(home, "dot", "tmux", "t.conf"): "run-shell ~/dot/tmux/theme.sh\n",
	})
	got, err := rcNamedPaths(home, 0, nil)
	if err != nil || !slices.Contains(got, filepath.Join(home, "dot/tmux/theme.sh")) {
		t.Errorf("what a sourced tmux file runs: %v (%v)", got, err)
	}
}

// TestRCNamesFish: fish's set after and, or, &&, ||, else, builtin, the dirs of its function
// and completion paths, and a program config.fish runs by its path.
func TestRCNamesFish(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"contains ~/p/a $PATH; or set -p PATH ~/p/a\n":             "p/a",
		"test -d ~/p/b && set -gx PATH ~/p/b $PATH\n":              "p/b",
		"test -d ~/p/c; and set -p PATH ~/p/c\n":                   "p/c",
		"true || set PATH ~/p/d $PATH\n":                           "p/d",
		"if false\nelse set -p PATH ~/p/e\nend\n":                  "p/e",
		"builtin set -p fish_user_paths ~/p/g\n":                   "p/g",
		"set -p fish_function_path ~/p/func\n":                     "p/func",
		"set -a fish_complete_path $HOME/p/comp\n":                 "p/comp",
		"~/p/bin/tool init | source\n":                             "p/bin/tool",
		"status is-interactive; and ~/p/bin/x2 --init\n":           "p/bin/x2",
		"if status is-login; command ~/p/bin/x3; end\n":            "p/bin/x3",
		"not contains ~/p/h $PATH; and begin; set PATH ~/p/h; end": "p/h",
	} {
		if got := rcNames([]byte(src), "/home/u", fishCommands); !slices.Contains(got, filepath.Join("/home/u", want)) {
			t.Errorf("%q: %s not among %q", src, want, got)
		}
	}
	// environment.d's other variables name nothing.
	if got := rcNames([]byte("XDG_DATA_DIRS=/usr/share:/home/u/.local/share\n"), "/home/u", rcFiles[".config/environment.d/*.conf"]); len(got) != 0 {
		t.Errorf("XDG_DATA_DIRS named %q", got)
	}
}

// TestRCNamesLoopsSetsTmux: a glob fish's for loop sources (the dir whole), the program and
// config variables fish's set gives as bash's export would, and the programs tmux's
// new-session, display-popup, respawn-pane and hooks run (not the dir a session starts in).
func TestRCNamesLoopsSetsTmux(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src       string
		cmds      []string
		want, not []string
	}{
		{src: "for f in ~/p/f/b/*.fish; source $f; end\n", cmds: fishCommands, want: []string{"p/f/b"}},
		{src: "if status is-interactive\n  for f in $HOME/p/f/c/*.fish\n    if test -r $f\n      . \"$f\"\n    end\n  end\nend\n", cmds: fishCommands, want: []string{"p/f/c"}},
		{src: "for f in ~/p/f/one.fish ~/p/f/two.fish; cat $f | source; end\n", cmds: fishCommands, want: []string{"p/f/one.fish", "p/f/two.fish"}},
		{src: "for d in ~/p/f/n/*; echo $d; end\nsource ~/p/f/after.fish\n", cmds: fishCommands, want: []string{"p/f/after.fish"}, not: []string{"p/f/n"}},
		{src: "set -gx EDITOR ~/p/f/l\n", cmds: fishCommands, want: []string{"p/f/l"}},
		{src: "set -gx BASH_ENV ~/p/f/m.sh\n", cmds: fishCommands, want: []string{"p/f/m.sh"}},
		{src: "set -gx VISUAL \"$HOME/p/f/v\" --wait\n", cmds: fishCommands, want: []string{"p/f/v"}},
		{src: "set -gx JAVA_TOOL_OPTIONS -javaagent:$HOME/p/f/j.jar\n", cmds: fishCommands, want: []string{"p/f/j.jar"}},
		{src: "set -x LESSOPEN '|~/p/f/lp %s'\n", cmds: fishCommands, want: []string{"p/f/lp"}},
		{src: "set -gx GIT_TEMPLATE_DIR ~/p/f/t\nset -gx GIT_CONFIG_PARAMETERS \"'core.editor'='/opt/p/ce'\"\n", cmds: fishCommands, want: []string{"p/f/t", "/opt/p/ce"}},
		{src: "set -gx PYTHONPATH ~/p/f/py\nset -gx ZDOTDIR ~/p/f/zd\n", cmds: fishCommands,
			want: []string{"p/f/py/sitecustomize.py", "p/f/zd/.zshrc"}, not: []string{"p/f/py"}},
		{src: "set -gx EDITOR ~\nset -gx GIT_TEMPLATE_DIR /\n", cmds: fishCommands, not: []string{"/home/u", "/"}},
		{src: "new-session -d -s main ~/p/t/prog\n", cmds: tmuxCommands, want: []string{"p/t/prog"}},
		{src: "new-session -c ~/proj -d /opt/p/prog arg\n", cmds: tmuxCommands, want: []string{"/opt/p/prog"}, not: []string{"proj"}},
		{src: "display-popup -E ~/p/t/pop\n", cmds: tmuxCommands, want: []string{"p/t/pop"}},
		{src: "bind-key C-p display-popup -d ~/proj -E \"$HOME/p/t/bp\"\n", cmds: tmuxCommands, want: []string{"p/t/bp"}, not: []string{"proj"}},
		{src: "respawn-pane -k ~/p/t/resp\n", cmds: tmuxCommands, want: []string{"p/t/resp"}},
		{src: "set-hook -g session-created 'run-shell ~/p/t/hook'\n", cmds: tmuxCommands, want: []string{"p/t/hook"}},
		{src: "bind c new-window -c \"#{pane_current_path}\" ~/p/t/nw\nsplit-window -h -e PATH=~/p/t/eb ~/p/t/sw\n", cmds: tmuxCommands, want: []string{"p/t/nw", "p/t/eb", "p/t/sw"}},
	} {
		got := rcNames([]byte(c.src), "/home/u", c.cmds)
		wantNames(t, c.src, got, c.want, c.not)
	}
}

// TestRCNamedFishLoopProtected: in a session rooted at a dotfiles repository, the dir a
// config.fish loop sources by a glob is read-only, and so is the EDITOR its set exports.
func TestRCNamedFishLoopProtected(t *testing.T) {
	t.Parallel()
	attackNamed(t, map[string]string{
		".config/fish/config.fish": "for f in ~/repo/fish/*.fish\n  source $f\nend\nset -gx EDITOR ~/repo/bin/ed\n",
		"repo/fish/a.fish":         "set -g A 1\n",
		"repo/bin/ed":              "#!/bin/sh\n",
	}, `( echo id >> bin/e""d ) 2>/dev/null && echo 'ATTACK-WORKED fish EDITOR'; `+
		`echo id > fish/ev""il.fish 2>/dev/null; `, "fish/evil.fish")
}

// TestRCNamedFishGitConfig: a git config fish's set moves (GIT_CONFIG_GLOBAL) is read like
// ~/.gitconfig for what it names, as bash's export of it is.
func TestRCNamedFishGitConfig(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".config/fish/config.fish"): "set -gx GIT_CONFIG_GLOBAL ~/dot/gitconfig\n",
		filepath.Join(home, "dot/gitconfig"):            "[core]\n\thooksPath = ~/dot/githooks\n",
	})
	got, err := rcNamedPaths(home, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"dot/gitconfig", "dot/githooks"} {
		if !slices.Contains(got, filepath.Join(home, w)) {
			t.Errorf("%s not among %v", w, got)
		}
	}
}
