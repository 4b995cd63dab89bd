package sandbox

import (
	"path/filepath"
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
	".tmux.conf":                   {"source-file", "source", "run-shell", "run", "if-shell", "if"},
	".config/tmux/tmux.conf":       {"source-file", "source", "run-shell", "run", "if-shell", "if"},
	".gdbinit":                     {"source", "so"},
	".config/gdb/gdbinit":          {"source", "so"},
	".config/fish/config.fish":     {"source", ".", "fish_add_path"},
	".config/environment.d/*.conf": {"PATH"},
}

// maxRCFiles bounds the files read for rcFiles (environment.d holds any number).
const maxRCFiles = 32

var rcNamesCache = newParsedFiles(func(n []string) int { return stringsSize(n) })

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
	return followNamed(starts, maxRCFiles, missing, func(p string, out *namedSet, _ func(string)) {
		names, ok := rcNamesCache.get(p, home, uid, maxShellFileBytes, func(b []byte) []string { return rcNames(b, home, cmds[p]) })
		if !ok {
			return
		}
		for _, n := range names {
			out.add(n)
		}
	})
}

// rcNames is each path-like word (absolute, ~/, $HOME/, ${HOME}/) on the lines of src that
// start with one of cmds, or for "PATH", in a PATH= line's value.
func rcNames(src []byte, home string, cmds []string) []string {
	var out []string
	for _, line := range strings.Split(string(src), "\n") {
		words := strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t;|&()<>`\"'", r) })
		if len(words) == 0 {
			continue
		}
		first, rest := words[0], words[1:]
		if k, v, ok := strings.Cut(first, "="); ok && k == "PATH" {
			first, rest = k, append(strings.Split(v, ":"), rest...)
		}
		match := false
		for _, c := range cmds {
			match = match || first == c
		}
		if !match {
			continue
		}
		for _, w := range rest {
			for _, part := range strings.Split(w, ":") {
				if p := homePath(part, home); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
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
