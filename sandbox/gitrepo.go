package sandbox

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A repository a call makes where the user runs git (a writable dir, the dirs down to the
// cwd, the home) is where the user's next `git status`, or a shell prompt showing it, reads a
// config and runs hooks outside the sandbox. `git init` and `git clone` write a config of a
// few known keys and hooks that are only samples; a repository's config naming anything else
// (core.fsmonitor, core.hooksPath, filter drivers, aliases, an include), a hook, a commondir
// or a worktree config is what could run code there, and is moved aside.

// maxGitConfigBytes bounds a new repository's config that is read at all; a larger one is
// moved aside unread.
const maxGitConfigBytes = 64 << 10

// safeGitKeys are the config keys `git init`, `git clone` (its submodules too) and the
// commands an agent uses to set a repository up write, none of which runs a program or names
// a file git reads as config or code: section, then "*" when the section takes a
// subsection, then the key; all lower case as git compares them.
var safeGitKeys = setOf(
	"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.autocrlf",
	"core.eol", "core.safecrlf", "core.quotepath",
	"extensions.objectformat", "extensions.refstorage",
	"remote.*.url", "remote.*.pushurl", "remote.*.fetch", "remote.*.push", "remote.*.tagopt",
	"remote.*.mirror", "remote.*.prune", "remote.*.promisor", "remote.*.partialclonefilter",
	"branch.*.remote", "branch.*.merge", "branch.*.rebase", "branch.*.pushremote",
	"submodule.*.url", "submodule.*.active", "submodule.*.branch",
	"user.name", "user.email", "init.defaultbranch",
)

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

var (
	gitSection = regexp.MustCompile(`^\[([A-Za-z0-9-]+)(?:[ \t]+"((?:[^"\\\n]|\\.)*)")?\][ \t]*(?:[#;].*)?$`)
	gitKey     = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:=(.*))?$`)
)

// safeGitConfig reports whether a git config holds only safeGitKeys, and core.worktree only
// with a value worktreeOK passes (plain: no quote, escape or comment). What it cannot read
// strictly (a continued line, the old [section.sub] form, a key after a section header on one
// line, a NUL, anything else git's own writers never write) is unsafe.
func safeGitConfig(b []byte, worktreeOK func(string) bool) bool {
	if len(b) > maxGitConfigBytes || strings.IndexByte(string(b), 0) >= 0 {
		return false
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.Trim(strings.TrimSuffix(line, "\r"), " \t")
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if m := gitSection.FindStringSubmatchIndex(line); m != nil {
			section = strings.ToLower(line[m[2]:m[3]])
			if m[4] >= 0 {
				section += ".*" // [remote "origin"]
			}
			continue
		}
		m := gitKey.FindStringSubmatch(line)
		if m == nil || section == "" || strings.HasSuffix(m[2], `\`) {
			return false
		}
		if key := section + "." + strings.ToLower(m[1]); key == "core.worktree" {
			// Where git checks files out: one outside the repository's dir (a home whose
			// .bashrc the repository tracks) is written by the user's next git reset there.
			v := strings.TrimSpace(m[2])
			if v == "" || strings.ContainsAny(v, `\"#;`) || !worktreeOK(v) {
				return false
			}
		} else if !safeGitKeys[key] {
			return false
		}
	}
	return true
}

// RepoBelow reports whether a dir from cwd up to, but not including, top holds a repository
// git would take before top's (a .git, or a HEAD as a bare repository has), looked at as the
// caller; a look that fails counts as one. top's own repository is the one every call's
// plan protects (its .git/config, its HEAD); one below it may have been made by a call while
// it was no dir git ran in, from names no protected path lists (cp -r .git/logs sub, then
// sub/config), and git run there takes its config as code.
func RepoBelow(uid, gid uint32, groups []uint32, top, cwd string) bool {
	found := true
	err := asCaller(uid, gid, groups, func() {
		found = false
		for d := cwd; d != top && under(d, top); d = path.Dir(d) {
			for _, name := range []string{".git", "HEAD"} {
				var st unix.Stat_t
				if err := unix.Lstat(path.Join(d, name), &st); err == nil || err != unix.ENOENT && err != unix.ENOTDIR {
					found = true
					return
				}
			}
		}
	})
	return found || err != nil
}

// WorktreeTop is the top of the git worktree dir lies in, looked at as the caller: the nearest
// dir from dir up whose .git git takes, a worktree's file or a dir holding HEAD (git passes
// over an empty .git dir, which an archive can make below the real top), or dir when none
// does. A look that fails gives "/", above whatever the worktree may be.
func WorktreeTop(uid, gid uint32, groups []uint32, dir string) string {
	top := "/"
	err := asCaller(uid, gid, groups, func() {
		for d := dir; ; d = path.Dir(d) {
			var st unix.Stat_t
			err := unix.Lstat(path.Join(d, ".git"), &st)
			if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				err = unix.Lstat(path.Join(d, ".git", "HEAD"), &st)
			}
			switch {
			case err == nil:
				top = d
				return
			case err != unix.ENOENT && err != unix.ENOTDIR:
				return
			case d == "/" || d == ".":
				top = dir
				return
			}
		}
	})
	if err != nil {
		return "/"
	}
	return top
}

// PartialClone reports whether git run in dir, as the caller, works in a partial clone: its
// repository's config (a .git dir's, the one a .git file names, or a bare repository's, and
// the common dir a worktree's names) sets extensions.partialClone or a promisor remote. There
// git fetches any object it lacks from that remote as it reads (git show, log -p, cat-file -p
// of an id the agent chose), so no git command is read-only. Unreadable counts as one.
func PartialClone(uid, gid uint32, groups []uint32, dir string) bool {
	top := WorktreeTop(uid, gid, groups, dir)
	found := true
	err := asCaller(uid, gid, groups, func() {
		gitDir := path.Join(top, ".git")
		if b, ok := readRegular(gitDir, 4096); ok {
			// A worktree's or a submodule's .git file: "gitdir: PATH", relative to top.
			p, cut := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
			if !cut {
				return
			}
			if gitDir = strings.TrimSpace(p); !path.IsAbs(gitDir) {
				gitDir = path.Join(top, gitDir)
			}
		} else if _, err := os.Lstat(gitDir); err != nil {
			gitDir = top // a bare repository, or none (no config then)
		}
		dirs := []string{gitDir}
		if b, ok := readRegular(path.Join(gitDir, "commondir"), 4096); ok {
			c := strings.TrimSpace(string(b))
			if !path.IsAbs(c) {
				c = path.Join(gitDir, c)
			}
			dirs = append(dirs, c)
		}
		found = false
		for _, d := range dirs {
			b, ok := readRegular(path.Join(d, "config"), maxGitConfigBytes)
			if !ok {
				if _, err := os.Lstat(path.Join(d, "config")); err == nil {
					found = true // there, and not read: a FIFO, too large to read, unreadable
				}
				continue
			}
			// An include or a worktree's own config may hold the remote: not read here, so
			// not shown not to be one.
			c := strings.ToLower(string(b))
			for _, s := range []string{"partialclone", "promisor", "include", "worktreeconfig"} {
				found = found || strings.Contains(c, s)
			}
		}
	})
	return found || err != nil
}

// repoRoots are the dirs the user's git runs in as the project's (protectedRoots: the writable
// dirs and the dirs down to the cwd), each in its writable dir.
func repoRoots(writable []string, cwd string) []guarded {
	var out []guarded
	for _, d := range protectedRoots(writable, cwd) {
		for _, w := range writable {
			if under(d, w) {
				out = append(out, guarded{root: w, rel: strings.TrimPrefix(strings.TrimPrefix(d, w), "/")})
				break
			}
		}
	}
	return out
}

// gitlinksOf returns the gitlinks each of repos' index holds now, nil where it cannot tell: a
// sweep takes a gitlink added since for the call's. Run as the caller; tenant's walkShare pays.
func gitlinksOf(tenant uint32, repos []guarded, c *gitlinkCache) []map[string]fileID {
	out := make([]map[string]fileID, len(repos))
	for i, r := range repos {
		rfd, err := unix.Open(r.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		out[i] = c.gitlinksAt(tenant, rfd, r.rel)
		unix.Close(rfd)
	}
	return out
}

// Bounds of the look into a new repository's submodule git dirs: deeper or wider is moved
// aside whole.
const (
	maxGitModuleDepth   = 8
	maxGitModuleEntries = 512
)

// unsafeInNewRepo returns what in the git dir gitDir (below the dir fd rfd, reached without
// symlinks) the user's git would run or read as config: relative to rfd, to be moved aside.
// Run as the caller.
func unsafeInNewRepo(rfd int, gitDir string) []string {
	return unsafeInGitDir(rfd, gitDir, nil)
}

// gitStart is what of a repository's git dirs the plan found when the call started, and
// protects in place: paths (a git dir's config, hooks, commondir and config.worktree: read-only
// where they existed, moved aside if made where they did not), the git dirs that hold them, and
// the dirs of names on the way from a modules dir to a submodule's git dir ("vendor" of
// modules/vendor/foo). Relative to one writable dir. nil for a repository the call made.
type gitStart struct {
	paths, gitDirs, levels map[string]bool
	// asides are where the call's earlier sweeps moved what they moved: a dir moved aside from
	// a modules or worktrees dir sits beside its old name, new, and looked into again it
	// would only go aside again, beside itself, its count of names taken from the bounds.
	asides map[string]bool
}

// newGitStart is gitStart for the repositories below root, from the plan's covered and
// guarded paths there.
func newGitStart(root string, covers []covered, guard []guarded) *gitStart {
	s := &gitStart{paths: map[string]bool{}, gitDirs: map[string]bool{}, levels: map[string]bool{}, asides: map[string]bool{}}
	add := func(r, rel string) {
		if r == root && slices.Contains(moduleProtected, path.Base(rel)) {
			s.paths[rel] = true
			s.gitDirs[path.Dir(rel)] = true
		}
	}
	for _, c := range covers {
		add(c.root, c.rel)
	}
	for _, g := range guard {
		add(g.root, g.rel)
	}
	for g := range s.gitDirs {
		for d := path.Dir(g); strings.Contains(d, "/modules") && !s.gitDirs[d] && d != "." && d != "/"; d = path.Dir(d) {
			s.levels[d] = true
			if path.Base(d) == "modules" {
				break
			}
		}
	}
	return s
}

func (s *gitStart) had(rel string) bool    { return s != nil && s.paths[rel] }
func (s *gitStart) gitDir(rel string) bool { return s != nil && s.gitDirs[rel] }
func (s *gitStart) aside(rel string) bool  { return s != nil && s.asides[rel] }
func (s *gitStart) level(rel string) bool  { return s != nil && s.levels[rel] }

// children counts the git dirs and levels of start directly in dir.
func (s *gitStart) children(dir string) int {
	n := 0
	if s != nil {
		for _, m := range []map[string]bool{s.gitDirs, s.levels} {
			for d := range m {
				if path.Dir(d) == dir {
					n++
				}
			}
		}
	}
	return n
}

// unsafeInGitDir is unsafeInNewRepo for a git dir that may have existed when the call started
// (start): only what is new is looked at. A submodule's git dir `git submodule update --init`
// made, or a worktree `git worktree add` made, is one the user's git later runs in (git status
// recurses into submodules): what of it would run code goes, as in a new repository. What the
// plan protected (start.had) is the user's, whatever it holds.
func unsafeInGitDir(rfd int, gitDir string, start *gitStart) []string {
	var out []string
	budget := maxGitModuleEntries
	unsafe := func(p string) { out = append(out, p) }
	// checkNew flags what of the git dir dir's config and code is new and unsafe.
	checkNew := func(dir string) {
		for _, name := range []string{"commondir", "config.worktree"} {
			if p := path.Join(dir, name); !start.had(p) && exists(rfd, p) {
				unsafe(p)
			}
		}
		worktreeOK := func(v string) bool {
			return worktreeWithin(gitDir, dir, v) && dirWithoutLinks(rfd, path.Join(dir, v))
		}
		if cfg := path.Join(dir, "config"); !start.had(cfg) && exists(rfd, cfg) && (!safeGitConfigAt(rfd, cfg, worktreeOK) || hardLinked(rfd, cfg)) {
			unsafe(cfg)
		}
		if hooks := path.Join(dir, "hooks"); !start.had(hooks) && exists(rfd, hooks) {
			names := namesIn(rfd, hooks)
			ok := names != nil
			for n := range names {
				ok = ok && strings.HasSuffix(n, ".sample") && !hardLinked(rfd, path.Join(hooks, n))
			}
			if !ok {
				unsafe(hooks)
			}
		}
	}
	var look func(dir string, depth int)
	look = func(dir string, depth int) {
		if !inspectable(rfd, dir) {
			// chmod 000 .git as the call's last step: every look below would find nothing,
			// and the user, told to make it searchable, would run what it holds.
			unsafe(dir)
			return
		}
		checkNew(dir)
		if wt := path.Join(dir, "worktrees"); depth == 0 && exists(rfd, wt) {
			// A linked worktree's admin dir: its commondir must lead back here. Its
			// submodules' git dirs are in its own modules dir.
			names := namesIn(rfd, wt)
			if names == nil {
				unsafe(wt)
			}
			for n := range names {
				w := path.Join(wt, n)
				if start.aside(w) {
					continue
				}
				if c := path.Join(w, "commondir"); !start.had(c) && exists(rfd, c) {
					if b, ok := readBeneath(rfd, c); !ok || strings.TrimSpace(string(b)) != "../.." {
						unsafe(c)
					}
				}
				if p := path.Join(w, "config.worktree"); !start.had(p) && exists(rfd, p) {
					unsafe(p)
				}
				if mods := path.Join(w, "modules"); exists(rfd, mods) {
					lookModules(rfd, mods, depth+1, &budget, start, look, unsafe)
				}
			}
		}
		if mods := path.Join(dir, "modules"); exists(rfd, mods) {
			lookModules(rfd, mods, depth+1, &budget, start, look, unsafe)
		}
	}
	look(gitDir, 0)
	return out
}

// lookModules walks a modules dir: a dir holding HEAD is a submodule's git dir (checked by
// look); any other is a level of a submodule's name ("lib/x" is modules/lib/x); a link or file
// there is unsafe (git follows a link to a git dir anywhere). A new dir deeper or wider than
// the bounds is unsafe whole, as is one that cannot be read. What existed (start) costs none of
// the bounds: a repository's own submodules, however many, are looked through for new ones;
// only a level of theirs the call made unreadable, or filled with more new names than the
// bounds, goes whole, the user's submodules with it.
func lookModules(rfd int, dir string, depth int, budget *int, start *gitStart, look func(string, int), unsafe func(string)) {
	if start.gitDir(dir) {
		look(dir, depth)
		return
	}
	level, max := start.level(dir), maxListed
	if level {
		max = start.children(dir) + maxGitModuleEntries
	}
	names := namesInMax(rfd, dir, max)
	if !level {
		*budget -= len(names)
	}
	if names == nil || !level && (depth > maxGitModuleDepth || *budget < 0) {
		unsafe(dir)
		return
	}
	if names["HEAD"] {
		look(dir, depth)
		return
	}
	for n := range names {
		switch sub := path.Join(dir, n); {
		case start.aside(sub):
		case isDirBeneath(rfd, sub):
			lookModules(rfd, sub, depth+1, budget, start, look, unsafe)
		case !start.gitDir(sub) && !start.level(sub):
			unsafe(sub)
		}
	}
}

// worktreeWithin reports whether core.worktree v, in the config of the git dir dir (both
// relative to the same root, top the repository's own .git), names the repository's dir or a
// dir below it outside top: a submodule's ../../../lib. Absolute, or past the repository, or
// into its git dir (where a checkout would write hooks), is not.
func worktreeWithin(top, dir, v string) bool {
	if path.IsAbs(v) {
		return false
	}
	repo, t := path.Dir(top), path.Join(dir, v)
	return (repo == "." && t != ".." && !strings.HasPrefix(t, "../") || t == repo || strings.HasPrefix(t, repo+"/")) &&
		t != top && !strings.HasPrefix(t, top+"/")
}

// dirWithoutLinks reports whether rel below rfd is a dir reached without a symlink: a work
// tree named through a link (../w, w -> ~) is where the link leads, outside the repository.
func dirWithoutLinks(rfd int, rel string) bool {
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// hardLinked reports whether rel below rfd is a file with another name: a call that made a
// repository and linked its config (or a hook) to a name outside the git dir could write it
// there in a later call, past the read-only mount of the path.
func hardLinked(rfd int, rel string) bool {
	var st unix.Stat_t
	return unix.Fstatat(rfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1
}

// inspectable reports whether the dir rel below rfd can be both listed and searched: what a
// dir that cannot be holds is unknown.
func inspectable(rfd int, rel string) bool {
	var st unix.Stat_t
	return namesIn(rfd, rel) != nil && unix.Fstatat(rfd, rel+"/.", &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// exists reports whether rel exists below rfd (reached without following a symlink); a
// symlink counts as existing.
func exists(rfd int, rel string) bool {
	var st unix.Stat_t
	return unix.Fstatat(rfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// gitDirOf is where the git dir of the repository at dir lies: its .git dir (a link to one
// followed), the dir its .git file names (git init --separate-git-dir, a linked worktree's
// admin dir), or dir itself for a bare repository, resolved, as the writable dir that holds it
// and the path below that. False when there is none, or it lies in no writable dir: a call
// cannot write there. Run as the caller.
func gitDirOf(v *fsView, dir string, writable []string) (root, rel string, ok bool) {
	gd := filepath.Join(dir, ".git")
	fi, err := os.Stat(gd)
	switch {
	case err == nil && fi.IsDir():
	case err == nil && fi.Mode().IsRegular():
		if gd = gitFileDir(gd); gd == "" {
			return "", "", false
		}
	case isGitDir(dir):
		gd = dir
	default:
		return "", "", false
	}
	gd = resolve(v, gd)
	for _, w := range writable {
		if under(gd, w) {
			if rel = "."; gd != w {
				rel = strings.TrimPrefix(gd[len(w):], "/")
			}
			return w, rel, true
		}
	}
	return "", "", false
}

// Bounds of the look for a repository's submodules' git dirs whose rebase state is checked:
// past them the rest are not.
const (
	maxStateModuleDepth   = 8
	maxStateModuleEntries = 4096
)

// runStateDirs are the git dirs below rfd whose rebase, cherry-pick or revert the user may
// continue: gd, its linked worktrees' admin dirs and its submodules' git dirs (each rebases on
// its own), within the bounds.
func runStateDirs(rfd int, gd string) []string {
	dirs := []string{gd}
	budget := maxStateModuleEntries
	var modules func(dir string, depth int)
	modules = func(dir string, depth int) {
		names := namesIn(rfd, dir)
		if budget -= len(names); budget < 0 || depth > maxStateModuleDepth {
			return
		}
		for n := range names {
			sub := path.Join(dir, n)
			if !isDirBeneath(rfd, sub) {
				continue
			}
			if exists(rfd, path.Join(sub, "HEAD")) {
				dirs = append(dirs, sub)
				modules(path.Join(sub, "modules"), depth+1)
			} else {
				modules(sub, depth+1)
			}
		}
	}
	for w := range namesIn(rfd, path.Join(gd, "worktrees")) {
		if wt := path.Join(gd, "worktrees", w); isDirBeneath(rfd, wt) {
			dirs = append(dirs, wt)
			modules(path.Join(wt, "modules"), 1)
		}
	}
	modules(path.Join(gd, "modules"), 1)
	return dirs
}

// runStateTodos are the to-do lists, in a git dir, whose lines the user's next `git rebase
// --continue` (or cherry-pick, revert) runs: an exec line there is a shell command, run
// unconfined. A rebase keeps its list writable, since git rewrites it at each step.
var runStateTodos = []string{"rebase-merge/git-rebase-todo", "sequencer/todo"}

// runStateNamed are the files, in a git dir, from which the user's next --continue takes the
// name of a program it runs: the merge strategy (`git merge-<name>`, which a name with a `/`
// makes a path in the worktree) and its options. git writes them when the operation starts
// and never after, so any change a call makes is one git did not.
var runStateNamed = []string{"rebase-merge/strategy", "rebase-merge/strategy_opts", "sequencer/opts"}

// maxTodoBytes bounds a to-do list or named file read; one the call left larger is moved aside
// unread.
const maxTodoBytes = 1 << 20

// todoExecs returns the exec lines of the to-do list rel below rfd (each as written, blanks at
// its ends dropped); found is false when there is none, ok false when it cannot be read whole.
func todoExecs(rfd int, rel string) (execs map[string]bool, found, ok bool) {
	if !exists(rfd, rel) {
		return nil, false, true
	}
	b, ok := readBeneathMax(rfd, rel, maxTodoBytes)
	if !ok {
		return nil, true, false
	}
	execs = map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.Trim(line, " \t\r")
		// As git's parser reads a command: its name or its one-letter abbreviation, then
		// blanks (a bare "exec" is an error to git, which stops there).
		cmd, _, _ := strings.Cut(strings.ReplaceAll(line, "\t", " "), " ")
		if cmd == "x" || cmd == "exec" {
			execs[line] = true
		}
	}
	return execs, true, true
}

// runState is what the repositories' rebase, cherry-pick and revert state held when the call
// started, by each file's absolute path: the to-do lists' exec lines, the named files' content.
type runState struct {
	execs map[string]map[string]bool
	named map[string]string
}

// runStateOf reads the run state of repos' git dirs, run as the caller.
func runStateOf(repos []guarded, writable []string) runState {
	st := runState{execs: map[string]map[string]bool{}, named: map[string]string{}}
	v := newFSView()
	for _, r := range repos {
		root, gd, ok := gitDirOf(v, filepath.Join(r.root, r.rel), writable)
		if !ok {
			continue
		}
		rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		for _, d := range runStateDirs(rfd, gd) {
			for _, t := range runStateTodos {
				if execs, found, _ := todoExecs(rfd, path.Join(d, t)); found {
					st.execs[path.Join(root, d, t)] = execs
				}
			}
			for _, n := range runStateNamed {
				if b, ok := readBeneathMax(rfd, path.Join(d, n), maxTodoBytes); ok {
					st.named[path.Join(root, d, n)] = string(b)
				}
			}
		}
		unix.Close(rfd)
	}
	return st
}

// changed returns what of the run state of the git dir gd (below rfd, in the writable dir root)
// the call changed so that the user's --continue would run a program it did not: a to-do list
// holding an exec line it did not, a named file made or changed, either one that can no longer
// be read whole. Relative to rfd, to be moved aside.
func (st runState) changed(rfd int, root, gd string) []string {
	var out []string
	for _, d := range runStateDirs(rfd, gd) {
		for _, t := range runStateTodos {
			rel := path.Join(d, t)
			execs, found, ok := todoExecs(rfd, rel)
			if !found {
				continue
			}
			had, added := st.execs[path.Join(root, rel)], !ok
			for l := range execs {
				added = added || !had[l]
			}
			if added {
				out = append(out, rel)
			}
		}
		for _, n := range runStateNamed {
			rel := path.Join(d, n)
			if !exists(rfd, rel) {
				continue
			}
			b, ok := readBeneathMax(rfd, rel, maxTodoBytes)
			if was, had := st.named[path.Join(root, rel)]; !ok || !had || string(b) != was {
				out = append(out, rel)
			}
		}
	}
	return out
}

func isDirBeneath(rfd int, rel string) bool {
	var st unix.Stat_t
	return unix.Fstatat(rfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// safeGitConfigAt reports whether the config file rel below rfd is one safeGitConfig passes;
// one that cannot be read is not.
func safeGitConfigAt(rfd int, rel string, worktreeOK func(string) bool) bool {
	b, ok := readBeneath(rfd, rel)
	return ok && safeGitConfig(b, worktreeOK)
}

// readRegular reads the first limit bytes of the regular file at p, a link followed as the
// program that reads it follows it; false for anything else. The open does not block: a FIFO
// put where a config is read would hold the daemon's thread until someone wrote to it.
func readRegular(p string, limit int64) ([]byte, bool) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	return b, err == nil
}

// readBeneath reads the regular file rel below rfd, reached without a symlink or a step out;
// false when it cannot, or when it is larger than maxGitConfigBytes.
func readBeneath(rfd int, rel string) ([]byte, bool) {
	return readBeneathMax(rfd, rel, maxGitConfigBytes)
}

// readBeneathMax is readBeneath with a bound of limit bytes.
func readBeneathMax(rfd int, rel string, limit int) ([]byte, bool) {
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > int64(limit) {
		return nil, false
	}
	b, err := readFD(fd, limit)
	return b, err == nil
}
