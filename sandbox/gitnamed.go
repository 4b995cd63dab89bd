package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/regfile"
)

// The git configs among the protected paths (a repository's .git/config and config.worktree,
// ~/.gitconfig, ~/.config/git/config) are read-only, but they may name other files git then
// takes as code or config: core.hooksPath is where git runs every hook from instead of
// .git/hooks (a project's `.githooks`, set up so the hooks are versioned), init.templateDir is
// what git init and git clone copy into every new repository, hooks included, and include.path and
// includeIf.*.path are read as config (a project's own `.gitconfig`). Such a file in a writable
// dir is as much git's config or hooks as .git/config is, so it is protected like them.

// maxGitNamedConfigs bounds the config files read to find them (those that exist), includes
// and submodules' included: past it, nothing runs, as what a config past it names would be
// left writable.
const maxGitNamedConfigs = 256

// errTooManyGitConfigs refuses a call whose repositories hold more git configs than are read.
var errTooManyGitConfigs = fmt.Errorf("%w: the repositories in the session's dirs hold more than %d git configs (submodules' and includes counted), and what one names as hooks or programs is kept read-only only when it is read; open the session in fewer repositories", ErrBadSpec, maxGitNamedConfigs)

// gitNamedPaths returns what the git configs among candidates (absolute, clean) name as hooks
// or config, absolute and clean: core.hooksPath and init.templateDir, whose hooks git init and
// git clone copy into a new repository (relative hooksPath: to each worktree among
// candidates, where git runs hooks), include.path and includeIf.*.path (relative: to the
// including file's dir), `~/` as home. The included files are read as well, and so are
// extra, configs found elsewhere (GIT_CONFIG_GLOBAL). A config that exists but cannot be read
// fails the whole: what it names would be left writable. Run as the caller.
func gitNamedPaths(candidates, extra []string, home string) ([]string, error) {
	// A relative hooksPath is taken in whichever worktree git runs: each dir among the
	// candidates that holds a .git, a linked worktree's .git file too (its config is the main
	// repository's, which the session holds as another dir).
	var configs, worktrees, gitDirs []string
	gitconfig, xdgGit := "", ""
	if home != "" {
		gitconfig, xdgGit = filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config/git")
	}
	for _, c := range candidates {
		dir, base := filepath.Split(c) // c is clean: dir is it less its last name, and a "/"
		if dir != "/" {
			dir = dir[:len(dir)-1]
		}
		switch {
		case filepath.Base(dir) == ".git" && (base == "config" || base == "config.worktree"):
			configs = appendNew(configs, c)
			if base == "config" {
				// Its submodules' git dirs: each config is git's when it runs in the
				// submodule's worktree, by convention the path below modules/ in the
				// superproject (.git/modules/a/modules/b is a/b), where its relative paths
				// are taken.
				for _, p := range gitDirPaths(dir, 0) {
					if mdir, rel, ok := strings.Cut(filepath.Dir(p), "/.git/modules/"); ok && filepath.Base(p) == "config" {
						configs = appendNew(configs, p)
						worktrees = appendNew(worktrees, filepath.Join(mdir, strings.ReplaceAll(rel, "/modules/", "/")))
					}
				}
			}
		case base == ".git":
			if _, err := os.Lstat(c); err == nil && !slices.Contains(worktrees, dir) {
				worktrees = append(worktrees, dir)
			}
			if gd := gitFileDir(c); gd != "" {
				// `git init --separate-git-dir`, a worktree, a submodule: the .git file
				// names the git dir, whose config and hooks are git's as .git's are.
				for _, d := range append([]string{gd}, commonDir(gd)...) {
					for _, p := range gitDirPaths(d, 0) {
						gitDirs = appendNew(gitDirs, p)
						if b := filepath.Base(p); b == "config" || b == "config.worktree" {
							configs = appendNew(configs, p)
						}
					}
				}
			}
		case base == "HEAD" && isGitDir(dir):
			// The dir is itself a git dir (a bare repository as a session's dir): its config
			// and hooks are git's as a .git dir's are, and a relative hooksPath is taken there.
			worktrees = appendNew(worktrees, dir)
			for _, p := range gitDirPaths(dir, 0) {
				gitDirs = appendNew(gitDirs, p)
				if b := filepath.Base(p); b == "config" || b == "config.worktree" {
					configs = appendNew(configs, p)
				}
			}
		case home != "" && c == gitconfig:
			configs = append(configs, c)
		case home != "" && c == xdgGit:
			configs = append(configs, filepath.Join(c, "config"))
		}
	}
	expand := func(p, rel string) string {
		for _, h := range []string{"$HOME/", "${HOME}/"} {
			if rest, ok := strings.CutPrefix(p, h); ok {
				p = "~/" + rest // a command value's shell reads it as the home
			}
		}
		switch {
		case strings.HasPrefix(p, "~/") && home != "":
			return filepath.Join(home, p[2:])
		case filepath.IsAbs(p):
			return filepath.Clean(p)
		case p == "", rel == "", strings.HasPrefix(p, "~"), strings.HasPrefix(p, "%("):
			return ""
		}
		return filepath.Join(rel, p)
	}
	for _, c := range extra {
		configs = appendNew(configs, c)
	}
	var out namedSet
	for _, p := range gitDirs {
		out.add(p)
	}
	add := out.add
	inConfigs := map[string]bool{}
	for _, c := range configs {
		inConfigs[c] = true
	}
	read := 0
	for i := 0; i < len(configs); i++ {
		hooks, includes, exists, err := gitConfigNames(configs[i])
		if err != nil {
			return nil, err
		}
		if !exists {
			continue // most candidates are not there, and take nothing of the bound
		}
		if read++; read > maxGitNamedConfigs {
			return nil, errTooManyGitConfigs
		}
		for _, h := range hooks {
			add(expand(h, ""))
			for _, wt := range worktrees {
				add(expand(h, wt))
			}
		}
		for _, inc := range includes {
			p := expand(inc, filepath.Dir(configs[i]))
			add(p)
			if p != "" && !inConfigs[p] {
				inConfigs[p] = true
				configs = append(configs, p)
			}
		}
	}
	return out.list()
}

// isGitDir reports whether dir is a git dir as git tells one: a HEAD file beside objects/ and
// refs/ dirs. Run as the caller.
func isGitDir(dir string) bool {
	for name, wantDir := range map[string]bool{"HEAD": false, "objects": true, "refs": true} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() != wantDir || !wantDir && !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// gitDirProtected are the paths of a git dir protected as .git's are (ProtectedInDir).
var gitDirProtected = []string{"config", "config.worktree", "hooks", "info/attributes", "commondir"}

// maxGitFileBytes bounds a .git file or commondir read: a path and a newline.
const maxGitFileBytes = 4096

// Bounds of the look into a git dir's submodules and worktrees (gitDirPaths), as
// ProtectedPatterns' for a .git dir: three levels of modules, so many entries a level.
const (
	maxGitDirDepth   = 3
	maxGitDirEntries = 256
)

// gitDirPaths are the protected paths of the git dir gd, as a .git dir's are (ProtectedInDir
// and ProtectedPatterns): its own config and hooks, its submodules' under modules/ (up to
// three levels), and its linked worktrees' commondir and config.worktree. Run as the caller.
func gitDirPaths(gd string, depth int) []string {
	var out []string
	for _, rel := range gitDirProtected {
		out = append(out, filepath.Join(gd, rel))
	}
	if depth >= maxGitDirDepth {
		return out
	}
	for _, m := range dirEntries(filepath.Join(gd, "modules")) {
		out = append(out, gitDirPaths(filepath.Join(gd, "modules", m), depth+1)...)
	}
	if depth == 0 {
		for _, w := range dirEntries(filepath.Join(gd, "worktrees")) {
			out = append(out, filepath.Join(gd, "worktrees", w, "commondir"), filepath.Join(gd, "worktrees", w, "config.worktree"))
		}
	}
	return out
}

// dirEntries names the dirs in dir, up to maxGitDirEntries; none when it cannot be read.
func dirEntries(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	es, _ := f.ReadDir(maxGitDirEntries)
	var out []string
	for _, e := range es {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// gitFileDir is the git dir a .git file at p names ("gitdir: PATH", PATH relative to the
// file's dir), absolute and clean; "" when p is no such file.
func gitFileDir(p string) string {
	b, ok := readRegular(p, maxGitFileBytes)
	if !ok {
		return ""
	}
	// As git reads it: only the line's end is cut.
	d, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), "gitdir: ")
	if !ok || d == "" || strings.ContainsRune(d, 0) {
		return ""
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(filepath.Dir(p), d)
	}
	return filepath.Clean(d)
}

// commonDir is the dir a git dir's commondir file names (a worktree's: the main repository's
// git dir, which holds its config and hooks), relative to the git dir; none when it has none.
func commonDir(gitDir string) []string {
	b, ok := readRegular(filepath.Join(gitDir, "commondir"), maxGitFileBytes)
	if !ok {
		return nil
	}
	d := strings.TrimRight(string(b), "\r\n")
	if d == "" || strings.ContainsRune(d, 0) {
		return nil
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(gitDir, d)
	}
	return []string{filepath.Clean(d)}
}

// maxGitConfigRead bounds a git config read for what it names.
const maxGitConfigRead = 1 << 20

// gitConfigNames reads one git config and returns its core.hooksPath and init.templateDir
// values and the programs its commands name by path (gitRunsValue), and its include.path and
// includeIf.*.path values, as written. A file that is not there names nothing (git skips a
// missing include too); one that is there but cannot be read whole (no regular file, larger
// than maxGitConfigRead, refused) is an error: git may read it, and what it names is unknown.
func gitConfigNames(p string) (hooks, includes []string, exists bool, err error) {
	b, err := regfile.Read(p, maxGitConfigRead)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil, false, nil
	}
	if err != nil && isDevNull(p) {
		return nil, nil, true, nil // GIT_CONFIG_SYSTEM=/dev/null, git's way to skip a level
	}
	if err != nil {
		return nil, nil, true, fmt.Errorf("%w: cannot read the git config %s to learn what it names as hooks or programs, which are kept read-only: %v", ErrBadSpec, p, err)
	}
	exists = true
	// As git reads it: a byte-order mark skipped, a line ending in a backslash continued.
	text := strings.TrimPrefix(string(b), "\xef\xbb\xbf")
	text = strings.NewReplacer("\\\r\n", "", "\\\n", "").Replace(text)
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.Trim(strings.TrimSuffix(line, "\r"), " \t")
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				section = ""
				continue
			}
			head := strings.TrimSpace(line[1:end])
			name, sub, _ := strings.Cut(head, " ")
			if i := strings.IndexByte(name, '.'); i >= 0 { // the old [section.sub] form
				name, sub = name[:i], "x"
			}
			section = strings.ToLower(name)
			if strings.TrimSpace(sub) != "" {
				section += ".*"
			}
			line = strings.TrimSpace(line[end+1:]) // a key may follow on the same line
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch section + "." + strings.ToLower(strings.TrimSpace(key)) {
		case "core.hookspath":
			hooks = append(hooks, gitValue(val))
		case "init.templatedir":
			// What git init and git clone copy into the new repository, hooks included
			// (post-checkout runs at once): only an absolute or ~/ one means one place.
			if v := gitValue(val); filepath.IsAbs(v) || strings.HasPrefix(v, "~/") {
				hooks = append(hooks, v)
			}
		case "include.path", "includeif.*.path":
			includes = append(includes, gitValue(val))
		default:
			// A program git runs (core.fsmonitor = ./scripts/fsmonitor, a filter's
			// ./tools/clean, an alias's !./x) named by its path: the file is as much git's
			// code as a hook.
			if k := section + "." + strings.ToLower(strings.TrimSpace(key)); gitRunsValue(k) {
				hooks = append(hooks, programPaths(gitValue(val))...)
				// An alias pointing git at a repository kept apart (`dot = !git
				// --git-dir=$HOME/.cfg`, `dot = --git-dir=/p/gd status`): that repository's
				// config, read as git's, hooks and attributes.
				for _, d := range gitDirWords(gitValue(val)) {
					hooks = append(hooks, filepath.Join(d, "config"), filepath.Join(d, "hooks"), filepath.Join(d, "info", "attributes"))
					includes = append(includes, filepath.Join(d, "config"))
				}
			}
		}
	}
	return hooks, includes, exists, nil
}

// isDevNull reports whether p is the null device (a link to it too).
func isDevNull(p string) bool {
	var st, null unix.Stat_t
	return unix.Stat(p, &st) == nil && unix.Stat(os.DevNull, &null) == nil &&
		st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == null.Rdev
}

// gitRunsValue reports a config key whose value git runs as a command: git config's list
// of such keys (the fsmonitor, pagers, editors, ssh and proxies, askpass, diff, merge and
// filter drivers, diff and merge tools, credential helpers, gpg programs, pack programs,
// send-email's and trailers' commands, browsers, man viewers, submodule update commands,
// aliases).
func gitRunsValue(key string) bool {
	switch key {
	case "core.fsmonitor", "core.pager", "core.editor", "core.sshcommand", "core.askpass", "core.gitproxy", "sequence.editor",
		"core.alternaterefscommand", "imap.tunnel", "tar.*.command",
		"diff.external", "gpg.program", "gpg.*.program", "gpg.*.defaultkeycommand", "credential.helper", "credential.*.helper",
		"interactive.difffilter", "diff.*.command", "diff.*.textconv", "merge.*.driver",
		"filter.*.clean", "filter.*.smudge", "filter.*.process", "uploadpack.packobjectshook",
		"difftool.*.cmd", "difftool.*.path", "mergetool.*.cmd", "mergetool.*.path", "remote.*.uploadpack", "remote.*.receivepack",
		"trailer.*.cmd", "trailer.*.command", "submodule.*.update", "web.browser", "browser.*.cmd", "browser.*.path",
		"man.*.cmd", "man.*.path", "guitool.*.cmd", "instaweb.httpd":
		return true
	}
	return strings.HasPrefix(key, "alias.") || strings.HasPrefix(key, "pager.") || strings.HasPrefix(key, "sendemail.")
}

// gitDirWords are the absolute (or ~/, $HOME/) dirs a command value gives git's --git-dir.
func gitDirWords(v string) []string {
	var out []string
	words := strings.Fields(strings.TrimPrefix(strings.TrimSpace(v), "!"))
	for i, w := range words {
		d, ok := strings.CutPrefix(w, "--git-dir=")
		if !ok && w == "--git-dir" && i+1 < len(words) {
			d, ok = words[i+1], true
		}
		if d = strings.Trim(d, `"'`); ok && (filepath.IsAbs(d) || strings.HasPrefix(d, "~/") || strings.HasPrefix(d, "$HOME/") || strings.HasPrefix(d, "${HOME}/")) {
			out = append(out, d)
		}
	}
	return out
}

// programPaths are the paths a command value names (words with a /, an alias's ! dropped):
// the program it runs and the scripts it hands one (`!sh tools/t.sh`). A bare name is looked
// up on PATH, a program of the system's or the user's, which are protected where they may be.
func programPaths(v string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.TrimPrefix(strings.TrimSpace(v), "!"), func(r rune) bool {
		return r == ' ' || r == '\t' || r == ';' || r == '&' || r == '|' || r == '(' || r == ')'
	}) {
		if w = strings.Trim(w, `"'`); strings.Contains(w, "/") && !strings.HasPrefix(w, "-") {
			out = append(out, w)
		}
	}
	return out
}

// gitValue is a config value as git reads it: quotes removed, a comment outside them cut,
// backslash escapes resolved.
func gitValue(v string) string {
	v = strings.TrimSpace(v)
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimRight(b.String(), " \t")
		default:
			b.WriteByte(c)
		}
	}
	return strings.Trim(b.String(), " \t")
}

// envValue is the value of key in env (KEY=value entries), "" when absent.
func envValue(env []string, key string) string {
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// GitNamedPaths is what the git configs among candidates name as hooks or config
// (gitNamedPaths), read as the caller: for the daemon's own check before a file tool writes,
// since the file worker has no sweep to move aside what it makes there.
func GitNamedPaths(uid, gid uint32, groups []uint32, candidates []string, home string) ([]string, error) {
	var out []string
	var named error
	err := asCaller(uid, gid, groups, func() { out, named = gitNamedPaths(candidates, nil, home) })
	return out, cmp.Or(err, named)
}
