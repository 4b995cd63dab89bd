package sandbox

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestVimNames: what the vim start-up files source, and the runtime dirs they add, in the
// forms vimrcs write them; sourced files are read too.
func TestVimNames(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".vimrc"):                      "set nocompatible\nsource ~/dot/vim/local.vim\n:so $HOME/dot/more.vim\nset rtp+=~/dot/vimrt,/opt/vim\nlet &packpath .= ',~/dot/pack'\nsource relative.vim\n",
		filepath.Join(home, "dot", "vim", "local.vim"):     "luafile ~/dot/init.lua\n",
		filepath.Join(home, ".config", "nvim", "init.vim"): "set runtimepath^=~/dot/nvimrt\n",
		filepath.Join(home, ".gvimrc"): "silent! source ~/dot/s1.vim\nsil so ~/dot/s2.vim\nexecute 'source ~/dot/s3.vim'\nif 1 | source ~/dot/s4.vim | endif\n" +
			"source ~/dot/s5.vim \" local\nsource <sfile>:h/dot/s6.vim\nsource ${HOME}/dot/s7.vim\nruntime ../dot/s8.vim\nexe 'set rtp+=~/dot/ert'\n" +
			"au VimEnter * so ~/dot/au.vim\nautocmd mygroup BufRead *.c source ~/dot/au2.vim\npyxfile ~/dot/x.py\nlua dofile(\"/home/l.lua\")\n" +
			"call execute(\"source ~/dot/ce.vim\")\nset shell=~/dot/sh\n",
		filepath.Join(home, ".config", "nvim", "init.lua"): "dofile(vim.fn.expand(\"~/dot/d.lua\"))\nvim.cmd(\"source ~/dot/vc.vim\")\nvim.opt.rtp:prepend(\"/home/rtp\")\n",
	})
	got, err := vimNamedPaths(home, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"dot/vim/local.vim", "dot/more.vim", "dot/vimrt", "dot/pack", "dot/init.lua", "dot/nvimrt",
		"dot/s1.vim", "dot/s2.vim", "dot/s3.vim", "dot/s4.vim", "dot/s5.vim", "dot/s6.vim", "dot/s7.vim", "dot/s8.vim", "dot/ert",
		"dot/au.vim", "dot/au2.vim", "dot/x.py", "dot/ce.vim", "dot/sh", "dot/d.lua", "dot/vc.vim"} {
		if !slices.Contains(got, filepath.Join(home, w)) {
			t.Errorf("%s not among %v", w, got)
		}
	}
	for _, p := range []string{"/opt/vim", "/home/l.lua", "/home/rtp"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s not among %v", p, got)
		}
	}
	for _, p := range got {
		if !filepath.IsAbs(p) {
			t.Errorf("not absolute: %q", p)
		}
	}
}

// TestVimNamedPathsProtected: in a session rooted at a dotfiles repository, a file the
// owner's ~/.vimrc sources from it is read-only.
func TestVimNamedPathsProtected(t *testing.T) {
	t.Parallel()
	const script = `( echo '!id' >> vim/lo""cal.vim ) 2>/dev/null && echo 'ATTACK-WORKED sourced vim file'; ` +
		`mkdir -p r""t/plugin && echo 'call system("id")' > rt/plugin/x.vim; `
	attackNamed(t, map[string]string{".vimrc": "source ~/repo/vim/local.vim\nset rtp+=~/repo/rt\n", "repo/vim/local.vim": "set number\n"}, script, "rt")
}

// FuzzVimNames: any script parses without a panic and names only absolute, clean paths.
func FuzzVimNames(f *testing.F) {
	for _, s := range []string{"source ~/a.vim\nset rtp+=~/b,/c\n", "let &rtp .= ',~/d'\n:so! $HOME/e\n", "set pp^=\"~/f\"\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := vimScriptNames(b, "/home/u")
		for _, p := range slices.Concat(n.sourced, n.dirs) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Fatalf("%q names %q", b, p)
			}
		}
	})
}
