package sandbox

import (
	"path/filepath"
	"strings"
)

// The user's vim and neovim start-up files are protected, but they may name others that vim
// runs at its start: a file they source (`source ~/dotfiles/vim/local.vim`, `luafile`), and
// dirs they add to the runtime or package path (`set rtp+=~/proj/vim`), whose plugin/ scripts
// vim runs. Such a file or dir in a writable dir is as much vim's start-up as ~/.vimrc is.

// vimStartup are the start-up files vim, gvim and neovim read from the home.
var vimStartup = []string{".vimrc", ".vim/vimrc", ".gvimrc", ".exrc", ".config/nvim/init.vim"}

// maxVimFiles bounds the files read, sourced ones with them.
const maxVimFiles = 16

var vimNamesCache = newParsedFiles(func(n vimNames) int { return stringsSize(n.sourced) + stringsSize(n.dirs) })

// vimNames is what one vim script names: files it sources, and runtime dirs it adds.
type vimNames struct {
	sourced, dirs []string
}

// vimNamedPaths returns what the vim start-up files in home name (see above), absolute and
// clean. Past maxNamedPaths it fails (errTooManyNamed), as the shells' do. Run as the caller.
func vimNamedPaths(home string, uid uint32, missing func(string) bool) ([]string, error) {
	if home == "" || home == "/" {
		return nil, nil
	}
	var starts []string
	for _, f := range vimStartup {
		starts = append(starts, filepath.Join(home, f))
	}
	return followNamed(starts, maxVimFiles, missing, func(p string, out *namedSet, read func(string)) {
		n, ok := vimNamesCache.get(p, home, uid, maxShellFileBytes, func(b []byte) vimNames { return vimScriptNames(b, home) })
		if !ok {
			return
		}
		for _, p := range n.sourced {
			out.add(p)
			read(p)
		}
		for _, d := range n.dirs {
			out.add(d)
		}
	})
}

// vimScriptNames reads one vim script's source, so, luafile and runtime path settings. Only
// names spelled out are seen (absolute, ~/, $HOME/); an `execute` building one is not.
func vimScriptNames(src []byte, home string) vimNames {
	var n vimNames
	expand := func(p string) string {
		p = strings.Trim(p, `"'`)
		switch {
		case p == "~" || strings.HasPrefix(p, "~/"):
			return filepath.Join(home, p[1:])
		case strings.HasPrefix(p, "$HOME/"):
			return filepath.Join(home, p[len("$HOME"):])
		case filepath.IsAbs(p):
			return filepath.Clean(p)
		}
		return ""
	}
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimLeft(line, " \t:")
		cmd, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		switch strings.TrimSuffix(cmd, "!") {
		case "so", "sou", "sour", "sourc", "source", "luaf", "luafile", "pyf", "pyfile", "py3f", "py3file":
			if p := expand(arg); p != "" {
				n.sourced = append(n.sourced, p)
			}
		case "se", "set", "setg", "setglobal", "let":
			// set rtp+=~/x,~/y; set runtimepath^=…; set packpath+=…; let &rtp .= ',~/x'
			for _, opt := range []string{"rtp", "runtimepath", "pp", "packpath"} {
				i := strings.Index(arg, opt)
				if i < 0 {
					continue
				}
				rest := strings.TrimLeft(arg[i+len(opt):], " +^-.=")
				for _, d := range strings.Split(strings.Trim(rest, `"' `), ",") {
					if p := expand(strings.TrimSpace(d)); p != "" {
						n.dirs = append(n.dirs, p)
					}
				}
			}
		}
	}
	return n
}
