package sandbox

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Other start-up files in the home that the kernel keeps read-only name files their tool reads
// or runs at its start: tmux's source-file and run-shell, gdb's source, fish's source and
// fish_add_path, and the PATH systemd's environment.d gives the user's services and session.
// Such a file (or PATH dir) in a writable dir is protected like the start-up file itself.

// rcFiles are those start-up files, relative to the home, with the commands of each whose
// arguments name a file or dir it reads or runs ("" for the whole line's words: a KEY=VALUE
// file).
var rcFiles = map[string][]string{
	".tmux.conf":                   tmuxCommands,
	".config/tmux/tmux.conf":       tmuxCommands,
	".gdbinit":                     gdbCommands,
	".config/gdb/gdbinit":          gdbCommands,
	".config/fish/config.fish":     fishCommands,
	".config/fish/conf.d/*.fish":   fishCommands,
	".config/environment.d/*.conf": {envAssignments},
	// fish's autoloaded functions (one named ls runs for ls), and its universal variables,
	// where fish_add_path and set -U keep what they set.
	".config/fish/functions/*.fish": fishCommands,
	".config/fish/fish_variables":   {fishUniversal},
	// pam_env's per-user variables (VAR DEFAULT=… OVERRIDE=…), set for every login.
	".pam_environment": {pamEnv},
	// What X and desktop sessions source as sh at login, read as a shell's start-up file.
	".xsessionrc": {shellScript}, ".xprofile": {shellScript}, ".xinitrc": {shellScript}, ".xsession": {shellScript},
	".gnomerc": {shellScript}, ".config/plasma-workspace/env/*.sh": {shellScript},
}

// Markers of rcFiles whose files are no list of commands: shellScript is sh, read as
// shellNames reads a start-up file; pamEnv is pam_env's syntax; fishUniversal is fish's
// fish_variables (SETUVAR [--export] NAME:VALUE, a list's items split by \x1e).
const (
	shellScript   = "#!/bin/sh"
	pamEnv        = "VAR DEFAULT= OVERRIDE="
	fishUniversal = "SETUVAR"
)

// envAssignments marks a file of NAME=VALUE lines (environment.d, which sets the environment of
// the user's systemd services and, on many desktops, their session): each read as a start-up
// file's assignment is, for every variable shellNames knows (PATH, EDITOR, BASH_ENV,
// JAVA_TOOL_OPTIONS, KUBECONFIG, ...).
const envAssignments = "NAME=VALUE"

var (
	// tmuxCommands: anywhere on a line (a hook's or a key's command, a status line's #(…)).
	tmuxCommands = []string{"source-file", "source", "run-shell", "run", "if-shell", "if", "default-command", "default-shell", "#"}
	gdbCommands  = []string{"source", "so", "shell", "!", "python", "py", "pi"}
	fishCommands = []string{"source", ".", "fish_add_path", "alias", "bash", "sh", "python3", "python"}
)

// pathVars are the variables whose values name dirs or files that load code, as a fish
// `set -gx NAME …` or an environment.d NAME=… gives them.
var pathVars = map[string]bool{"PATH": true, "fish_user_paths": true, "LD_LIBRARY_PATH": true, "GIT_EXEC_PATH": true,
	"LD_PRELOAD": true, "PYTHONSTARTUP": true, "fish_function_path": true, "fish_complete_path": true}

// tmuxPrograms are tmux commands that run a shell command given after their options (with
// their aliases), each with the option whose value is the start dir, which names no code.
var tmuxPrograms = map[string]byte{"new-session": 'c', "new": 'c', "new-window": 'c', "neww": 'c',
	"split-window": 'c', "splitw": 'c', "respawn-pane": 'c', "respawnp": 'c', "respawn-window": 'c',
	"respawnw": 'c', "display-popup": 'd', "popup": 'd', "pipe-pane": 0, "pipep": 0}

// fishLeads run the command after them: `contains X $PATH; or set -p PATH X`, `builtin set`.
var fishLeads = map[string]bool{"and": true, "or": true, "not": true, "!": true, "begin": true, "if": true, "else": true,
	"while": true, "command": true, "builtin": true, "exec": true}

// maxRCFiles bounds the files read for rcFiles (environment.d holds any number).
const maxRCFiles = 64

var rcNamesCache = newParsedFiles(func(n rcFileNames) int { return stringsSize(n.named) + 32*len(n.moved) })

// rcFileNames is what one such file names, and the configs it moves (fish's
// `set -gx GIT_CONFIG_GLOBAL ~/p/gitconfig`), which their tools read as they read the home's.
type rcFileNames struct {
	named []string
	moved []movedConfig
}

// rcNamedPaths returns what rcFiles in home name, absolute and clean. Run as the caller.
func rcNamedPaths(home string, uid uint32, missing func(string) bool) ([]string, error) {
	if home == "" || home == "/" {
		return nil, nil
	}
	var starts []string
	cmds := map[string][]string{}
	for rel, c := range rcFiles {
		files := []string{filepath.Join(home, rel)}
		if strings.Contains(rel, "*") {
			files, _ = filepath.Glob(filepath.Join(home, rel)) // a dir the kernel keeps read-only
		}
		for _, f := range files {
			starts = append(starts, f)
			cmds[f] = c
		}
	}
	var moved []movedConfig
	named, err := followNamed(starts, maxRCFiles, missing, func(p string, out *namedSet, read func(string)) bool {
		names, ok := rcNamesCache.get(p, home, uid, maxShellFileBytes, func(b []byte) rcFileNames { return rcParse(b, home, cmds[p]) })
		if !ok {
			return false
		}
		moved = append(moved, names.moved...)
		for _, n := range names.named {
			out.add(n)
			// A file it sources (tmux's source-file, fish's source) is read as its own kind; a
			// script so read names nothing. Only the home's: the system's cannot be written,
			// and each read counts against maxRCFiles.
			if !strings.HasPrefix(n, home+"/") {
				continue
			}
			if _, known := cmds[n]; !known {
				cmds[n] = cmds[p]
			}
			read(n)
		}
		return true
	})
	if err != nil || len(moved) == 0 {
		return named, err
	}
	// What the moved configs name (a hooks path, an fsmonitor), as for bash's export.
	more, err := movedNamedPaths(moved, home, uid)
	if err != nil {
		return nil, err
	}
	return append(named, more...), nil
}

// rcNames is each path-like word (absolute, ~/, $HOME/, ${HOME}/) of src's commands (a line,
// or its parts between ;) after one of cmds anywhere in it, the values a NAME=… line or a
// fish `set [-flags] NAME …` gives pathVars, and a program a command runs by its path.
func rcNames(src []byte, home string, cmds []string) []string {
	return rcParse(src, home, cmds).named
}

// rcParse is rcNames, with the configs a fish set moves.
func rcParse(src []byte, home string, cmds []string) rcFileNames {
	var out []string
	var moved []movedConfig
	switch {
	case slices.Contains(cmds, shellScript):
		n := shellNames(src, home)
		return rcFileNames{named: slices.Concat(n.named, n.sourced, movedFiles(n.moved)), moved: n.moved}
	case slices.Contains(cmds, pamEnv):
		return rcParse(pamAssignments(src), home, []string{envAssignments})
	case slices.Contains(cmds, fishUniversal):
		for _, line := range strings.Split(string(src), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "SETUVAR" {
				continue
			}
			nv := f[len(f)-1]
			if len(f) > 2 && f[1] == "--export" {
				nv = strings.Join(f[2:], " ")
			} else {
				nv = strings.Join(f[1:], " ")
			}
			name, val, ok := strings.Cut(nv, ":")
			if !ok {
				continue
			}
			var vals []string
			for _, v := range strings.Split(val, `\x1e`) {
				vals = append(vals, fishUnescape(v))
			}
			named, cfg := fishSetNames(name, vals, home)
			if pathVars[name] {
				for _, v := range vals {
					if p := homePath(v, home); p != "" {
						named = append(named, p)
					}
				}
			}
			out, moved = append(out, named...), append(moved, cfg...)
		}
		return rcFileNames{named: slices.DeleteFunc(out, func(p string) bool { return aboveOrHome(p, home) }), moved: moved}
	}
	add := func(words []string) {
		for _, w := range words {
			for _, part := range strings.Split(w, ":") {
				if p := homePath(part, home); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	fields := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t|&()<>`\"'", r) })
	}
	// fish's for loops open: `for f in ~/p/conf/*.fish; source $f; end` sources what the glob
	// matches, now or once a call made it there, so its dir is named whole (a file listed, the
	// file) where the body sources the variable.
	type loop struct {
		v      string
		items  []string
		source bool
	}
	var blocks []*loop // one for each open block, nil for those that are not for loops
	for _, line := range strings.Split(string(src), "\n") {
		if slices.Contains(cmds, envAssignments) {
			// Its ${NAME} and $NAME expand as the shell's do, and quotes around a value go
			// (systemd reads it as an EnvironmentFile); quoted, nothing else of it is shell.
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && fishVarName(k) {
				if len(v) > 1 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
					v = v[1 : len(v)-1]
				}
				n := shellNames([]byte(k+`="`+envQuote.Replace(v)+"\"\n"), home)
				out = append(slices.Concat(out, n.named, n.sourced), movedFiles(n.moved)...)
				moved = append(moved, n.moved...)
			}
			continue
		}
		for _, cmd := range strings.Split(line, ";") {
			words := fields(cmd)
			if len(words) == 0 {
				continue
			}
			lead := words // the command that opens or ends a block: `and begin`, not `else if`
			for len(lead) > 1 && lead[0] != "else" && fishLeads[lead[0]] && lead[0] != "if" && lead[0] != "while" && lead[0] != "begin" {
				lead = lead[1:]
			}
			switch lead[0] {
			case "for":
				l := &loop{}
				if len(lead) > 2 && lead[2] == "in" {
					l.v = "$" + lead[1]
					l.items = lead[3:]
				}
				blocks = append(blocks, l)
			case "function", "if", "while", "begin", "switch":
				blocks = append(blocks, nil)
			case "end":
				if len(blocks) > 0 {
					if l := blocks[len(blocks)-1]; l != nil && l.source {
						for _, it := range l.items {
							if p := homePath(it, home); p != "" {
								if strings.ContainsAny(p, "*?[") {
									p = globDir(p)
								}
								out = append(out, p)
							}
						}
					}
					blocks = blocks[:len(blocks)-1]
				}
			}
			if slices.Contains(words, "source") || slices.Contains(words, ".") {
				for _, l := range blocks {
					if l != nil && l.v != "$" && (slices.Contains(words, l.v) || slices.Contains(words, "{"+l.v+"}")) {
						l.source = true
					}
				}
			}
			// tmux's commands that run a program: its path-like words, not the start dir.
			for i, w := range words {
				dirOpt, ok := tmuxPrograms[w]
				if !ok || !slices.Contains(cmds, "source-file") {
					continue
				}
				rest := words[i+1:]
				for j := 0; j < len(rest); j++ {
					if o := rest[j]; dirOpt != 0 && len(o) > 1 && o[0] == '-' && o[1] != '-' && o[len(o)-1] == dirOpt {
						j++ // -c ~/proj: where it starts
						continue
					}
					out = append(out, pathWords(rest[j], home)...)
				}
				break
			}
			// Each command of it (after &&, ||, |, and fish's and, or, not, if, else, builtin…):
			// a set of a PATH, and a program run by its path.
			for _, part := range strings.FieldsFunc(cmd, func(r rune) bool { return r == '&' || r == '|' }) {
				head := fields(part)
				for len(head) > 0 && (fishLeads[head[0]] || strings.Contains(head[0], "=") && !strings.HasPrefix(head[0], "/")) {
					head = head[1:] // and the assignments before a command: FOO=1 ~/p/x
				}
				if len(head) == 0 {
					continue
				}
				if head[0] == "set" {
					rest := head[1:]
					for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
						rest = rest[1:]
					}
					if len(rest) > 0 && pathVars[rest[0]] {
						add(rest[1:])
					} else if len(rest) > 0 && rest[0] != "" {
						named, cfg := fishSetNames(rest[0], rest[1:], home)
						out, moved = append(out, named...), append(moved, cfg...)
					}
				} else if strings.Contains(head[0], "/") {
					add(head[:1])
				}
			}
			for i, w := range words {
				if slices.Contains(cmds, w) {
					add(words[i+1:])
					break
				}
			}
		}
	}
	// The home or a dir above it would keep every session in the home read-only.
	return rcFileNames{named: slices.DeleteFunc(out, func(p string) bool { return aboveOrHome(p, home) }), moved: moved}
}

// fishSetNames is what a fish `set NAME VALUES…` names where bash's NAME=… would
// (shellNames: EDITOR's program, BASH_ENV's file, JAVA_TOOL_OPTIONS' agent, GIT_CONFIG_*, a
// PYTHONPATH dir's sitecustomize): fish exports the list joined by a colon for a *PATH name,
// else by a space, and expands ~ and $HOME in it.
func fishSetNames(name string, vals []string, home string) (named []string, moved []movedConfig) {
	if !fishVarName(name) {
		return nil, nil
	}
	vals = slices.Clone(vals)
	for i, v := range vals {
		if p := homePath(v, home); p != "" && !filepath.IsAbs(v) {
			vals[i] = p
		}
	}
	sep := " "
	if strings.HasSuffix(name, "PATH") {
		sep = ":"
	}
	v := strings.Join(vals, sep)
	n := shellNames([]byte(name+"='"+strings.ReplaceAll(v, "'", `'\''`)+"'\n"), home)
	out := append(slices.Concat(n.named, n.sourced), movedFiles(n.moved)...)
	for _, d := range n.zdotdirs {
		for _, f := range zshStartup {
			out = append(out, filepath.Join(d, f))
		}
	}
	return out, n.moved
}

// pamAssignments turns pam_env lines (VAR [DEFAULT=[value]] [OVERRIDE=[value]], @{HOME} and
// ${HOME} for the home) into NAME=VALUE lines, one for each value a variable may take.
func pamAssignments(src []byte) []byte {
	var b strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || !fishVarName(f[0]) {
			continue
		}
		for _, opt := range f[1:] {
			for _, k := range []string{"DEFAULT=", "OVERRIDE="} {
				if v, ok := strings.CutPrefix(opt, k); ok {
					v = strings.NewReplacer("@{HOME}", "${HOME}", "@{SHELL}", "${SHELL}").Replace(v)
					b.WriteString(f[0] + "=" + v + "\n")
				}
			}
		}
	}
	return []byte(b.String())
}

// fishUnescape undoes fish_variables' \xHH escapes (a space is \x20).
func fishUnescape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+3 < len(v) && v[i+1] == 'x' {
			if n, err := strconv.ParseUint(v[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// envQuote escapes what double quotes would take as their end, an escape or a command.
var envQuote = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`")

// movedFiles are the git configs among moved, named as the files they are (a tool's config
// is named by its variable already).
func movedFiles(moved []movedConfig) []string {
	var out []string
	for _, m := range moved {
		if m.kind == gitKind {
			out = append(out, m.path)
		}
	}
	return out
}

// fishVarName is a shell variable's name.
func fishVarName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// homePath is w as an absolute, clean path where it names one by itself (absolute, or from the
// home: ~/, $HOME/, ${HOME}/), else "".
func homePath(w, home string) string {
	for _, h := range []string{"~", "$HOME", "${HOME}"} {
		if w == h || strings.HasPrefix(w, h+"/") {
			return filepath.Join(home, w[len(h):])
		}
	}
	if filepath.IsAbs(w) {
		return filepath.Clean(w)
	}
	return ""
}
