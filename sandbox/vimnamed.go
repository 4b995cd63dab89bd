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
var vimStartup = []string{".vimrc", ".vim/vimrc", ".gvimrc", ".exrc", ".config/nvim/init.vim", ".config/nvim/init.lua"}

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
	return followNamed(starts, maxVimFiles, missing, func(p string, out *namedSet, read func(string)) bool {
		parse := vimScriptNames
		if strings.HasSuffix(p, ".lua") {
			parse = luaScriptNames
		}
		n, ok := vimNamesCache.get(p, home, uid, maxShellFileBytes, func(b []byte) vimNames { return parse(b, home) })
		if !ok {
			return false
		}
		for _, p := range n.sourced {
			out.add(p)
			read(p)
		}
		for _, d := range n.dirs {
			out.add(d)
		}
		return true
	})
}

// vimScriptNames reads one vim script's source, so, luafile, pyfile and runtime commands and
// its runtime path settings, in each command of a line (| between them, if and silent before
// them, execute's quoted text). Only names spelled out are seen (absolute, ~/, $HOME/,
// <sfile>:h/ of a script in the home); an execute that builds one is not.
func vimScriptNames(src []byte, home string) vimNames {
	var n vimNames
	for _, line := range strings.Split(string(src), "\n") {
		n.command(line, home, 0)
	}
	return n
}

// luaScriptNames reads neovim's init.lua: each quoted string that names a path (dofile,
// vim.opt.rtp:prepend) is named, and each other one is read as a vim command
// (vim.cmd("source …")).
func luaScriptNames(src []byte, home string) vimNames {
	var n vimNames
	for _, q := range quoted(string(src)) {
		if p := vimPath(q, home); p != "" {
			n.dirs = append(n.dirs, p)
		} else {
			n.command(q, home, 1)
		}
	}
	return n
}

// quoted are the texts between double or single quotes on each line of src.
func quoted(src string) []string {
	var out []string
	for _, line := range strings.Split(src, "\n") {
		for _, q := range []string{`"`, `'`} {
			parts := strings.Split(line, q)
			for i := 1; i < len(parts); i += 2 {
				out = append(out, parts[i])
			}
		}
	}
	return out
}

// vimPath is p as an absolute, clean path where it names one by itself, else "".
func vimPath(p, home string) string {
	p = strings.Trim(p, `"'`)
	for _, h := range []string{"~", "$HOME", "${HOME}", "<sfile>:h", "<sfile>:p:h"} {
		if p == h || strings.HasPrefix(p, h+"/") {
			return filepath.Join(home, p[len(h):])
		}
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return ""
}

// vimModifiers run the command after them: :silent, :unsilent, :verbose, :noautocmd, :if and
// the like (whose command the line goes on with).
var vimModifiers = map[string]bool{"sil": true, "silent": true, "uns": true, "unsilent": true, "verb": true, "verbose": true,
	"noa": true, "noautocmd": true, "keepj": true, "keepjumps": true, "if": true, "elseif": true, "try": true}

// command reads one line of vim commands into n; depth counts execute's nesting.
func (n *vimNames) command(line, home string, depth int) {
	expand := func(p string) string { return vimPath(p, home) }
	for _, cmd := range strings.Split(line, "|") {
		words := strings.Fields(strings.TrimLeft(cmd, " \t:"))
		for len(words) > 0 && vimModifiers[strings.TrimSuffix(words[0], "!")] {
			if w := strings.TrimSuffix(words[0], "!"); w == "if" || w == "elseif" {
				words = nil // the condition is the rest of this command; what it runs is the next
				break
			}
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		name, args := strings.TrimSuffix(words[0], "!"), words[1:]
		if strings.HasPrefix(name, "call") && strings.Contains(cmd, "execute(") {
			inner := strings.TrimSpace(cmd[strings.Index(cmd, "execute(")+len("execute("):])
			name, args = "execute", []string{strings.TrimSuffix(inner, ")")} // call execute("so x")
		}
		switch name {
		case "au", "autocmd":
			// au [group] Event pattern cmd: the command, after two or three words.
			for k := 2; k <= 3 && k < len(args) && depth < 2; k++ {
				n.command(strings.Join(args[k:], " "), home, depth+1)
			}
		case "lua", "luado", "py", "python", "py3", "python3", "pyx", "pythonx", "rub", "ruby", "perl":
			// Inline code: a quoted path in it (lua dofile("…")) is a file it runs.
			for _, q := range quoted(strings.Join(args, " ")) {
				if p := expand(q); p != "" {
					n.sourced = append(n.sourced, p)
				}
			}
		case "exe", "exec", "execute":
			if depth < 2 {
				// The quoted text is run as a command line.
				n.command(strings.NewReplacer(`'`, "", `"`, "", " . ", " ", " .. ", " ").Replace(strings.Join(args, " ")), home, depth+1)
			}
		case "so", "sou", "sour", "sourc", "source", "luaf", "luafile", "pyf", "pyfile", "py3f", "py3file", "pyxf", "pyxfile", "rubyf", "rubyfile":
			if len(args) > 0 {
				if p := expand(args[0]); p != "" {
					n.sourced = append(n.sourced, p)
				}
			}
		case "ru", "run", "runt", "runti", "runtim", "runtime":
			// Looked for in each runtime dir: the home's own ones, where a ../ leads out.
			for _, a := range args {
				if a == "START" || a == "OPT" || a == "PACK" || a == "ALL" {
					continue
				}
				for _, rt := range []string{".vim", ".config/nvim"} {
					if p := filepath.Join(home, rt, a); !strings.ContainsAny(a, "*?[") && strings.HasPrefix(p, home+"/") {
						n.sourced = append(n.sourced, p)
					}
				}
			}
		case "se", "set", "setg", "setglobal", "let":
			for _, a := range args {
				// set shell=~/x: the program vim runs its ! commands with.
				for _, opt := range []string{"shell=", "sh="} {
					if v, ok := strings.CutPrefix(a, opt); ok {
						if p := expand(v); p != "" {
							n.dirs = append(n.dirs, p)
						}
					}
				}
			}
			// set rtp+=~/x,~/y; set runtimepath^=…; set packpath+=…; let &rtp .= ',~/x'
			arg := strings.Join(args, " ")
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
}
